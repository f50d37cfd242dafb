// Filled in by the package's own work; see README.md.
export {};

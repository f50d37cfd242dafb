/**
 * The simulator's CI seed window: SEEDS_PER_FILE seeds in each of FILES test files (vitest runs
 * the files in parallel), from seed 1. The mutation check runs the same window.
 */
export const SEEDS_PER_FILE = 60;
export const FILES = 4;

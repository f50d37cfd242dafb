#!/usr/bin/env node
// The `mocra` bin: run the CLI and exit with its code (docs/cli.md).
import { main } from './program.js';

const code = await main(process.argv.slice(2));
process.exitCode = code;
// Everything was written synchronously; do not let a lingering handle keep a finished CLI alive.
setTimeout(() => process.exit(code), 500).unref();

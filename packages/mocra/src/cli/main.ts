#!/usr/bin/env node
// The `mocra` bin: run the CLI and exit with its code (docs/cli.md).
//
// While the CLI's modules load, V8 is held lean: its young generation at its start size
// (2 MB) and its old generation's headroom at 50 %. A crawl caps both later (--young-generation,
// --heap-growth), but a cap stops growth without undoing it: left alone, module loading grows
// the young generation to 16 MB and sets the first full-GC limit at ~4× the live heap, and a
// 5,000-page crawl of 50 KB pages peaked 20 MB higher for it. Then V8's own settings are
// restored and each command applies its flags. A V8 flag node was started with is left alone.
import v8 from 'node:v8';

const nodeArgs = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
// [what node may have been started with, the lean setting, V8's own] — V8 reads `_` as `-`.
const whileLoading: [given: RegExp, lean: string, v8Own: string][] = [
  [/semi[-_]space/, '--semi-space-growth-factor=1', '--semi-space-growth-factor=2'],
  [/heap[-_]growing[-_]percent/, '--heap-growing-percent=50', '--heap-growing-percent=0'],
];
const applied = whileLoading.filter(([given]) => !nodeArgs.some((arg) => given.test(arg)));
for (const [, lean] of applied) v8.setFlagsFromString(lean);
// A computed specifier, so that the bundler keeps the program in its own file, loaded only now.
const program: typeof import('./program.js') = await import(new URL('./program.js', import.meta.url).href);
for (const [, , v8Own] of applied) v8.setFlagsFromString(v8Own);

const code = await program.main(process.argv.slice(2));
process.exitCode = code;
// Everything was written synchronously; do not let a lingering handle keep a finished CLI alive.
setTimeout(() => process.exit(code), 500).unref();

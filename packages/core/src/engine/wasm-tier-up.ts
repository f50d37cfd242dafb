/**
 * Whether V8 optimises WebAssembly after its quick first compile — in a crawler, that is
 * undici's HTTP parser (llhttp, compiled to WebAssembly).
 *
 * V8 compiles WebAssembly twice: at once with its baseline compiler (Liftoff), and again with
 * its optimising compiler for the functions that run hot. llhttp is one huge state-machine
 * function, and optimising it takes ~30 MB of compiler memory for a fraction of a second,
 * early in every crawl: on a crawl of 50 KB pages that moment is the process's peak RSS. The
 * baseline code parses HTTP as fast for a crawl (the parser is a sliver of a page's CPU next
 * to its HTML; measured in docs/benchmarks.md), so the `mocra` CLI turns the second compile
 * off.
 *
 * A process-wide V8 setting that applies to WebAssembly compiled after it (undici compiles its
 * parser at the first connection), so the library never sets it on its own:
 * `Mocra.builder().wasmTierUp(false)` is the opt-in, and a process started with its own
 * `--liftoff-only` or `--wasm-tier-up` flag keeps it.
 */
import v8 from 'node:v8';
import { startedWithV8Flag } from './v8-flags.js';

export type WasmTierUpResult =
  /** The setting applies to WebAssembly compiled from now on. */
  | 'set'
  /** The process was started with its own WebAssembly compiler flags; they stay. */
  | 'kept';

/** Let V8 optimise hot WebAssembly (its default) or keep the baseline code. See the module comment. */
export function setWasmTierUp(enabled: boolean): WasmTierUpResult {
  if (startedWithV8Flag('--liftoff-only', '--liftoff', '--wasm-tier-up', '--wasm-dynamic-tiering'))
    return 'kept';
  v8.setFlagsFromString(enabled ? '--no-liftoff-only' : '--liftoff-only');
  return 'set';
}

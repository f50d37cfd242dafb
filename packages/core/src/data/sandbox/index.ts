/**
 * A sandbox for a site's own JavaScript and WebAssembly, on isolated-vm (an optional peer
 * dependency, loaded on first use).
 *
 * @module @mocra/core/sandbox
 */
export type { JsWorkerPoolOptions, JsWorkerPoolStats } from './pool.js';
export { JsWorkerPool } from './pool.js';
export type { HostFunction, JsonValue, JsRuntimeOptions, RunOptions, WasmImports } from './runtime.js';
export { JsRuntime } from './runtime.js';

/**
 * `mocra/sandbox`: run a site's own JavaScript and WebAssembly in isolates (install: pnpm add isolated-vm).
 *
 * @module mocra/sandbox
 */
export type {
  HostFunction,
  JsonValue,
  JsRuntimeOptions,
  JsWorkerPoolOptions,
  JsWorkerPoolStats,
  RunOptions,
  WasmImports,
} from '@mocra/core/sandbox';
export { JsRuntime, JsWorkerPool } from '@mocra/core/sandbox';

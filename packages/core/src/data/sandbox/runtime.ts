/**
 * `JsRuntime`: a V8 isolate of its own (isolated-vm) for running a site's JavaScript and
 * WebAssembly — signing functions, token generators, obfuscated challenges.
 *
 * The isolate shares nothing with Node: no `process`, `require`, `import`, `fetch`, timers or
 * file system — only the JavaScript language, `WebAssembly`, and the host functions registered
 * here. Values cross as copies and must be JSON-safe. Each call runs under a time limit (the
 * isolate is interrupted, and stays usable) and the isolate under a memory limit (heap and
 * ArrayBuffers; going over disposes the isolate, which a pool replaces).
 */
import fs from 'node:fs';
import type * as Ivm from 'isolated-vm';
import { InvalidArgumentError, SandboxError } from '../../errors.js';
import { requireOptional } from '../../optional-dependency.js';

type IvmModule = typeof Ivm & { default?: typeof Ivm };

/** A value that can cross into or out of the sandbox. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A function of the host that page code may call; arguments and result are copies. */
export type HostFunction = (...args: JsonValue[]) => JsonValue | undefined | Promise<JsonValue | undefined>;

export interface JsRuntimeOptions {
  /** The isolate's memory limit in MiB (heap and ArrayBuffers together; isolated-vm's minimum is 8). @default 64 */
  memoryLimitMb?: number;
  /** The time limit of each `exec`, `evaluate` and `call`, in milliseconds. @default 1000 */
  timeoutMs?: number;
}

export interface RunOptions {
  /** This run's time limit. @default the runtime's timeoutMs */
  timeoutMs?: number;
  /** The file name in stack traces. @default 'page.js' */
  filename?: string;
}

export interface WasmImports {
  /** Import module → import name → the global (a registered host function or a page function) it binds to. */
  [module: string]: Record<string, string>;
}

function loadIvm(): typeof Ivm {
  const mod = requireOptional<IvmModule>('isolated-vm', 'The JavaScript sandbox');
  return mod.default ?? mod;
}

export class JsRuntime {
  readonly #ivm: typeof Ivm;
  readonly #isolate: Ivm.Isolate;
  readonly #context: Ivm.Context;
  readonly #timeoutMs: number;
  #closed = false;

  constructor(options: JsRuntimeOptions = {}) {
    const memoryLimit = options.memoryLimitMb ?? 64;
    this.#timeoutMs = options.timeoutMs ?? 1000;
    if (!Number.isFinite(memoryLimit) || memoryLimit < 8) {
      throw new InvalidArgumentError(
        `JsRuntime: memoryLimitMb must be at least 8 (got ${String(options.memoryLimitMb)})`,
      );
    }
    if (!Number.isInteger(this.#timeoutMs) || this.#timeoutMs < 1) {
      throw new InvalidArgumentError(
        `JsRuntime: timeoutMs must be a positive integer (got ${String(options.timeoutMs)})`,
      );
    }
    this.#ivm = loadIvm();
    this.#isolate = new this.#ivm.Isolate({ memoryLimit });
    this.#context = this.#isolate.createContextSync();
    // Page scripts expect a global object by the usual names.
    this.#context.evalSync('globalThis.window = globalThis.self = globalThis;');
  }

  /** True once closed, or once the isolate was disposed for going over its memory limit. */
  get closed(): boolean {
    return this.#closed || this.#isolate.isDisposed;
  }

  /** Heap bytes the isolate uses now (for watching a long-lived runtime). */
  heapUsed(): number {
    this.#check();
    const stats = this.#isolate.getHeapStatisticsSync();
    return stats.used_heap_size + stats.externally_allocated_size;
  }

  /** Run a script (its top-level functions and `var`s become globals). */
  async exec(code: string, options: RunOptions = {}): Promise<void> {
    this.#check();
    if (typeof code !== 'string') throw new InvalidArgumentError('JsRuntime.exec: code must be a string');
    await this.#guard(async () => {
      const script = await this.#isolate.compileScript(code, { filename: options.filename ?? 'page.js' });
      try {
        await script.run(this.#context, { timeout: options.timeoutMs ?? this.#timeoutMs });
      } finally {
        script.release();
      }
    });
  }

  /** Run a script file of the host (read here; the sandbox itself reads nothing). */
  async execFile(file: string, options: RunOptions = {}): Promise<void> {
    return this.exec(fs.readFileSync(file, 'utf8'), { filename: file, ...options });
  }

  /** Evaluate an expression; its value (awaited if a promise) must be JSON-safe. */
  async evaluate(expression: string, options: RunOptions = {}): Promise<JsonValue | undefined> {
    this.#check();
    return this.#guard(
      () =>
        this.#context.eval(expression, {
          timeout: options.timeoutMs ?? this.#timeoutMs,
          filename: options.filename ?? 'evaluate.js',
          promise: true,
          copy: true,
        }) as unknown as Promise<JsonValue | undefined>,
    );
  }

  /**
   * Call a function of the page by its global name or dotted path (`'sign'`,
   * `'signer.exports.mix'`) with JSON-safe arguments; the result (awaited if a promise) is copied out.
   */
  async call(name: string, ...args: JsonValue[]): Promise<JsonValue | undefined> {
    return this.callWith(name, args);
  }

  /** `call` with its own options. */
  async callWith(
    name: string,
    args: readonly JsonValue[],
    options: RunOptions = {},
  ): Promise<JsonValue | undefined> {
    this.#check();
    const fn = this.#resolve(name);
    const copies = args.map((a, i) => jsonCopy(a, `argument ${i} of ${name}()`));
    return this.#guard(async () => {
      const ref = await fn;
      try {
        if (ref.typeof !== 'function')
          throw new SandboxError(
            'MOCRA_ERR_SANDBOX_SCRIPT',
            `'${name}' is not a function in the sandbox (${ref.typeof})`,
          );
        return (await ref.apply(undefined, copies, {
          timeout: options.timeoutMs ?? this.#timeoutMs,
          arguments: { copy: true },
          result: { promise: true, copy: true },
        })) as JsonValue | undefined;
      } finally {
        ref.release();
      }
    });
  }

  /** Make a host function callable from page code as a global `name` (synchronously). */
  register(name: string, fn: HostFunction): void {
    this.#check();
    checkName(name);
    if (typeof fn !== 'function')
      throw new InvalidArgumentError(`JsRuntime.register('${name}'): expected a function`);
    const callback = new this.#ivm.Callback((...args: unknown[]) => {
      const result = fn(...(args as JsonValue[]));
      if (result instanceof Promise) {
        throw new TypeError(`host function ${name} returned a promise; register it with registerAsync`);
      }
      return result === undefined ? undefined : jsonCopy(result, `the result of host function ${name}`);
    });
    this.#context.global.setSync(name, callback);
  }

  /** Like `register`, for a host function that returns a promise: page code gets a promise. */
  registerAsync(name: string, fn: HostFunction): void {
    this.#check();
    checkName(name);
    // A Callback cannot wait for a host promise; a Reference applied with `result.promise` can.
    const ref = new this.#ivm.Reference(async (...args: unknown[]) => {
      const result = await fn(...(args as JsonValue[]));
      return result === undefined ? undefined : jsonCopy(result, `the result of host function ${name}`);
    });
    const slot = `__mocraHost_${name}`;
    this.#context.global.setSync(slot, ref);
    this.#context.evalSync(
      `{ const ref = globalThis.${slot}; delete globalThis.${slot};
         globalThis.${name} = (...args) => ref.apply(undefined, args, { arguments: { copy: true }, result: { promise: true, copy: true } }); }`,
    );
  }

  /** Set a global to a copy of a JSON-safe value. */
  setGlobal(name: string, value: JsonValue): void {
    this.#check();
    checkName(name);
    this.#context.global.setSync(
      name,
      new this.#ivm.ExternalCopy(jsonCopy(value, `global ${name}`)).copyInto({ release: true }),
    );
  }

  /**
   * Compile and instantiate a WebAssembly module inside the sandbox and put its exports at
   * `globalThis[name]`, where page code (and `call(\`${name}.fn\`)`) finds them. `imports`
   * binds the module's imports to globals of the sandbox.
   */
  async instantiateWasm(name: string, bytes: Uint8Array, imports: WasmImports = {}): Promise<void> {
    this.#check();
    checkName(name);
    if (!(bytes instanceof Uint8Array))
      throw new InvalidArgumentError('JsRuntime.instantiateWasm: bytes must be a Uint8Array');
    const copy = new this.#ivm.ExternalCopy(
      bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength),
    );
    const slot = `__mocraWasm${Math.random().toString(36).slice(2)}`;
    this.#context.global.setSync(slot, copy.copyInto({ release: true }));
    const importObject = Object.entries(imports)
      .map(
        ([mod, fields]) =>
          `${JSON.stringify(mod)}: {${Object.entries(fields)
            .map(([k, g]) => `${JSON.stringify(k)}: globalThis[${JSON.stringify(g)}]`)
            .join(', ')}}`,
      )
      .join(', ');
    await this.exec(
      `globalThis[${JSON.stringify(name)}] = new WebAssembly.Instance(new WebAssembly.Module(new Uint8Array(globalThis.${slot})), {${importObject}}).exports;
       delete globalThis.${slot};`,
      { filename: `${name}.wasm` },
    );
  }

  /** Call an export of a module set up with `instantiateWasm`. */
  async callWasm(name: string, exportName: string, ...args: number[]): Promise<JsonValue | undefined> {
    return this.call(`${name}.${exportName}`, ...args);
  }

  /** Dispose the isolate. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#isolate.isDisposed) this.#isolate.dispose();
  }

  #check(): void {
    if (this.closed)
      throw new SandboxError(
        'MOCRA_ERR_SANDBOX_CLOSED',
        'the sandbox runtime is closed (or was disposed after going over its memory limit)',
      );
  }

  /** A reference to the function at a dotted path of the global object. */
  async #resolve(name: string): Promise<Ivm.Reference> {
    if (!/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(name))
      throw new InvalidArgumentError(`JsRuntime.call: '${name}' is not a name or dotted path`);
    const parts = name.split('.');
    let ref: Ivm.Reference = await this.#context.global.get(parts[0]!, { reference: true });
    for (const part of parts.slice(1)) {
      const next: Ivm.Reference = await ref.get(part, { reference: true });
      ref.release();
      ref = next;
    }
    return ref;
  }

  /** Run `work`, turning isolated-vm's failures into SandboxErrors with codes. */
  async #guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw this.#translate(err);
    }
  }

  #translate(err: unknown): Error {
    if (err instanceof SandboxError || err instanceof InvalidArgumentError) return err;
    const e = err instanceof Error ? err : new Error(String(err));
    const message = e.message;
    if (this.#isolate.isDisposed || /disposed during execution due to memory limit/i.test(message)) {
      this.#closed = true;
      return new SandboxError(
        'MOCRA_ERR_SANDBOX_MEMORY',
        'page code went over the sandbox memory limit; the isolate was disposed',
        e.stack,
        { cause: e },
      );
    }
    if (/Script execution timed out/i.test(message)) {
      return new SandboxError(
        'MOCRA_ERR_SANDBOX_TIMEOUT',
        'page code ran past its time limit and was stopped',
        undefined,
        { cause: e },
      );
    }
    if (
      /Array buffer allocation failed|Out of memory|Invalid typed array length/i.test(message) &&
      e.name === 'RangeError'
    ) {
      return new SandboxError(
        'MOCRA_ERR_SANDBOX_MEMORY',
        `page code asked for more memory than the sandbox allows: ${message}`,
        e.stack,
        { cause: e },
      );
    }
    if (/could not be cloned|non-transferable|not transferable/i.test(message)) {
      return new SandboxError(
        'MOCRA_ERR_SANDBOX_VALUE',
        `a value crossing the sandbox is not JSON-safe: ${message}`,
        undefined,
        { cause: e },
      );
    }
    return new SandboxError(
      'MOCRA_ERR_SANDBOX_SCRIPT',
      `page code threw: ${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${message}`,
      e.stack,
      { cause: e },
    );
  }
}

function checkName(name: string): void {
  if (typeof name !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(name)) {
    throw new InvalidArgumentError(`sandbox global name '${String(name)}' is not an identifier`);
  }
}

/** A deep copy of a JSON-safe value, or a SANDBOX_VALUE error naming what is not. */
export function jsonCopy(value: unknown, what: string, seen = new Set<object>()): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new SandboxError('MOCRA_ERR_SANDBOX_VALUE', `${what} is ${value}, which JSON cannot hold`);
    return value;
  }
  if (typeof value === 'object') {
    if (seen.has(value)) throw new SandboxError('MOCRA_ERR_SANDBOX_VALUE', `${what} contains a cycle`);
    seen.add(value);
    try {
      if (Array.isArray(value)) return value.map((v, i) => jsonCopy(v, `${what}[${i}]`, seen));
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new SandboxError(
          'MOCRA_ERR_SANDBOX_VALUE',
          `${what} is a ${proto?.constructor?.name ?? 'class instance'}, not a plain object`,
        );
      }
      const out: Record<string, JsonValue> = {};
      for (const [k, v] of Object.entries(value))
        if (v !== undefined) out[k] = jsonCopy(v, `${what}.${k}`, seen);
      return out;
    } finally {
      seen.delete(value);
    }
  }
  throw new SandboxError(
    'MOCRA_ERR_SANDBOX_VALUE',
    `${what} is a ${typeof value}, which cannot cross the sandbox`,
  );
}

/**
 * `JsWorkerPool`: N sandbox runtimes set up the same way (the site's script, its WASM, host
 * functions), and a queue of calls. isolated-vm runs each isolate on its own thread, so N calls
 * run at once. A runtime whose isolate went over its memory limit is replaced (set up again)
 * before it takes the next call; a timeout leaves the runtime in place.
 *
 *   call ─▶ [ queue ] ─▶ first free runtime ─▶ result
 *                           │ disposed (memory) ─▶ new runtime, setup again
 */
import { InvalidArgumentError, SandboxError } from '../../errors.js';
import { type JsonValue, JsRuntime, type JsRuntimeOptions } from './runtime.js';

export interface JsWorkerPoolOptions extends JsRuntimeOptions {
  /** Runtimes (isolates) in the pool. @default 2 */
  size?: number;
  /** Prepares each runtime: exec the site's script, instantiate its WASM, register host functions. */
  setup?: (runtime: JsRuntime) => void | Promise<void>;
}

export interface JsWorkerPoolStats {
  size: number;
  busy: number;
  queued: number;
  /** Runtimes replaced after their isolate was disposed. */
  replaced: number;
  calls: number;
}

interface Slot {
  runtime: Promise<JsRuntime>;
  busy: boolean;
}

interface Waiter {
  resolve: (slot: Slot) => void;
  reject: (err: unknown) => void;
}

export class JsWorkerPool {
  readonly #options: JsRuntimeOptions;
  readonly #setup: ((runtime: JsRuntime) => void | Promise<void>) | undefined;
  readonly #slots: Slot[] = [];
  readonly #queue: Waiter[] = [];
  #closed = false;
  #replaced = 0;
  #calls = 0;

  constructor(options: JsWorkerPoolOptions = {}) {
    const { size = 2, setup, ...runtimeOptions } = options;
    if (!Number.isInteger(size) || size < 1)
      throw new InvalidArgumentError(`JsWorkerPool: size must be a positive integer (got ${String(size)})`);
    this.#options = runtimeOptions;
    this.#setup = setup;
    for (let i = 0; i < size; i++) this.#slots.push({ runtime: this.#start(), busy: false });
    // A setup that fails is reported by the first call that uses the runtime, not here.
    for (const slot of this.#slots) slot.runtime.catch(() => {});
  }

  /** Resolves when every runtime is set up; rejects with the first setup error. */
  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s.runtime));
  }

  get stats(): JsWorkerPoolStats {
    return {
      size: this.#slots.length,
      busy: this.#slots.filter((s) => s.busy).length,
      queued: this.#queue.length,
      replaced: this.#replaced,
      calls: this.#calls,
    };
  }

  /** Call a page function on the next free runtime. */
  async call(name: string, ...args: JsonValue[]): Promise<JsonValue | undefined> {
    return this.run((runtime) => runtime.call(name, ...args));
  }

  /** Run `work` with a runtime of the pool to itself (several calls in a row, one state). */
  async run<T>(work: (runtime: JsRuntime) => Promise<T>): Promise<T> {
    if (this.#closed) throw new SandboxError('MOCRA_ERR_SANDBOX_CLOSED', 'the worker pool is closed');
    const slot = await this.#acquire();
    this.#calls++;
    try {
      let runtime = await slot.runtime;
      if (runtime.closed) {
        slot.runtime = this.#start();
        this.#replaced++;
        runtime = await slot.runtime;
      }
      return await work(runtime);
    } finally {
      await this.#release(slot);
    }
  }

  /** Dispose every runtime; queued calls fail with SANDBOX_CLOSED. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const waiter of this.#queue.splice(0)) {
      waiter.reject(
        new SandboxError('MOCRA_ERR_SANDBOX_CLOSED', 'the worker pool was closed before the call ran'),
      );
    }
    await Promise.all(
      this.#slots.map((s) =>
        s.runtime.then(
          (r) => r.close(),
          () => {},
        ),
      ),
    );
  }

  async #start(): Promise<JsRuntime> {
    const runtime = new JsRuntime(this.#options);
    try {
      await this.#setup?.(runtime);
    } catch (err) {
      runtime.close();
      throw err;
    }
    return runtime;
  }

  #acquire(): Promise<Slot> {
    const free = this.#slots.find((s) => !s.busy);
    if (free) {
      free.busy = true;
      return Promise.resolve(free);
    }
    return new Promise((resolve, reject) => this.#queue.push({ resolve, reject }));
  }

  async #release(slot: Slot): Promise<void> {
    // Replace a runtime lost to its memory limit now, so the next call does not pay for it.
    const runtime = await slot.runtime.catch(() => undefined);
    if (!this.#closed && (runtime === undefined || runtime.closed)) {
      slot.runtime = this.#start();
      slot.runtime.catch(() => {});
      this.#replaced++;
    }
    const next = this.#queue.shift();
    if (next && !this.#closed) next.resolve(slot);
    else slot.busy = false;
  }
}

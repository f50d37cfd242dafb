/**
 * `Mocra.builder()`: the no-services, no-config-file way to run spiders.
 *
 * ```ts
 * const summary = await Mocra.builder().spider(spider, onItem((item) => console.log(item))).run();
 * ```
 *
 * The builder only collects settings; `build()` turns them into an @mocra/core Engine with
 * every spider registered (auto-seeded when the run starts) and `run()` runs it until the
 * crawl is idle. Each knob writes one field of the engine options, so a new capability is a
 * new method here and a new option there — the existing ones do not change.
 */
import {
  createEngine,
  type DataSink,
  type Downloader,
  type Engine,
  type EngineOptions,
  type ErrorEvent,
  type FailurePolicy,
  type FrontierOptions,
  type HttpDownloaderOptions,
  InvalidArgumentError,
  type ItemMeta,
  type Logger,
  type LogLevel,
  type Module,
  type PolicyDecision,
  type QueueBackend,
  type RunSummary,
  type SimpleRetryPolicyOptions,
  type StageConcurrency,
} from '@mocra/core';
import { onItem } from './sinks/on-item.js';
import { compileSpider, type Spider } from './spider.js';

/** A sink, or a function called per item (the same as `onItem(fn)`). */
export type SinkLike<TItem> = DataSink<TItem> | ((item: TItem, meta: ItemMeta) => void | Promise<void>);

export interface LoggingOptions {
  /** @default 'warn' ('silent' under a test runner or with MOCRA_DISABLE_LOGS=1) */
  level?: LogLevel;
  /** Log through this pino logger instead. */
  logger?: Logger;
}

interface Registration {
  module: Module<unknown>;
  sink: DataSink<unknown>;
}

export class Mocra {
  private constructor() {}

  /** Start configuring a run. */
  static builder(): MocraBuilder {
    return new MocraBuilder();
  }
}

export class MocraBuilder {
  readonly #registrations: Registration[] = [];
  #options: EngineOptions = { handleSignals: true };

  /** Run this spider; its items go to `sink`. Repeatable (names must differ). */
  spider<TItem>(spider: Spider<TItem>, sink: SinkLike<TItem>): this {
    return this.module(compileSpider(spider), sink);
  }

  /** Run a module (nodes with generate/parse) — the advanced form of a spider. */
  module<TItem>(module: Module<TItem>, sink: SinkLike<TItem>): this {
    const dataSink = typeof sink === 'function' ? onItem(sink) : sink;
    if (dataSink === null || typeof dataSink !== 'object' || typeof dataSink.write !== 'function') {
      throw new InvalidArgumentError(
        `'${module.name}': the sink must be a function or have write(item, meta)`,
      );
    }
    if (this.#registrations.some((r) => r.module.name === module.name)) {
      throw new InvalidArgumentError(`a spider or module named '${module.name}' was already added`);
    }
    this.#registrations.push({ module: module as Module<unknown>, sink: dataSink as DataSink<unknown> });
    return this;
  }

  /** Concurrent downloads (the other stages size themselves from their own defaults). @default 32 */
  concurrency(downloads: number): this {
    return this.#set({ concurrency: downloads });
  }

  /** Handlers per stage, for fine tuning. */
  stages(stages: StageConcurrency): this {
    return this.#set({ stages: { ...this.#options.stages, ...stages } });
  }

  /** Options of the default HTTP downloader: timeouts, size cap, redirects, User-Agent, headers. */
  download(options: HttpDownloaderOptions): this {
    return this.#set({ download: { ...this.#options.download, ...options } });
  }

  /** Replace the default HTTP downloader. */
  defaultDownloader(downloader: Downloader): this {
    return this.#set({ downloader });
  }

  /** Dedup, fingerprint normalization, max pages / max depth, the download gate. */
  frontier(options: FrontierOptions): this {
    return this.#set({ frontier: { ...this.#options.frontier, ...options } });
  }

  /** Retries of the default failure policy (count, backoff, retried statuses). */
  retry(options: SimpleRetryPolicyOptions): this {
    return this.#set({ retry: { ...this.#options.retry, ...options } });
  }

  /** Replace the failure policy. */
  policy(policy: FailurePolicy): this {
    return this.#set({ policy });
  }

  /** Put the stage topics on this queue backend (in memory by default). */
  queueBackend(queue: QueueBackend): this {
    return this.#set({ queue });
  }

  logging(options: LoggingOptions): this {
    return this.#set({
      ...(options.level === undefined ? {} : { logLevel: options.level }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    });
  }

  /**
   * Stop gracefully on SIGINT/SIGTERM (work in flight finishes within the shutdown timeout,
   * the rest is put back; a second signal aborts at once). @default true
   */
  handleSignals(enabled = true): this {
    return this.#set({ handleSignals: enabled });
  }

  /** How long work in flight may take to finish when stopping. @default 10000 */
  shutdownTimeout(ms: number): this {
    return this.#set({ shutdownTimeoutMs: ms });
  }

  /** Aborting this signal stops the run gracefully. */
  signal(signal: AbortSignal): this {
    return this.#set({ signal });
  }

  /** Called for every failure (after the policy decided). */
  onError(fn: (event: ErrorEvent, decision: PolicyDecision) => void): this {
    return this.#set({ onError: fn });
  }

  /** Any other engine option (escape hatch; later calls of the typed methods still apply). */
  engineOptions(options: EngineOptions): this {
    return this.#set(options);
  }

  /** The engine, with every spider registered, not yet running (for `stats()`, `pause()`, `stop()`). */
  build(): Engine {
    if (this.#registrations.length === 0) {
      throw new InvalidArgumentError('nothing to run: add a spider with .spider(spider, sink)');
    }
    const engine = createEngine(this.#options);
    for (const { module, sink } of this.#registrations) engine.register(module, sink);
    return engine;
  }

  /** Build and run until the crawl is idle (or stopped); resolves with the run summary. */
  run(): Promise<RunSummary> {
    return this.build().run();
  }

  #set(options: EngineOptions): this {
    this.#options = { ...this.#options, ...options };
    return this;
  }
}

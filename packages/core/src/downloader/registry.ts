/**
 * Which downloader fetches a request: a default plus downloaders registered by name, selected by
 * name per request or per module. The names live in code (and in the request, which carries its
 * choice across queues), so no database is involved.
 *
 * ```
 *   request's choice ──▶ module's choice ──▶ the default
 *   (first one set wins; an unknown name is an UnknownDownloaderError, never a silent fallback)
 * ```
 *
 * The registry owns what it holds: `close()` closes every downloader once (also one registered
 * under two names), and `checkHealth()` asks each one that can tell.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { DownloaderClosedError, InvalidArgumentError, UnknownDownloaderError } from '../errors.js';
import type { Downloader } from './types.js';

/** A downloader that can say whether it works (launch its browser, reach its server…). Optional. */
export interface HealthCheckedDownloader extends Downloader {
  /** Resolves when the downloader can serve requests; rejects with the reason when it cannot. */
  healthCheck(): Promise<void>;
}

/** The result of one health check. */
export interface DownloaderHealth {
  name: string;
  /** The downloader's own `name` (it may be registered under another one). */
  downloader: string;
  /** `true` when it passed, or when it has no health check (`checked: false`). */
  healthy: boolean;
  checked: boolean;
  error?: Error;
  durationMs: number;
  /** `Date.now()` when the check ended. */
  at: number;
}

export interface DownloaderSelection {
  /** The request's choice (e.g. `request.downloader`). */
  request?: string | undefined;
  /** The module's choice (the module's `downloader` setting). */
  module?: string | undefined;
}

export interface DownloaderRegistryOptions {
  /** Longest a single health check may take before it counts as failed. @default 10000 */
  healthCheckTimeoutMs?: number;
}

/** The name that always means "the default downloader". */
export const DEFAULT_DOWNLOADER = 'default';

/** `mocra:downloader:health` — a health-check round finished; the message is `DownloaderHealth[]`. */
export const downloaderHealthChannel = diagnostics_channel.channel('mocra:downloader:health');

export function createDownloaderRegistry(
  defaultDownloader: Downloader,
  options: DownloaderRegistryOptions = {},
): DownloaderRegistry {
  return new DownloaderRegistry(defaultDownloader, options);
}

export function hasHealthCheck(downloader: Downloader): downloader is HealthCheckedDownloader {
  return typeof (downloader as Partial<HealthCheckedDownloader>).healthCheck === 'function';
}

export class DownloaderRegistry {
  #default: Downloader;
  readonly #named = new Map<string, Downloader>();
  readonly #healthCheckTimeoutMs: number;
  #lastHealth: DownloaderHealth[] = [];
  #healthTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;

  constructor(defaultDownloader: Downloader, options: DownloaderRegistryOptions = {}) {
    assertDownloader(defaultDownloader, 'the default downloader');
    this.#default = defaultDownloader;
    const timeout = options.healthCheckTimeoutMs ?? 10_000;
    if (!Number.isFinite(timeout) || timeout <= 0)
      throw new InvalidArgumentError(`healthCheckTimeoutMs must be a number > 0, got ${timeout}`);
    this.#healthCheckTimeoutMs = timeout;
  }

  /** The downloader used when neither the request nor its module names one. */
  get default(): Downloader {
    return this.#default;
  }

  /** Replace the default downloader. The one it replaces is not closed (the caller created it). */
  setDefault(downloader: Downloader): this {
    this.#assertOpen();
    assertDownloader(downloader, 'the default downloader');
    this.#default = downloader;
    return this;
  }

  /** Register `downloader` under `name` (its own `name` by default). Names are unique. */
  register(downloader: Downloader, name: string = downloader?.name): this {
    this.#assertOpen();
    assertDownloader(downloader, `downloader '${String(name)}'`);
    if (typeof name !== 'string' || name.trim() === '')
      throw new InvalidArgumentError(
        `a downloader name must be a non-empty string, got ${JSON.stringify(name)}`,
      );
    if (name === DEFAULT_DOWNLOADER)
      throw new InvalidArgumentError(
        `'${DEFAULT_DOWNLOADER}' is reserved for the default downloader; use setDefault()`,
      );
    if (this.#named.has(name))
      throw new InvalidArgumentError(`a downloader named '${name}' is already registered`);
    this.#named.set(name, downloader);
    return this;
  }

  has(name: string): boolean {
    return name === DEFAULT_DOWNLOADER || this.#named.has(name) || name === this.#default.name;
  }

  /** Every name that selects something: 'default', the default's own name, and the registered ones. */
  names(): string[] {
    return [...new Set([DEFAULT_DOWNLOADER, this.#default.name, ...this.#named.keys()])];
  }

  /**
   * The downloader registered as `name`. `'default'` and the default downloader's own name
   * (unless something else is registered under it) give the default.
   */
  get(name: string, selectedBy = 'code'): Downloader {
    const named = this.#named.get(name);
    if (named !== undefined) return named;
    if (name === DEFAULT_DOWNLOADER || name === this.#default.name) return this.#default;
    throw new UnknownDownloaderError(name, selectedBy, this.names());
  }

  /** The downloader for a request: its own choice, else its module's, else the default. */
  select(selection: DownloaderSelection, who: { module?: string; url?: string } = {}): Downloader {
    if (selection.request !== undefined)
      return this.get(selection.request, who.url === undefined ? 'a request' : `request ${who.url}`);
    if (selection.module !== undefined)
      return this.get(selection.module, who.module === undefined ? 'a module' : `module '${who.module}'`);
    return this.#default;
  }

  /** Throws UnknownDownloaderError for the first module whose choice is not registered (check at start-up). */
  validate(moduleChoices: Iterable<readonly [module: string, downloader: string | undefined]>): void {
    for (const [module, name] of moduleChoices) if (name !== undefined) this.get(name, `module '${module}'`);
  }

  /** The results of the last health-check round. */
  get lastHealth(): readonly DownloaderHealth[] {
    return this.#lastHealth;
  }

  /**
   * Check every distinct downloader that has a `healthCheck`, in parallel, each bounded by
   * `healthCheckTimeoutMs`. Never throws: failures are in the results.
   */
  async checkHealth(): Promise<DownloaderHealth[]> {
    const entries = this.#entries();
    const results = await Promise.all(entries.map(([name, d]) => this.#checkOne(name, d)));
    this.#lastHealth = results;
    if (downloaderHealthChannel.hasSubscribers) downloaderHealthChannel.publish(results);
    return results;
  }

  /** Run {@link checkHealth} every `intervalMs` until `close()` (the timer does not keep the process alive). */
  startHealthChecks(intervalMs: number): void {
    if (!Number.isFinite(intervalMs) || intervalMs <= 0)
      throw new InvalidArgumentError(`intervalMs must be a number > 0, got ${intervalMs}`);
    this.#assertOpen();
    clearTimeout(this.#healthTimer);
    const tick = (): void => {
      this.#healthTimer = setTimeout(() => {
        void this.checkHealth().then(() => {
          if (!this.#closed) tick();
        });
      }, intervalMs);
      this.#healthTimer.unref();
    };
    tick();
  }

  /**
   * Close every distinct downloader once, in parallel. All are closed even if some fail; the
   * failures are then thrown together as an AggregateError. Calling it again returns the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= this.#closeAll();
    return this.#closing;
  }

  async #closeAll(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#healthTimer);
    const entries = this.#entries();
    const results = await Promise.allSettled(entries.map(([, d]) => d.close()));
    const errors: unknown[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') {
        const name = entries[i]![0];
        errors.push(r.reason instanceof Error ? Object.assign(r.reason, { downloader: name }) : r.reason);
      }
    });
    if (errors.length > 0) throw new AggregateError(errors, `${errors.length} downloader(s) failed to close`);
  }

  /** Each distinct downloader once, under the first name it goes by. */
  #entries(): Array<[string, Downloader]> {
    const seen = new Set<Downloader>();
    const out: Array<[string, Downloader]> = [];
    for (const [name, d] of [[DEFAULT_DOWNLOADER, this.#default] as const, ...this.#named]) {
      if (seen.has(d)) continue;
      seen.add(d);
      out.push([name, d]);
    }
    return out;
  }

  async #checkOne(name: string, downloader: Downloader): Promise<DownloaderHealth> {
    const started = performance.now();
    const base = { name, downloader: downloader.name };
    if (!hasHealthCheck(downloader))
      return { ...base, healthy: true, checked: false, durationMs: 0, at: Date.now() };
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        downloader.healthCheck(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`health check took longer than ${this.#healthCheckTimeoutMs} ms`)),
            this.#healthCheckTimeoutMs,
          );
        }),
      ]);
      return {
        ...base,
        healthy: true,
        checked: true,
        durationMs: performance.now() - started,
        at: Date.now(),
      };
    } catch (err) {
      return {
        ...base,
        healthy: false,
        checked: true,
        error: err instanceof Error ? err : new Error(String(err)),
        durationMs: performance.now() - started,
        at: Date.now(),
      };
    } finally {
      clearTimeout(timer);
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new DownloaderClosedError('downloader registry');
  }
}

function assertDownloader(value: unknown, what: string): asserts value is Downloader {
  const d = value as Partial<Downloader> | null | undefined;
  if (
    d === null ||
    typeof d !== 'object' ||
    typeof d.name !== 'string' ||
    typeof d.download !== 'function' ||
    typeof d.close !== 'function'
  ) {
    throw new InvalidArgumentError(
      `${what} must be an object with name, download(request, signal) and close()`,
    );
  }
}

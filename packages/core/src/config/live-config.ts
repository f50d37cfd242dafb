/**
 * Hot reload of a config file.
 *
 * ```
 *   file changes ─▶ debounce ─▶ read until settled + validate ─┬─ broken or empty: keep the last good config, report the error
 *                                                └─ valid: diff against the running config
 *                                                     ├─ live keys      → applied now   ┐
 *                                                     └─ restart keys   → reported      ┴─▶ change event
 * ```
 *
 * The running config only ever holds values that are in effect: a restart-only key keeps its
 * start-up value (listed in {@link LiveConfig.pendingRestart} until the file agrees again), so
 * readers of `config` never see a value the engine is not using.
 *
 * The directory is watched rather than the file: editors often save by writing a new file and
 * renaming it over the old one, which a watch on the old inode would miss.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import {
  ConfigEmptyError,
  ConfigReadError,
  InternalError,
  isMocraError,
  type MocraError,
} from '../errors.js';
import { configKeys } from './keys.js';
import { type LoadConfigOptions, readConfigFile, resolveConfig } from './load.js';
import type { MocraConfig } from './schema.js';

export interface LiveConfigOptions extends LoadConfigOptions {
  /** The TOML file to load and watch. */
  file: string;
  /** Watch the file and reload when it changes. `reload()` works either way. @default true */
  watch?: boolean;
  /** Quiet time after the last change event before reloading (editors write in several steps). @default 100 */
  debounceMs?: number;
}

/** One key whose value differs between the running config and the file. */
export interface ConfigChange {
  /** Dotted key, as in docs/configuration.md. */
  key: string;
  from: unknown;
  to: unknown;
  /** Applied to the running config (true) or waiting for a restart (false). */
  live: boolean;
}

/** `mocra:config:reload` and the change event: what a successful reload changed. */
export interface ConfigReloadEvent {
  file: string;
  /** The running config after the reload. */
  config: MocraConfig;
  /** Live keys whose new value is now in effect. */
  applied: ConfigChange[];
  /** Keys that changed in the file but only take effect after a restart. */
  restartRequired: ConfigChange[];
}

/** `mocra:config:error` and the error event: a reload failed; the last good config stays. */
export interface ConfigReloadErrorEvent {
  file: string;
  error: MocraError;
}

export const CONFIG_CHANNEL_NAMES = {
  reload: 'mocra:config:reload',
  error: 'mocra:config:error',
} as const;

const reloadChannel = diagnostics_channel.channel(CONFIG_CHANNEL_NAMES.reload);
/** Extra reads of a file that keeps changing before a reload gives up until its next change. */
const SETTLE_ATTEMPTS = 4;

/** Whether TOML text sets anything: a line that is not blank and not a comment. */
function hasSettings(toml: string): boolean {
  for (const line of toml.split('\n')) {
    const t = line.trim();
    if (t !== '' && !t.startsWith('#')) return true;
  }
  return false;
}
const errorChannel = diagnostics_channel.channel(CONFIG_CHANNEL_NAMES.error);

/** Loads `options.file` (throwing on a broken file) and starts watching it. */
export async function openLiveConfig(options: LiveConfigOptions): Promise<LiveConfig> {
  const toml = await readConfigFile(options.file);
  const config = resolveConfig({ ...options, toml });
  const live = new LiveConfig(options, config);
  if (options.watch ?? true) live.watch();
  return live;
}

export class LiveConfig {
  readonly file: string;
  readonly #options: LiveConfigOptions;
  readonly #debounceMs: number;
  #config: MocraConfig;
  /** The last config the file validated to (restart-only keys included). */
  #latest: MocraConfig;
  #pending: ConfigChange[] = [];
  readonly #changeListeners = new Set<(event: ConfigReloadEvent) => void>();
  readonly #errorListeners = new Set<(event: ConfigReloadErrorEvent) => void>();
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  /** Prefer {@link openLiveConfig}; this takes an already loaded config and does not watch until `watch()`. */
  constructor(options: LiveConfigOptions, initial: MocraConfig) {
    this.#options = options;
    this.file = resolve(options.file);
    this.#debounceMs = options.debounceMs ?? 100;
    this.#config = initial;
    this.#latest = initial;
  }

  /** The config in effect. */
  get config(): MocraConfig {
    return this.#config;
  }

  /** Keys changed in the file that wait for a restart. */
  get pendingRestart(): readonly ConfigChange[] {
    return this.#pending;
  }

  /** Called after every reload that changed something. Returns a function that unsubscribes. */
  onChange(listener: (event: ConfigReloadEvent) => void): () => void {
    this.#changeListeners.add(listener);
    return () => this.#changeListeners.delete(listener);
  }

  /** Called when a reload fails (unreadable file, bad TOML, invalid config). */
  onError(listener: (event: ConfigReloadErrorEvent) => void): () => void {
    this.#errorListeners.add(listener);
    return () => this.#errorListeners.delete(listener);
  }

  /** Starts watching the file (idempotent). */
  watch(): void {
    if (this.#watcher || this.#closed) return;
    const name = basename(this.file);
    this.#watcher = watch(dirname(this.file), { persistent: false }, (_event, changed) => {
      if (changed === null || changed === name) this.#schedule();
    });
    this.#watcher.on('error', (err) =>
      this.#reportError(new InternalError('config file watcher failed', { cause: err })),
    );
  }

  /**
   * Reads and applies the file now. Resolves with what changed, or undefined when the file was
   * broken (the error went to the error listeners and the config stayed as it was). Calls are
   * serialized.
   */
  reload(): Promise<ConfigReloadEvent | undefined> {
    const run = this.#queue.then(() => this.#reloadNow());
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Stops watching. Reloads already running finish. */
  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  /**
   * The file once two reads a debounce apart agree: a writer still at work (a save in several
   * steps, a copy) changes it between them, and its half-written state is never applied.
   */
  async #settledRead(): Promise<string> {
    let text = await readConfigFile(this.#options.file);
    for (let attempt = 0; attempt < SETTLE_ATTEMPTS; attempt++) {
      await sleep(this.#debounceMs);
      const again = await readConfigFile(this.#options.file);
      if (again === text) return text;
      text = again;
    }
    throw new ConfigReadError(this.file, {
      cause: new Error(`still changing after ${SETTLE_ATTEMPTS + 1} reads; the next change reloads it`),
    });
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.reload();
    }, this.#debounceMs);
    this.#timer.unref?.();
  }

  async #reloadNow(): Promise<ConfigReloadEvent | undefined> {
    let next: MocraConfig;
    try {
      const toml = await this.#settledRead();
      // A file with no settings at all resets every key to its default. That is what an editor
      // leaves between truncating and writing, or a write that died half-way: not an edit.
      if (!hasSettings(toml)) throw new ConfigEmptyError(this.file);
      next = resolveConfig({ ...this.#options, toml });
    } catch (err) {
      this.#reportError(isMocraError(err) ? err : new InternalError('config reload failed', { cause: err }));
      return undefined;
    }
    const previousLatest = this.#latest;
    this.#latest = next;
    const applied: ConfigChange[] = [];
    const restartRequired: ConfigChange[] = [];
    const pending: ConfigChange[] = [];
    let running = this.#config;
    for (const key of configKeys()) {
      const from = valueAt(this.#config, key.path);
      const to = valueAt(next, key.path);
      if (isDeepStrictEqual(from, to)) continue;
      if (key.live) {
        running = withValue(running, key.path, to);
        applied.push({ key: key.key, from, to, live: true });
      } else {
        const change = { key: key.key, from, to, live: false };
        pending.push(change);
        // Report a restart-only change once, when the file changes it, not on every later reload.
        if (!isDeepStrictEqual(valueAt(previousLatest, key.path), to)) restartRequired.push(change);
      }
    }
    this.#config = running;
    this.#pending = pending;
    const event: ConfigReloadEvent = { file: this.file, config: running, applied, restartRequired };
    if (applied.length > 0 || restartRequired.length > 0) {
      if (reloadChannel.hasSubscribers) reloadChannel.publish(event);
      for (const listener of this.#changeListeners) listener(event);
    }
    return event;
  }

  #reportError(error: MocraError): void {
    const event: ConfigReloadErrorEvent = { file: this.file, error };
    if (errorChannel.hasSubscribers) errorChannel.publish(event);
    for (const listener of this.#errorListeners) listener(event);
  }
}

function valueAt(config: unknown, path: readonly string[]): unknown {
  let current = config;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

/** A copy of `config` with `path` set to `value` (undefined removes the key); tables on the way are copied. */
function withValue<T>(config: T, path: readonly string[], value: unknown): T {
  const [head, ...rest] = path;
  const table = { ...(config as Record<string, unknown>) };
  if (rest.length === 0) {
    if (value === undefined) delete table[head!];
    else table[head!] = value;
  } else {
    table[head!] = withValue(table[head!] ?? {}, rest, value);
  }
  return table as T;
}

/**
 * `task_result` rows of the runs this engine starts: one per run × module (with its account and
 * platform), started when the task is first handled, given heartbeats with its counts while it
 * runs, and finished when its run of the module is done (the run ledger says every node is
 * finished) or when the engine stops.
 *
 * ```
 *   task handled ─▶ start (attempt n on a redelivery) ─┬─ every heartbeatMs: heartbeat(counts)
 *                                                      └─ run finished / engine stops ─▶ finish(status, counts, error)
 *   every sweepEveryMs (one node per interval with coordination): sweepZombies(staleAfterMs)
 * ```
 *
 * Writes never hold up the crawl: each row's writes are chained in the background and a
 * failure is reported (`mocra:db:error`, a warn log), not thrown into a stage.
 */
import type { StoreRepository, TaskCounts, TaskResultStatus } from '@mocra/store';
import type { Coordination, LockLease } from '../coordination/types.js';
import { dbChannels } from './channels.js';

export interface TaskRunKey {
  runId: string;
  module: string;
  account: string;
  platform: string;
}

export interface TaskResultRecorderOptions {
  store: () => Promise<StoreRepository>;
  heartbeatMs: number;
  staleAfterMs: number;
  sweepEveryMs: number | false;
  coordination?: Coordination;
  namespace: string;
  /** Recorded as `node_id`. */
  nodeId?: string;
  onError: (operation: string, error: unknown) => void;
  onSwept?: (runs: { id: number; runId: string; module: string | null }[]) => void;
}

interface OpenRun {
  readonly key: TaskRunKey;
  id: number | undefined;
  counts: TaskCounts;
  /** Units given up on (dead-lettered or dropped): the run did not do all of its work. */
  givenUp: number;
  lastError: { message: string; code: string } | undefined;
  /** Writes of this row, in order. */
  chain: Promise<void>;
  finished: boolean;
}

export class TaskResultRecorder {
  readonly #o: TaskResultRecorderOptions;
  readonly #open = new Map<string, OpenRun>();
  /** Writes of rejected tasks' rows, awaited on close. */
  readonly #rejected = new Set<Promise<void>>();
  #heartbeat: NodeJS.Timeout | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  #beating = false;

  constructor(options: TaskResultRecorderOptions) {
    this.#o = options;
  }

  start(): void {
    this.#heartbeat ??= setInterval(() => void this.heartbeat(), this.#o.heartbeatMs);
    this.#heartbeat.unref();
    if (this.#o.sweepEveryMs !== false) {
      this.#sweeper ??= setInterval(() => void this.sweep(), this.#o.sweepEveryMs);
      this.#sweeper.unref();
    }
  }

  /** Open runs: `runId`, `module`. */
  open(): TaskRunKey[] {
    return [...this.#open.values()].map((r) => ({ ...r.key }));
  }

  /** A run × module started (or started again after a redelivery: the store reopens its row). */
  started(key: TaskRunKey): void {
    const k = keyOf(key.runId, key.module);
    const existing = this.#open.get(k);
    if (existing !== undefined && !existing.finished) return;
    const run: OpenRun = {
      key: { ...key },
      id: undefined,
      counts: { requests: 0, items: 0, errors: 0 },
      givenUp: 0,
      lastError: undefined,
      chain: Promise.resolve(),
      finished: false,
    };
    this.#open.set(k, run);
    this.#write(run, 'start-task-result', async (store) => {
      run.id = (await store.startTaskResult(this.#startInput(run))).id;
    });
  }

  /**
   * Work that could not start at all: a task whose account × platform cannot run (a row without
   * a module), or a module of it that cannot (an unknown middleware) — one failed row.
   */
  rejected(key: Omit<TaskRunKey, 'module'> & { module?: string }, error: Error & { code?: string }): void {
    const run: OpenRun = {
      key: { ...key, module: key.module ?? '' },
      id: undefined,
      counts: { requests: 0, items: 0, errors: 1 },
      givenUp: 1,
      lastError: { message: error.message, code: error.code ?? 'MOCRA_ERR_INTERNAL' },
      chain: Promise.resolve(),
      finished: false,
    };
    this.#finish(run, 'failed');
    this.#rejected.add(run.chain);
    void run.chain.finally(() => this.#rejected.delete(run.chain));
  }

  /** Adds to a counter of an open run (no-op for runs this engine did not start). */
  count(runId: string | undefined, module: string | undefined, field: keyof TaskCounts, n = 1): void {
    if (runId === undefined || module === undefined) return;
    const run = this.#open.get(keyOf(runId, module));
    if (run !== undefined) run.counts[field] += n;
  }

  /** A failure of the run was reported; `givenUp` when the policy will not retry it. */
  failed(
    runId: string | undefined,
    module: string | undefined,
    error: { message: string; code: string },
    givenUp: boolean,
  ): void {
    if (runId === undefined || module === undefined) return;
    const run = this.#open.get(keyOf(runId, module));
    if (run === undefined) return;
    run.counts.errors++;
    run.lastError = error;
    if (givenUp) run.givenUp++;
  }

  /** Finishes the open runs `isDone` says are done: succeeded, or failed when work was given up. */
  settle(isDone: (key: TaskRunKey) => boolean): void {
    for (const run of this.#open.values()) {
      if (!run.finished && isDone(run.key)) this.#finish(run, run.givenUp > 0 ? 'failed' : 'succeeded');
    }
  }

  /** The engine stops: finished runs as they are, the rest with `status`. Waits for every write. */
  async close(
    isDone: (key: TaskRunKey) => boolean,
    status: Exclude<TaskResultStatus, 'running' | 'succeeded'>,
  ): Promise<void> {
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#heartbeat = this.#sweeper = undefined;
    for (const run of this.#open.values()) {
      if (run.finished) continue;
      if (isDone(run.key)) this.#finish(run, run.givenUp > 0 ? 'failed' : 'succeeded');
      else this.#finish(run, status);
    }
    await Promise.all([...[...this.#open.values()].map((r) => r.chain), ...this.#rejected]);
  }

  /** Heartbeats of every open row, with their counts (skipped while the previous round runs). */
  async heartbeat(): Promise<void> {
    if (this.#beating) return;
    this.#beating = true;
    try {
      const beats = [...this.#open.values()]
        .filter((r) => !r.finished)
        .map((run) => {
          this.#write(run, 'heartbeat-task-result', async (store) => {
            if (run.id !== undefined) await store.heartbeatTaskResult(run.id, { ...run.counts });
          });
          return run.chain;
        });
      await Promise.all(beats);
    } finally {
      this.#beating = false;
    }
  }

  /**
   * Marks running rows without a recent heartbeat failed. With coordination, one node sweeps
   * per interval (a lock that is left to lapse); the store's sweep is safe to race anyway.
   */
  async sweep(): Promise<number> {
    let lease: LockLease | undefined;
    const coordination = this.#o.coordination;
    try {
      if (coordination !== undefined) {
        lease = await coordination.acquireLock(`${this.#o.namespace}:db:zombie-sweep`, {
          ttlMs: Math.max(1_000, (this.#o.sweepEveryMs || 60_000) - 100),
        });
        if (lease === undefined) return 0;
      }
      const store = await this.#o.store();
      const swept = await store.sweepZombies({ staleAfterMs: this.#o.staleAfterMs });
      if (swept.length > 0) {
        const runs = swept.map((r) => ({ id: r.id, runId: r.runId, module: r.module }));
        if (dbChannels.zombies.hasSubscribers) dbChannels.zombies.publish({ runs });
        this.#o.onSwept?.(runs);
      }
      return swept.length;
    } catch (err) {
      this.#o.onError('sweep-zombies', err);
      return 0;
    }
  }

  #finish(run: OpenRun, status: Exclude<TaskResultStatus, 'running'>): void {
    run.finished = true;
    this.#write(run, 'finish-task-result', async (store) => {
      // The start may have failed (the database was away): start now so the outcome is kept.
      run.id ??= (await store.startTaskResult(this.#startInput(run))).id;
      await store.finishTaskResult(run.id, {
        status,
        counts: { ...run.counts },
        ...(status !== 'succeeded' && run.lastError !== undefined
          ? { error: run.lastError.message, errorCode: run.lastError.code }
          : {}),
      });
    });
    void run.chain.then(() => {
      if (this.#open.get(keyOf(run.key.runId, run.key.module)) === run)
        this.#open.delete(keyOf(run.key.runId, run.key.module));
    });
  }

  #startInput(run: OpenRun) {
    return {
      runId: run.key.runId,
      ...(run.key.module === '' ? {} : { module: run.key.module }),
      account: run.key.account,
      platform: run.key.platform,
      ...(this.#o.nodeId === undefined ? {} : { nodeId: this.#o.nodeId }),
    };
  }

  #write(run: OpenRun, operation: string, write: (store: StoreRepository) => Promise<void>): void {
    run.chain = run.chain.then(async () => {
      try {
        await write(await this.#o.store());
      } catch (err) {
        this.#o.onError(operation, err);
      }
    });
  }
}

function keyOf(runId: string, module: string): string {
  return `${runId}\u0000${module}`;
}

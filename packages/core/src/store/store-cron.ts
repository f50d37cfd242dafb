/**
 * Cron targets from the database: every enabled module × account × platform (the store's cron
 * contexts) of a registered module that has a `cron` becomes one job of the engine's
 * {@link CronScheduler}. The schedule is the module's; a context's layered config may replace
 * it (`cron = "<expression>"`) or switch it off (`cron = false`).
 *
 * ```
 *   every refreshMs: changeToken() ── same as last time ─▶ nothing (one single-row read)
 *                         │ moved
 *                         ▼
 *                listCronContexts() ─▶ reconcile: add new contexts' jobs, remove gone ones,
 *                                      replace jobs whose schedule changed
 *   firing ─▶ gate: this node owns the context's key (rendezvous over live members) ─▶ claim ─▶ submit
 * ```
 *
 * In a cluster each context fires on exactly one node: the partition gate sends it to its
 * owner, and the scheduler's per-tick claim makes one firing per scheduled time whatever the
 * gate says (a node that has not joined the membership, or a member list in flux).
 */
import { randomUUID } from 'node:crypto';
import type { CronContext, StoreRepository } from '@mocra/store';
import { createPartitionOwnership, type PartitionOwnership } from '../coordination/partitions.js';
import type { Coordination } from '../coordination/types.js';
import type { TaskEvent } from '../model/events.js';
import type { ModuleRegistry } from '../module/registry.js';
import type { Module, ModuleCron } from '../module/types.js';
import type { Clock, TimerHandle } from '../schedule/clock.js';
import { type CronInput, type CronSchedule, cron, toCronSchedule } from '../schedule/cron.js';
import type { CronScheduler } from '../schedule/scheduler.js';
import { dbChannels } from './channels.js';

/** Ids of jobs this sync owns start with this. */
export const STORE_CRON_PREFIX = 'db:';

export interface StoreCronSyncOptions {
  store: () => Promise<StoreRepository>;
  scheduler: CronScheduler;
  registry: ModuleRegistry;
  submit: (task: TaskEvent) => Promise<void>;
  clock: Clock;
  refreshMs: number;
  /** Set in a cluster: fire each context only on the owner of its key. */
  coordination?: Coordination;
  partition: boolean;
  onError: (operation: string, error: unknown) => void;
}

export interface StoreCronRefresh {
  /** Whether the contexts were listed (the token had moved). */
  changed: boolean;
  token: string;
  jobs: number;
  added: string[];
  removed: string[];
}

interface JobInfo {
  signature: string;
}

export class StoreCronSync {
  readonly #o: StoreCronSyncOptions;
  readonly #jobs = new Map<string, JobInfo>();
  #partitions: PartitionOwnership | undefined;
  #token: string | undefined;
  #timer: TimerHandle | undefined;
  #refreshing: Promise<StoreCronRefresh> | undefined;
  #stopped = false;

  constructor(options: StoreCronSyncOptions) {
    this.#o = options;
  }

  /** Reads the contexts once (so the first jobs exist when the run starts), then every refreshMs. */
  async start(): Promise<void> {
    if (this.#o.coordination !== undefined && this.#o.partition) {
      this.#partitions = createPartitionOwnership(this.#o.coordination);
      await this.#partitions.start().catch((err: unknown) => this.#o.onError('cron-members', err));
    }
    await this.refresh();
    this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#o.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#partitions?.stop();
  }

  /** The scheduler's gate for this sync's jobs: the owner of the context's key fires it. */
  gate(job: { id: string; key: string }): boolean {
    if (!job.id.startsWith(STORE_CRON_PREFIX) || this.#partitions === undefined) return true;
    const members = this.#partitions.members();
    // Not a member (membership unused, or not joined yet): the per-tick claim alone decides.
    if (!members.includes(this.#o.coordination!.nodeId)) return true;
    return this.#partitions.owns(job.key);
  }

  /** Compares the change token and, when it moved, reconciles the jobs with the contexts. */
  refresh(): Promise<StoreCronRefresh> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #refresh(): Promise<StoreCronRefresh> {
    const store = await this.#o.store();
    const current = await store.changeToken();
    if (current === this.#token) {
      return { changed: false, token: current, jobs: this.#jobs.size, added: [], removed: [] };
    }
    const { token, contexts } = await store.listCronContexts();
    const desired = new Map<string, { context: CronContext; schedule: CronSchedule; signature: string }>();
    for (const context of contexts) {
      const registered = this.#o.registry.has(context.module.name)
        ? this.#o.registry.get(context.module.name)
        : undefined;
      if (registered?.module.cron === undefined) continue;
      const schedule = this.#scheduleOf(context, registered.module.cron);
      if (schedule === undefined) continue;
      desired.set(STORE_CRON_PREFIX + context.key, { context, schedule, signature: signatureOf(schedule) });
    }
    const added: string[] = [];
    const removed: string[] = [];
    for (const [id, info] of this.#jobs) {
      const want = desired.get(id);
      if (want === undefined || want.signature !== info.signature) {
        this.#o.scheduler.remove(id);
        this.#jobs.delete(id);
        removed.push(id);
      }
    }
    for (const [id, { context, schedule, signature }] of desired) {
      if (this.#jobs.has(id)) continue;
      const account = context.account.name;
      const platform = context.platform.name;
      const module = context.module.name;
      this.#o.scheduler.add({
        id,
        key: context.key,
        schedule,
        fire: (firing) =>
          this.#o.submit({
            module,
            runId: randomUUID(),
            account,
            platform,
            params: { cron: { scheduledAt: firing.scheduledAt, reason: firing.reason } },
            ...(context.module.priority === 0 ? {} : { priority: context.module.priority }),
          }),
      });
      this.#jobs.set(id, { signature });
      added.push(id);
    }
    this.#token = token;
    const result: StoreCronRefresh = { changed: true, token, jobs: this.#jobs.size, added, removed };
    if (dbChannels.cronRefresh.hasSubscribers) dbChannels.cronRefresh.publish(result);
    return result;
  }

  #scheduleOf(context: CronContext, moduleCron: NonNullable<Module['cron']>): CronSchedule | undefined {
    const own = context.config.get('cron');
    try {
      if (own === false) return undefined;
      if (typeof own === 'string') return cron(own);
    } catch (err) {
      // A bad expression in one context's config must not stop the others.
      this.#o.onError(`cron-expression ${context.key}`, err);
      return undefined;
    }
    const spec = moduleCron as ModuleCron;
    return toCronSchedule(
      typeof spec === 'object' && spec !== null && 'schedule' in spec
        ? spec.schedule
        : (moduleCron as CronInput),
    );
  }

  #arm(): void {
    if (this.#stopped) return;
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#timer = undefined;
      this.refresh()
        .catch((err: unknown) => this.#o.onError('cron-refresh', err))
        .finally(() => this.#arm());
    }, this.#o.refreshMs);
  }
}

function signatureOf(schedule: CronSchedule): string {
  return `${schedule.expression ?? ''}|${schedule.timezone ?? ''}|${schedule.runNow}|${schedule.enabled}`;
}

/**
 * One crawl run shared by many processes: it is seeded once across the cluster, and it ends
 * when the whole cluster is idle — not when one process is. Built only on the
 * {@link Coordination} interface (KV, counters, locks, membership), so it works the same on
 * every coordination backend.
 *
 * Coordination keys (inside the coordination backend's namespace):
 *
 * ```
 *  run:{id}:seeded          who seeded (set after the seeds were published)
 *  run:{id}:seed            lock held while seeding (a seeder that dies lets another one in)
 *  run:{id}:leader          lock of the leader election (the leader runs the completion check)
 *  run:{id}:control         'probe:{epoch}' while the leader asks, 'done' once the run ended
 *  run:{id}:epoch           counter of probes
 *  run:{id}:answer:{node}   '{epoch}:{idle 0|1}:{started}:{service 0|1}' — a member's answer to a probe
 * ```
 *
 * Service members (`service` true: kept up until stopped, fed by cron or `/start_work`) never
 * let the run end: they do not run the completion check, a probe answered by one is never
 * "done", and an end marker left by an earlier finite run of the same id does not stop them.
 * So a run with a service member lasts until its members are stopped, finite ones included.
 *
 * Seeding: whoever takes the seed lock first (and finds no `seeded` marker) publishes the seed
 * tasks, then writes the marker. A restarted or late process finds the marker and does not seed
 * again. If the seeder dies before writing it, its lock lapses and another member seeds; a
 * seed published twice is harmless (the shared dedup drops the second copy's requests).
 *
 * Completion (the leader, only while it is idle itself and every topic reads empty):
 *
 * ```
 *   M  = live members of the run
 *   P0 = probe: every member of M answers (idle, started) — captured when it answers
 *   S  = stats of every topic: ready + delayed + leased, all zero?          [tA … tB]
 *   P1 = probe again, after S: every member answers again; members are still M
 *   done ⇔ everybody idle in P0 and P1, with the same `started`, and S all zero
 * ```
 *
 * Why that is enough. Messages only move between topics inside a handler (publish the children,
 * then ack) or in an outside publish (seeding, submit, cron); consuming, lease lapses, delays
 * and nacks move a message within its topic. A member idle in P0 (answered before tA) and in P1
 * (answered after tB) with the same `started` count started no handler and no outside publish in
 * between, so it ran none during [tA, tB]. If that holds for every member, nothing moved while S
 * was read, so S is a consistent snapshot; all zero then means nothing is left and nothing is
 * running that could add work. The race "one worker reads empty while another is about to
 * publish" is exactly what P1 catches: that worker is busy, or its `started` moved. A member that
 * joins in between changes M (retry later); a member that died stays in M until its membership
 * lapses (retry later), and its unacked messages count as leased until another worker takes them.
 *
 * Kafka's stats are approximate (group lag), so there completion is approximate too.
 *
 * A partitioned cluster (no shared queue; distributed/partition-router.ts) has no S to read:
 * each member reads its own topics inside its answer (`ownTopicsEmpty`) and answers idle only
 * if they were empty with nothing started meanwhile. Work crosses members only as a forward,
 * during which the sender counts as busy until the receiver has published it (and its
 * `started` moved) — so "idle in P0 and P1 with the same `started`" still rules out anything
 * in flight, forwards included.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createLeaderElection, type LeaderElection } from '../coordination/leader.js';
import type { Coordination } from '../coordination/types.js';

/** What a member is doing, as the engine reports it. */
export interface MemberActivity {
  /** No handler running and no outside publish in progress. */
  idle: boolean;
  /** Moves every time a handler or an outside publish starts. */
  started: number;
}

export interface ClusterRunOptions {
  coordination: Coordination;
  /** Shared by every process of the run (the same config gives the same id). */
  runId: string;
  /** This process's activity (the engine's `activity()`). */
  activity: () => MemberActivity;
  /** True when every topic of the run has nothing ready, delayed or leased. */
  topicsEmpty: () => Promise<boolean>;
  /**
   * A partitioned cluster's members each run on their own queues: then a member answers a probe
   * idle only when its own topics read empty too, with nothing started while they were read.
   * @default undefined (the topics are shared: `topicsEmpty` covers them)
   */
  ownTopicsEmpty?: () => Promise<boolean>;
  /** The run ended cluster-wide (called once). */
  onDone: () => void;
  /** How often a member looks for probes and the end marker. @default 50 */
  pollMs?: number;
  /**
   * How often the leader, when idle, tries to confirm that the cluster is done (it also tries
   * as soon as it turns idle itself). @default 250
   */
  checkEveryMs?: number;
  /** How long the leader waits for every member's answer to a probe. @default 3000 */
  probeTimeoutMs?: number;
  /** Lease of the leader and seed locks. @default 10000 */
  lockTtlMs?: number;
  /** Failures of the background loops (the coordination backend unreachable…). */
  onError?: (error: unknown, context: string) => void;
  /** Extra membership facts shown in `/nodes`. */
  meta?: Record<string, string>;
  /** This member stays up until it is stopped: the run does not end while it is a member (see above). @default false */
  service?: boolean;
}

export type SeedOutcome = 'seeded' | 'already-seeded' | 'run-done' | 'closed';

export class ClusterRun {
  readonly runId: string;
  readonly #c: Coordination;
  readonly #o: ClusterRunOptions;
  readonly #leader: LeaderElection;
  readonly #pollMs: number;
  readonly #checkEveryMs: number;
  readonly #probeTimeoutMs: number;
  #lastAnswered = 0;
  #done = false;
  #closed = false;
  #pollTimer: NodeJS.Timeout | undefined;
  #checkTimer: NodeJS.Timeout | undefined;
  #idleWatch: NodeJS.Timeout | undefined;
  #wasIdle = false;
  #polling = false;
  #checking = false;
  /** Completion checks that got as far as a probe (for tests and diagnostics). */
  probes = 0;

  constructor(options: ClusterRunOptions) {
    this.#o = options;
    this.#c = options.coordination;
    this.runId = options.runId;
    this.#pollMs = options.pollMs ?? 50;
    this.#checkEveryMs = options.checkEveryMs ?? 250;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 3_000;
    const ttl = options.lockTtlMs ?? 10_000;
    this.#leader = createLeaderElection(this.#c, { name: this.#key('leader'), ttlMs: ttl });
  }

  get done(): boolean {
    return this.#done;
  }

  isLeader(): boolean {
    return this.#leader.isLeader();
  }

  /** Join the run's membership, campaign for leadership, start answering probes. */
  async start(): Promise<void> {
    const mode = this.#service() ? 'service' : 'finite';
    await this.#c.join({ meta: { ...this.#o.meta, run: this.runId, mode } });
    await this.#leader.start();
    this.#pollTimer = setInterval(() => void this.#poll(), this.#pollMs);
    this.#checkTimer = setInterval(() => void this.#check(), this.#checkEveryMs);
    // A local look (no I/O) every 25 ms: the leader checks as soon as it turns idle.
    this.#idleWatch = setInterval(() => {
      const idle = this.#o.activity().idle;
      if (idle && !this.#wasIdle) void this.#check();
      this.#wasIdle = idle;
    }, 25);
    this.#idleWatch.unref();
    await this.#poll();
  }

  /**
   * Publish the seeds unless this run was seeded already (by anyone, ever). Waits while another
   * member seeds; takes over if that member dies before finishing.
   */
  async seedOnce(seed: () => Promise<void>): Promise<SeedOutcome> {
    const ttlMs = this.#o.lockTtlMs ?? 10_000;
    for (;;) {
      if (this.#closed) return 'closed';
      if (this.#done || (await this.#c.get(this.#key('control'))) === 'done') return 'run-done';
      if ((await this.#c.get(this.#key('seeded'))) !== undefined) return 'already-seeded';
      const lease = await this.#c.acquireLock(this.#key('seed'), { ttlMs });
      if (!lease) {
        await sleep(Math.min(250, ttlMs / 4));
        continue;
      }
      let renew: NodeJS.Timeout | undefined;
      try {
        if ((await this.#c.get(this.#key('seeded'))) !== undefined) return 'already-seeded';
        renew = setInterval(() => void this.#c.renewLock(lease, ttlMs).catch(() => undefined), ttlMs / 3);
        renew.unref();
        await seed();
        await this.#c.set(this.#key('seeded'), this.#c.nodeId);
        return 'seeded';
      } finally {
        if (renew) clearInterval(renew);
        await this.#c.releaseLock(lease).catch(() => false);
      }
    }
  }

  /** Stop the loops, leave the membership and the leadership. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopTimers();
    await this.#leader.stop().catch(() => undefined);
    await this.#c.leave().catch(() => undefined);
  }

  #key(name: string): string {
    return `run:${this.runId}:${name}`;
  }

  #service(): boolean {
    return this.#o.service ?? false;
  }

  // ── every member: answer probes, notice the end ──────────────────────────────

  async #poll(): Promise<void> {
    if (this.#polling || this.#closed || this.#done) return;
    this.#polling = true;
    try {
      const control = await this.#c.get(this.#key('control'));
      if (control === 'done') {
        if (!this.#service()) this.#finish();
      } else if (control?.startsWith('probe:')) {
        const epoch = Number(control.slice(6));
        if (Number.isInteger(epoch) && epoch > this.#lastAnswered) await this.#answer(epoch);
      }
    } catch (err) {
      this.#o.onError?.(err, 'polling the run control key');
    } finally {
      this.#polling = false;
    }
  }

  async #answer(epoch: number): Promise<void> {
    // Captured now, written after: the answer describes this member at a time after the probe.
    const before = this.#o.activity();
    const started = before.started;
    let idle = before.idle;
    if (idle && this.#o.ownTopicsEmpty !== undefined) {
      const empty = await this.#o.ownTopicsEmpty();
      const after = this.#o.activity();
      idle = empty && after.idle && after.started === started;
    }
    const service = this.#service() ? 1 : 0;
    await this.#c.set(
      this.#key(`answer:${this.#c.nodeId}`),
      `${epoch}:${idle ? 1 : 0}:${started}:${service}`,
      { ttlMs: 60_000 },
    );
    this.#lastAnswered = Math.max(this.#lastAnswered, epoch);
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#stopTimers();
    this.#o.onDone();
  }

  #stopTimers(): void {
    for (const t of [this.#pollTimer, this.#checkTimer, this.#idleWatch]) if (t) clearInterval(t);
  }

  // ── the leader: confirm that the whole cluster is done ───────────────────────

  async #check(): Promise<void> {
    if (this.#checking || this.#closed || this.#done || !this.#leader.isLeader()) return;
    if (this.#service() || !this.#o.activity().idle) return;
    this.#checking = true;
    try {
      if (await this.#confirmDone()) {
        await this.#c.set(this.#key('control'), 'done');
        this.#finish();
      }
    } catch (err) {
      this.#o.onError?.(err, 'checking whether the run is done');
    } finally {
      this.#checking = false;
    }
  }

  async #confirmDone(): Promise<boolean> {
    if ((await this.#c.get(this.#key('seeded'))) === undefined) return false;
    if (!(await this.#o.topicsEmpty())) return false;
    const members = await this.#members();
    if (!members.includes(this.#c.nodeId)) return false;
    this.probes++;
    const first = await this.#probe(members);
    if (!first || [...first.values()].some((a) => !a.idle)) return false;
    if (!(await this.#o.topicsEmpty())) return false;
    const second = await this.#probe(members);
    if (!second) return false;
    const after = await this.#members();
    if (after.length !== members.length || after.some((m, i) => m !== members[i])) return false;
    for (const [node, a] of second) {
      const b = first.get(node);
      if (!a.idle || b === undefined || a.started !== b.started) return false;
    }
    return this.#leader.isLeader() && !this.#closed;
  }

  async #members(): Promise<string[]> {
    const all = await this.#c.members();
    return all
      .filter((m) => m.meta.run === this.runId)
      .map((m) => m.id)
      .sort();
  }

  /** Ask every member; undefined when someone did not answer in time. */
  async #probe(members: readonly string[]): Promise<Map<string, MemberActivity> | undefined> {
    const epoch = await this.#c.increment(this.#key('epoch'));
    await this.#c.set(this.#key('control'), `probe:${epoch}`);
    await this.#answer(epoch);
    const answers = new Map<string, MemberActivity>();
    const deadline = Date.now() + this.#probeTimeoutMs;
    for (;;) {
      await Promise.all(
        members
          .filter((m) => !answers.has(m))
          .map(async (m) => {
            const raw = await this.#c.get(this.#key(`answer:${m}`));
            const parts = raw?.split(':');
            if (parts?.length === 4 && Number(parts[0]) === epoch) {
              // A service member is never done: it counts as busy.
              answers.set(m, { idle: parts[1] === '1' && parts[3] === '0', started: Number(parts[2]) });
            }
          }),
      );
      if (answers.size === members.length) return answers;
      for (const a of answers.values()) if (!a.idle) return answers; // busy: no need to wait
      if (Date.now() >= deadline || this.#closed) return undefined;
      await sleep(Math.max(10, Math.min(50, this.#pollMs / 2)));
    }
  }
}

export function createClusterRun(options: ClusterRunOptions): ClusterRun {
  return new ClusterRun(options);
}

/**
 * Joins that hold across a cluster: a module's `join: true` node fires exactly once per run,
 * after every unit of the run on every worker has finished, with O(1) coordination writes per
 * run per worker in the normal case.
 *
 * Every message of such a module (task, request/response, hand-off) carries a share of its
 * run's credit (distributed/credit.ts): a unit splits what it holds among the children it
 * publishes and, when done, hands the rest to this process's accumulator for the run. Nothing
 * goes to coordination per unit: the accumulator writes its sum once the process has gone
 * quiet for that run (no unit of it running here for a while: 100 ms at first, longer each time
 * the run comes back after such a write, up to 2 s), or holds too many finished units, or has
 * held one too long. The unit's message is acked only after that write (its settle is held, its slot
 * is not), so a crash before the write redelivers the unit and its credit comes back again;
 * the write names the units it covers, so a unit counted before its ack was lost is not
 * counted twice.
 *
 * ```
 *   seed (credit 1) ─▶ units split it ─▶ done: accumulate ─ quiet ─▶ CAS on the phase's key ─▶ ack
 *                                                                     └─ sum reached 1 here ─▶ fire the joins
 * ```
 *
 * The join nodes of a module fire in waves: when every unit started from the seed is done, the
 * joins whose predecessors no other join can still feed fire together, and their hand-offs hold
 * the credit of the next phase; when that phase is done, the next wave fires, and so on.
 * A hand-off of a join is claimed once more when it is handled (a gate keyed by its message id),
 * so the rare double publish after a crash between the completing write and the publish runs
 * the join once.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { Coordination } from '../coordination/types.js';
import { ATTEMPT_HEADER, type StageName, TOPICS } from '../model/events.js';
import type { ModuleGraph } from '../module/graph.js';
import type { JoinReady } from '../module/run-ledger.js';
import type { Logger } from '../observability/logger.js';
import type { Delivery } from '../queue/types.js';
import { childCredit, childId, formatCredit, parseCredit, type UnitCredit } from './credit.js';
import { type CreditReturn, CreditStore } from './credit-store.js';

/** `mocra:module:credit-flush` — one accumulated batch of returned join credit was written (or found covered). */
export interface CreditFlushMessage {
  runId: string;
  module: string;
  phase: number;
  /** Units in the batch. */
  units: number;
  /** Whether coordination was written (false: every unit was already covered). */
  wrote: boolean;
  /** This write made the phase whole: its joins fire now. */
  completed: boolean;
  conflicts: number;
  nodeId: string;
  /** What made this process write now. */
  trigger: FlushTrigger;
}

/**
 * Why a batch was written: the run went quiet here, a task of it was done, this process held
 * too many finished units, an ack waited too long, shutdown, or a failed write tried again.
 */
export type FlushTrigger = 'quiet' | 'task' | 'full' | 'held' | 'close' | 'retry';

const flushChannel = diagnostics_channel.channel('mocra:module:credit-flush');

/** The unit id of a run's seed (a task without credit). */
const SEED_ID = 'seed';

export interface JoinCreditsOptions {
  coordination: Coordination;
  /** Prefix of coordination keys. @default 'mocra' */
  namespace?: string;
  /** The graph of a module when it has join nodes; undefined for every other module. */
  graphOf(module: string): ModuleGraph | undefined;
  /** The modules a task runs (by name). */
  modulesOf(task: { module?: string; modules?: string[] }): readonly string[];
  /** Publishes the hand-offs of joins that became ready, each carrying the credit given (formatted). */
  fire(
    joins: readonly { join: JoinReady; credit: string }[],
    origin: { account?: string; platform?: string },
  ): Promise<void>;
  log: Logger;
  /**
   * A run is quiet in this process once no unit of it ran here for this long. It is where the
   * wait starts: each time a run that was written as quiet comes back to this process (more of
   * its units arrive), its wait here is four times longer, up to `maxQuietMs`. @default 100
   */
  quietMs?: number;
  /** The longest a run's quiet wait grows to. @default 2000 */
  maxQuietMs?: number;
  /**
   * Finished units this process holds unwritten, over all runs, before the run holding the most
   * is written anyway: it bounds the held acks and what a crash makes run again. @default 5000
   */
  maxHeld?: number;
  /**
   * Longest a unit's ack waits for its credit to be written (its lease is extended meanwhile):
   * a run busy here for longer is written about once per this long. @default 20000
   */
  maxHoldMs?: number;
  /** @default 86400000 (a day) */
  ttlMs?: number;
}

/** One phase of one run × module in this process: what is running and what waits to be written. */
interface Accumulator {
  readonly key: string;
  readonly runId: string;
  readonly module: string;
  readonly phase: number;
  origin: { account?: string; platform?: string };
  running: number;
  pending: Map<string, number>;
  waiters: { resolve: () => void; reject: (err: unknown) => void }[];
  heldSince: number;
  timer: NodeJS.Timeout | undefined;
  trigger: FlushTrigger;
  /** A task's unit waits in `pending`: written at once (see {@link JoinCredits.wrap}). */
  urgent: boolean;
  flushing: Promise<void> | undefined;
  failures: number;
}

/** What the unit being handled holds, per module, and how many children it gave credit to. */
interface UnitScope {
  readonly units: Map<
    string,
    {
      runId: string;
      credit: UnitCredit;
      children: number;
      /** Undefined in a run's last phase: no join waits for it, so its credit is not written. */
      accumulator: Accumulator | undefined;
    }
  >;
  continued: boolean;
  /** Closed by the handler itself ({@link JoinCredits.done}). */
  closed: boolean;
}

export class JoinCredits {
  readonly #options: JoinCreditsOptions;
  readonly #store: CreditStore;
  readonly #namespace: string;
  readonly #quietMs: number;
  readonly #maxQuietMs: number;
  readonly #maxHeld: number;
  readonly #maxHoldMs: number;
  readonly #ttlMs: number;
  readonly #accumulators = new Map<string, Accumulator>();
  /**
   * How long each run waits here before it counts as quiet, kept across its accumulators (one
   * ends with each write): `wrote` is set by a quiet write, and a unit arriving after it makes
   * the wait longer.
   */
  readonly #pace = new Map<string, { quietMs: number; wrote: boolean }>();
  /** Finished units waiting in `pending` of every accumulator (not yet being written). */
  #pending = 0;
  readonly #scopes = new WeakMap<object, UnitScope>();
  readonly #waves = new Map<string, readonly (readonly string[])[]>();
  readonly #warned = new Set<string>();
  readonly #stats = { flushes: 0, writes: 0, conflicts: 0, duplicates: 0, fired: 0 };
  #closed = false;

  constructor(options: JoinCreditsOptions) {
    this.#options = options;
    this.#namespace = options.namespace ?? 'mocra';
    this.#quietMs = Math.max(0, options.quietMs ?? 100);
    this.#maxQuietMs = Math.max(this.#quietMs, options.maxQuietMs ?? 2000);
    this.#maxHeld = Math.max(1, options.maxHeld ?? 5000);
    this.#maxHoldMs = Math.max(1, options.maxHoldMs ?? 20_000);
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    this.#store = new CreditStore({ coordination: options.coordination, ttlMs: this.#ttlMs });
  }

  /** Whether a module's joins go through credit (it has join nodes). */
  tracks(module: string | undefined): boolean {
    return module !== undefined && this.#options.graphOf(module) !== undefined;
  }

  /** Writes, flushes and races so far (flushes that found everything covered do not write). */
  stats(): Readonly<{
    flushes: number;
    writes: number;
    conflicts: number;
    duplicates: number;
    fired: number;
  }> {
    return { ...this.#stats };
  }

  /**
   * Wraps a stage's handler: the unit a delivery holds is open while it runs, and when the
   * handler acks it, its remaining credit is accumulated and the ack waits for the write. A
   * handler that throws leaves the credit with the message (its retry or dead letter carries it).
   */
  wrap<T, TResult extends object>(
    stage: StageName,
    handle: (delivery: Delivery<T>, signal: AbortSignal) => Promise<TResult | undefined>,
  ): (
    delivery: Delivery<T>,
    signal: AbortSignal,
  ) => Promise<TResult | { settleAfter: Promise<void>; hold: true } | undefined> {
    return async (delivery, signal) => {
      const scope = this.#open(stage, delivery);
      if (scope === undefined) return handle(delivery, signal);
      if (stage === 'task' && !(await this.#claimSeed(delivery, scope))) {
        this.#close(scope, false);
        return undefined; // the run was seeded by another task message: this one is a copy
      }
      let result: TResult | undefined;
      try {
        result = await handle(delivery, signal);
      } catch (err) {
        this.#close(scope, false);
        throw err;
      }
      if (scope.closed) return result;
      // Settled otherwise (put back, or handed on to another stage in this process): not done here.
      if (result !== undefined || scope.continued) {
        this.#close(scope, false);
        return result;
      }
      // A task's ack is not held for a batch: a task that runs again (its lease lapsed while
      // held) makes every request it started run again, so its credit is written at once.
      return { settleAfter: this.#close(scope, true, stage === 'task'), hold: true };
    };
  }

  /** The unit of this delivery goes on in another message (a response published, a request put back). */
  continued(delivery: object): void {
    const scope = this.#scopes.get(delivery);
    if (scope !== undefined) scope.continued = true;
  }

  /**
   * The unit of this delivery is done although its handler does not ack it (a dead letter):
   * resolves once its credit is written.
   */
  done(delivery: object): Promise<void> {
    const scope = this.#scopes.get(delivery);
    if (scope === undefined) return Promise.resolve();
    return this.#close(scope, true);
  }

  /** Gives a child (request or hand-off) its share of the credit of the unit being handled. */
  stamp(delivery: object, child: { module?: string | undefined; credit?: string | undefined }): void {
    if (child.module === undefined) return;
    const unit = this.#scopes.get(delivery)?.units.get(child.module);
    if (unit === undefined) return;
    unit.children++;
    child.credit = formatCredit(childCredit(unit.credit, unit.children));
  }

  /**
   * Children that got credit but were not published (dropped by admission as already seen):
   * they are done, so their credit comes back now, written before the parent's ack.
   */
  dropped(
    children: readonly {
      runId?: string | undefined;
      module?: string | undefined;
      credit?: string | undefined;
    }[],
  ): void {
    for (const child of children) {
      const credit = parseCredit(child.credit);
      if (credit === undefined || child.runId === undefined || child.module === undefined) continue;
      if (this.#lastPhase(child.module, credit.phase)) continue;
      this.#hold(this.#accumulator(child.runId, child.module, credit.phase, {}), credit.id, credit.exp);
    }
  }

  /**
   * Whether this delivery of a join's hand-off may run the join: the first message to claim it
   * does, and so do its own redeliveries; a second message for the same join (published again
   * after a crash) does not.
   */
  async claimJoin(
    delivery: Delivery<unknown>,
    runId: string,
    module: string,
    node: string,
  ): Promise<boolean> {
    const key = `${this.#namespace}:dag:gate:join:${runId}:${module}:${node}`;
    const coordination = this.#options.coordination;
    if (await coordination.compareAndSet(key, undefined, delivery.id, { ttlMs: this.#ttlMs })) return true;
    // A retry (the error stage republished it after the join's handler failed) is a new message
    // of the claimed join: it takes the claim over.
    if (delivery.headers[ATTEMPT_HEADER] !== undefined) {
      await coordination.set(key, delivery.id, { ttlMs: this.#ttlMs });
      return true;
    }
    return (await coordination.get(key)) === delivery.id;
  }

  /**
   * A run of a join module holds credit 1 once: the first task message that seeds it claims it
   * (its redeliveries pass too). Two tasks seeding one run would both spend the same credit and
   * could fire the join early, so a second one is dropped, with a warning — when every module
   * it names is a join module (else it runs, and the warning says its joins may fire early).
   */
  async #claimSeed(delivery: Delivery<unknown>, scope: UnitScope): Promise<boolean> {
    const coordination = this.#options.coordination;
    const copies: string[] = [];
    for (const [module, { runId, credit }] of scope.units) {
      if (credit.id !== SEED_ID) continue;
      const key = `${this.#namespace}:dag:seed:${runId}:${module}`;
      if (await coordination.compareAndSet(key, undefined, delivery.id, { ttlMs: this.#ttlMs })) continue;
      if ((await coordination.get(key)) !== delivery.id) copies.push(module);
    }
    if (copies.length === 0) return true;
    const all = this.#options.modulesOf(delivery.payload as { module?: string; modules?: string[] });
    const drop = all.every((m) => copies.includes(m));
    this.#options.log.warn(
      { modules: copies, message: delivery.id },
      drop
        ? `a second task for a run of join module(s) ${copies.join(', ')} was dropped: the run was already seeded by another task message`
        : `a second task seeds a run of join module(s) ${copies.join(', ')} already seeded by another task message: their joins may fire early`,
    );
    return !drop;
  }

  /** Writes everything accumulated now (on shutdown), and stops taking more. */
  async close(): Promise<void> {
    this.#closed = true; // from now on every finished unit is written at once
    for (const acc of this.#accumulators.values()) if (acc.pending.size > 0) this.#flushSoon(acc, 0, 'close');
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.allSettled([...this.#accumulators.values()].map((acc) => acc.flushing));
  }

  #open(stage: StageName, delivery: Delivery<unknown>): UnitScope | undefined {
    const held = this.#heldBy(stage, delivery.payload);
    if (held.length === 0) return undefined;
    const scope: UnitScope = { units: new Map(), continued: false, closed: false };
    for (const { runId, module, credit, origin } of held) {
      // A unit of the last phase still stamps its children (they belong to the run), but what
      // it holds is never written: nothing fires when that phase ends, and its ack is not held.
      const accumulator = this.#lastPhase(module, credit.phase)
        ? undefined
        : this.#accumulator(runId, module, credit.phase, origin);
      if (accumulator !== undefined) {
        accumulator.running++;
        this.#cameBack(accumulator.key);
        this.#cancelQuiet(accumulator);
      }
      scope.units.set(module, { runId, credit, children: 0, accumulator });
    }
    this.#scopes.set(delivery, scope);
    return scope;
  }

  /** The credit a payload holds, per module it belongs to. A task without credit seeds its run. */
  #heldBy(
    stage: StageName,
    payload: unknown,
  ): {
    runId: string;
    module: string;
    credit: UnitCredit;
    origin: { account?: string; platform?: string };
  }[] {
    if (payload === null || typeof payload !== 'object') return [];
    const p = payload as Record<string, unknown>;
    if (stage === 'error') return this.#heldBy(stageOfTopic(p.topic), p.payload);
    if (stage === 'parse') return this.#heldBy('download', p.request);
    const runId = p.runId;
    if (typeof runId !== 'string') return [];
    const origin = originOf(p);
    if (stage === 'task') {
      const credit = parseCredit(p.credit);
      return this.#options
        .modulesOf(p as { module?: string; modules?: string[] })
        .filter((module) => this.tracks(module))
        .map((module) => ({ runId, module, credit: credit ?? { phase: 0, exp: 0, id: SEED_ID }, origin }));
    }
    const module = p.module;
    if (typeof module !== 'string' || !this.tracks(module)) return [];
    const credit = parseCredit(p.credit);
    if (credit === undefined) {
      this.#uncredited(runId, module);
      return [];
    }
    return [{ runId, module, credit, origin }];
  }

  /** Ends a unit: done (its credit accumulated; resolves once written) or not done here. */
  #close(scope: UnitScope, done: boolean, urgent = false): Promise<void> {
    if (scope.closed) return Promise.resolve();
    scope.closed = true;
    const written: Promise<void>[] = [];
    for (const { credit, children, accumulator } of scope.units.values()) {
      if (accumulator === undefined) continue;
      accumulator.running--;
      if (done) {
        this.#hold(accumulator, credit.id, credit.exp + children);
        if (urgent) accumulator.urgent = true;
        written.push(
          new Promise<void>((resolve, reject) => {
            accumulator.waiters.push({ resolve, reject });
          }),
        );
      }
      this.#schedule(accumulator);
    }
    return Promise.all(written).then(() => undefined);
  }

  /** Said once per run × module: work that no seed gave credit to can never let a join fire. */
  #uncredited(runId: string, module: string): void {
    const key = `${runId}\u0000${module}`;
    if (this.#warned.has(key)) return;
    if (this.#warned.size >= 10_000) this.#warned.clear();
    this.#warned.add(key);
    this.#options.log.warn(
      { runId, module },
      `work of run '${runId}' of join module '${module}' carries no join credit (was the run started by cx.start?): its joins cannot fire in a cluster; start join modules with a task (docs/deployment.md#joins-in-a-cluster)`,
    );
  }

  #accumulator(
    runId: string,
    module: string,
    phase: number,
    origin: { account?: string; platform?: string },
  ): Accumulator {
    const key = `${this.#namespace}:dag:credit:${runId}:${module}:${phase}`;
    let acc = this.#accumulators.get(key);
    if (acc === undefined) {
      acc = {
        key,
        runId,
        module,
        phase,
        origin,
        running: 0,
        pending: new Map(),
        waiters: [],
        heldSince: 0,
        timer: undefined,
        trigger: 'quiet',
        urgent: false,
        flushing: undefined,
        failures: 0,
      };
      this.#accumulators.set(key, acc);
    } else if (origin.account !== undefined || origin.platform !== undefined) {
      acc.origin = origin;
    }
    return acc;
  }

  /** A finished unit's credit waits to be written. */
  #hold(acc: Accumulator, id: string, exp: number): void {
    if (!acc.pending.has(id)) this.#pending++;
    acc.pending.set(id, exp);
  }

  /** How long a run waits here before it counts as quiet. */
  #quietFor(key: string): number {
    return this.#pace.get(key)?.quietMs ?? this.#quietMs;
  }

  /**
   * A unit of a run arrives here: if the run was last written because it had gone quiet, that
   * wait was too short for how this run's work reaches this process (a queue shared by many
   * runs brings each in bursts), so it waits longer before the next quiet write.
   */
  #cameBack(key: string): void {
    const pace = this.#pace.get(key);
    if (pace === undefined || !pace.wrote) return;
    pace.wrote = false;
    pace.quietMs = Math.min(this.#maxQuietMs, pace.quietMs * 4);
  }

  #wroteQuiet(key: string): void {
    let pace = this.#pace.get(key);
    if (pace === undefined) {
      // Bounded: the oldest runs' pace goes first (they start again at quietMs if they come back).
      if (this.#pace.size >= 10_000) this.#pace.delete(this.#pace.keys().next().value!);
      pace = { quietMs: this.#quietMs, wrote: false };
      this.#pace.set(key, pace);
    }
    pace.wrote = true;
  }

  #cancelQuiet(acc: Accumulator): void {
    // A write already due for holding too much or too long stays due.
    if (acc.timer !== undefined && acc.trigger === 'quiet') {
      clearTimeout(acc.timer);
      acc.timer = undefined;
    }
  }

  /**
   * Arms the write: when the run is quiet here, when the oldest held ack waited long enough, or
   * at once when this process holds too many finished units (then the run holding most goes).
   */
  #schedule(acc: Accumulator): void {
    if (acc.pending.size === 0) {
      if (acc.running === 0 && acc.waiters.length === 0 && acc.flushing === undefined) this.#forget(acc);
      return;
    }
    if (acc.heldSince === 0) acc.heldSince = Date.now();
    if (this.#closed) {
      this.#flushSoon(acc, 0, 'close');
      return;
    }
    if (acc.urgent) {
      this.#flushSoon(acc, 0, 'task');
      return;
    }
    // The fullest may be another run: this one is still armed below.
    if (this.#pending >= this.#maxHeld) this.#writeFullest();
    if (acc.pending.size === 0) return;
    const untilTooLong = Math.max(0, acc.heldSince + this.#maxHoldMs - Date.now());
    const quiet = this.#quietFor(acc.key);
    if (acc.running === 0 && quiet < untilTooLong) this.#flushSoon(acc, quiet, 'quiet');
    else if (acc.timer === undefined || acc.trigger === 'quiet') this.#flushSoon(acc, untilTooLong, 'held');
  }

  /** Starts writing the run (not already being written) that holds most here. */
  #writeFullest(): void {
    let fullest: Accumulator | undefined;
    for (const acc of this.#accumulators.values()) {
      if (acc.flushing !== undefined || acc.pending.size === 0) continue;
      if (fullest === undefined || acc.pending.size > fullest.pending.size) fullest = acc;
    }
    if (fullest === undefined) return;
    if (fullest.timer !== undefined) clearTimeout(fullest.timer);
    fullest.timer = undefined;
    fullest.trigger = 'full';
    void this.#flush(fullest);
  }

  #flushSoon(acc: Accumulator, delayMs: number, trigger: FlushTrigger): void {
    if (acc.timer !== undefined) clearTimeout(acc.timer);
    acc.trigger = trigger;
    acc.timer = setTimeout(() => {
      acc.timer = undefined;
      void this.#flush(acc);
    }, delayMs);
    acc.timer.unref?.();
  }

  async #flush(acc: Accumulator): Promise<void> {
    // One write at a time per phase: a batch that fills while one is written goes next.
    if (acc.flushing !== undefined) {
      await acc.flushing;
      this.#schedule(acc);
      return;
    }
    if (acc.pending.size === 0) return;
    const pending = acc.pending;
    const waiters = acc.waiters;
    acc.pending = new Map();
    acc.waiters = [];
    acc.heldSince = 0;
    acc.urgent = false;
    this.#pending -= pending.size;
    if (acc.trigger === 'quiet') this.#wroteQuiet(acc.key);
    acc.flushing = this.#write(acc, pending).then(
      () => {
        acc.failures = 0;
        for (const w of waiters) w.resolve();
      },
      (err: unknown) => {
        acc.failures++;
        // Put back and tried again; after a few failures in a row the held acks are given up
        // (nacked: the units run again and bring their credit back).
        for (const [id, exp] of pending) this.#hold(acc, id, exp);
        if (acc.failures >= 5) {
          this.#options.log.error(
            { err, key: acc.key },
            'writing join credit failed; the units are put back',
          );
          for (const w of waiters) w.reject(err);
        } else {
          this.#options.log.warn({ err, key: acc.key }, 'writing join credit failed; trying again');
          acc.waiters.push(...waiters);
        }
        if (acc.heldSince === 0) acc.heldSince = Date.now();
      },
    );
    try {
      await acc.flushing;
    } finally {
      acc.flushing = undefined;
    }
    if (acc.failures > 0 && acc.pending.size > 0) this.#flushSoon(acc, 200 * acc.failures, 'retry');
    else this.#schedule(acc);
  }

  async #write(acc: Accumulator, units: ReadonlyMap<string, number>): Promise<void> {
    const result: CreditReturn = await this.#store.return(acc.key, units);
    this.#stats.flushes++;
    if (result.wrote) this.#stats.writes++;
    this.#stats.conflicts += result.conflicts;
    this.#stats.duplicates += result.duplicates;
    if (flushChannel.hasSubscribers) {
      flushChannel.publish({
        runId: acc.runId,
        module: acc.module,
        phase: acc.phase,
        units: units.size,
        wrote: result.wrote,
        completed: result.completed,
        conflicts: result.conflicts,
        nodeId: this.#options.coordination.nodeId,
        trigger: acc.trigger,
      } satisfies CreditFlushMessage);
    }
    if (result.whole) this.#pace.delete(acc.key); // the phase is done: no more of its units come
    // Fired by the completing write; a write that finds the phase already whole is a redelivery
    // after a crash, maybe of the writer before it published: publish again (the gate dedups).
    if (result.whole) await this.#fire(acc);
  }

  async #fire(acc: Accumulator): Promise<void> {
    const graph = this.#options.graphOf(acc.module);
    if (graph === undefined) return;
    const wave = this.#wavesOf(acc.module, graph)[acc.phase] ?? [];
    if (wave.length === 0) return;
    // The next phase's credit 1, split over the wave so that nothing stays behind to return:
    // 1/2 + 1/4 + … + 1/2^(k-1) + 1/2^(k-1).
    const phase = acc.phase + 1;
    const parentId = `join-${phase}`;
    const joins = wave.map((node, i) => ({
      join: { runId: acc.runId, module: acc.module, node },
      credit: formatCredit({ phase, id: childId(parentId, i + 1), exp: Math.min(i + 1, wave.length - 1) }),
    }));
    this.#stats.fired += joins.length;
    await this.#options.fire(joins, acc.origin);
  }

  /** Whether no join fires when this phase of the module's runs is done. */
  #lastPhase(module: string, phase: number): boolean {
    const graph = this.#options.graphOf(module);
    return graph === undefined || phase >= this.#wavesOf(module, graph).length;
  }

  #wavesOf(module: string, graph: ModuleGraph): readonly (readonly string[])[] {
    let waves = this.#waves.get(module);
    if (waves === undefined) {
      waves = joinWaves(graph);
      this.#waves.set(module, waves);
    }
    return waves;
  }

  #forget(acc: Accumulator): void {
    if (acc.timer !== undefined) clearTimeout(acc.timer);
    this.#accumulators.delete(acc.key);
  }
}

/**
 * The order join nodes fire in once all earlier work is done: first every join none of whose
 * predecessors another (not yet fired) join can feed, then the joins those unlock, and so on.
 */
export function joinWaves(graph: ModuleGraph): string[][] {
  const joins = graph.order.filter(
    (id) => graph.nodes.get(id)?.join === true && graph.predecessors(id).length > 0,
  );
  const fired = new Set<string>();
  const waves: string[][] = [];
  while (fired.size < joins.length) {
    const fed = new Set<string>();
    const stack = joins.filter((j) => !fired.has(j)).flatMap((j) => [...graph.successors(j)]);
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (fed.has(id)) continue;
      fed.add(id);
      stack.push(...graph.successors(id));
    }
    const wave = joins.filter((j) => !fired.has(j) && !graph.predecessors(j).some((p) => fed.has(p)));
    if (wave.length === 0) break; // unreachable for an acyclic graph
    for (const j of wave) fired.add(j);
    waves.push(wave);
  }
  return waves;
}

function originOf(p: Record<string, unknown>): { account?: string; platform?: string } {
  return {
    ...(typeof p.account === 'string' ? { account: p.account } : {}),
    ...(typeof p.platform === 'string' ? { platform: p.platform } : {}),
  };
}

function stageOfTopic(topic: unknown): StageName {
  switch (topic) {
    case TOPICS.task:
      return 'task';
    case TOPICS.followUp:
      return 'followUp';
    case TOPICS.response:
      return 'parse';
    default:
      return 'download';
  }
}

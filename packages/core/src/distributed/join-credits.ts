/**
 * Joins that hold across a cluster: a module's `join: true` node fires exactly once per run,
 * after every unit of the run on every worker has finished, with O(1) coordination writes per
 * run per worker in the normal case.
 *
 * Every message of such a module (task, request/response, hand-off) carries a share of its
 * run's credit (distributed/credit.ts): a unit splits what it holds among the children it
 * publishes and, when done, hands the rest to this process's accumulator for the run. Nothing
 * goes to coordination per unit: the accumulator writes its sum once the process has gone
 * quiet for that run (no unit of it running here for `quietMs`), or holds too much, or has held
 * it too long. The unit's message is acked only after that write (its settle is held, its slot
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
}

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
  /** A run is quiet in this process once no unit of it ran here for this long. @default 100 */
  quietMs?: number;
  /** Units accumulated for one run before it is written anyway. @default 2000 */
  maxBatch?: number;
  /**
   * Longest a unit's ack waits for its credit to be written (its lease is extended meanwhile):
   * a run busy here for longer is written about once per this long. @default 10000
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
  flushing: Promise<void> | undefined;
  failures: number;
}

/** What the unit being handled holds, per module, and how many children it gave credit to. */
interface UnitScope {
  readonly units: Map<string, { credit: UnitCredit; children: number; accumulator: Accumulator }>;
  continued: boolean;
  /** Closed by the handler itself ({@link JoinCredits.done}). */
  closed: boolean;
}

export class JoinCredits {
  readonly #options: JoinCreditsOptions;
  readonly #store: CreditStore;
  readonly #namespace: string;
  readonly #quietMs: number;
  readonly #maxBatch: number;
  readonly #maxHoldMs: number;
  readonly #ttlMs: number;
  readonly #accumulators = new Map<string, Accumulator>();
  readonly #scopes = new WeakMap<object, UnitScope>();
  readonly #waves = new Map<string, readonly (readonly string[])[]>();
  readonly #warned = new Set<string>();
  readonly #stats = { flushes: 0, writes: 0, conflicts: 0, duplicates: 0, fired: 0 };
  #closed = false;

  constructor(options: JoinCreditsOptions) {
    this.#options = options;
    this.#namespace = options.namespace ?? 'mocra';
    this.#quietMs = Math.max(0, options.quietMs ?? 100);
    this.#maxBatch = Math.max(1, options.maxBatch ?? 2000);
    this.#maxHoldMs = Math.max(1, options.maxHoldMs ?? 10_000);
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
      return { settleAfter: this.#close(scope, true), hold: true };
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
      this.#accumulator(child.runId, child.module, credit.phase, {}).pending.set(credit.id, credit.exp);
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
    for (const [module, { credit, accumulator }] of scope.units) {
      if (credit.id !== SEED_ID) continue;
      const key = `${this.#namespace}:dag:seed:${accumulator.runId}:${module}`;
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
    for (const acc of this.#accumulators.values()) if (acc.pending.size > 0) this.#flushSoon(acc, 0);
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.allSettled([...this.#accumulators.values()].map((acc) => acc.flushing));
  }

  #open(stage: StageName, delivery: Delivery<unknown>): UnitScope | undefined {
    const held = this.#heldBy(stage, delivery.payload);
    if (held.length === 0) return undefined;
    const scope: UnitScope = { units: new Map(), continued: false, closed: false };
    for (const { runId, module, credit, origin } of held) {
      const accumulator = this.#accumulator(runId, module, credit.phase, origin);
      accumulator.running++;
      this.#cancelQuiet(accumulator);
      scope.units.set(module, { credit, children: 0, accumulator });
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
  #close(scope: UnitScope, done: boolean): Promise<void> {
    if (scope.closed) return Promise.resolve();
    scope.closed = true;
    const written: Promise<void>[] = [];
    for (const { credit, children, accumulator } of scope.units.values()) {
      accumulator.running--;
      if (done) {
        accumulator.pending.set(credit.id, credit.exp + children);
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
        flushing: undefined,
        failures: 0,
      };
      this.#accumulators.set(key, acc);
    } else if (origin.account !== undefined || origin.platform !== undefined) {
      acc.origin = origin;
    }
    return acc;
  }

  #cancelQuiet(acc: Accumulator): void {
    // A flush already due for holding too much or too long stays due.
    if (acc.timer !== undefined && acc.pending.size < this.#maxBatch && !this.#heldTooLong(acc)) {
      clearTimeout(acc.timer);
      acc.timer = undefined;
    }
  }

  #heldTooLong(acc: Accumulator): boolean {
    return acc.pending.size > 0 && Date.now() - acc.heldSince >= this.#maxHoldMs;
  }

  /** Arms the write: when quiet, when the batch is full, or when the oldest held ack waited long enough. */
  #schedule(acc: Accumulator): void {
    if (acc.pending.size === 0) {
      if (acc.running === 0 && acc.waiters.length === 0 && acc.flushing === undefined) this.#forget(acc);
      return;
    }
    if (acc.heldSince === 0) acc.heldSince = Date.now();
    const untilTooLong = Math.max(0, acc.heldSince + this.#maxHoldMs - Date.now());
    if (acc.pending.size >= this.#maxBatch || this.#closed) this.#flushSoon(acc, 0);
    else if (acc.running === 0) this.#flushSoon(acc, Math.min(this.#quietMs, untilTooLong));
    else if (acc.timer === undefined) this.#flushSoon(acc, untilTooLong);
  }

  #flushSoon(acc: Accumulator, delayMs: number): void {
    if (acc.timer !== undefined) clearTimeout(acc.timer);
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
    acc.flushing = this.#write(acc, pending).then(
      () => {
        acc.failures = 0;
        for (const w of waiters) w.resolve();
      },
      (err: unknown) => {
        acc.failures++;
        // Put back and tried again; after a few failures in a row the held acks are given up
        // (nacked: the units run again and bring their credit back).
        for (const [id, exp] of pending) if (!acc.pending.has(id)) acc.pending.set(id, exp);
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
    if (acc.pending.size > 0) this.#flushSoon(acc, acc.failures > 0 ? 200 * acc.failures : this.#quietMs);
    else if (acc.running === 0 && acc.waiters.length === 0) this.#forget(acc);
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
      } satisfies CreditFlushMessage);
    }
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

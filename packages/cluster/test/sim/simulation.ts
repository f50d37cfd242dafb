/**
 * The deterministic simulator: real ClusterNode + RaftCore + RaftStorage + ControlState code, on
 * virtual time, a faulty network and model disks, driven by one seed.
 *
 *   safety phase   clients write, read, CAS, increment and take fenced locks through random
 *                  nodes while a nemesis crashes (losing unsynced writes, sometimes tearing the
 *                  last batch), restarts, pauses, partitions (symmetric and one-way), changes
 *                  drop/duplicate rates, adds and removes nodes (the leader too) and transfers
 *                  leadership. Odd seeds run a targeted schedule instead — Figure 8, a vote
 *                  crash in the fsync window, a stale read from a deposed leader — see
 *                  nemesis-schedules.ts and scheduleOfSeed. Invariants are checked after every
 *                  event.
 *   liveness phase everything heals; a leader must appear, every node must catch up, and a
 *                  final read of every key joins the history.
 *   verdict        no invariant broke, the history is linearizable (per key), fencing tokens
 *                  grew in real-time order, no lock went to a second owner before the first
 *                  one's TTL had passed in real time, and all replicas hold the same state.
 *
 * Replay one seed: MOCRA_SIM_SEED=<seed> pnpm exec vitest run --project cluster packages/cluster/test/sim-replay.test.ts
 * or: node --import tsx --conditions=@mocra/source packages/cluster/test/sim/run-seed.ts <seed> [--trace]
 */
import type { Clock, ClusterEvent } from '../../src/index.js';
import { ClusterError, ClusterNode } from '../../src/index.js';
import type { RaftEvent } from '../../src/internal.js';
import { InvariantChecker } from './invariants.js';
import type { HistoryOp, KvInput, KvOutput } from './lincheck.js';
import { checkLinearizable, kvModel } from './lincheck.js';
import type { ScheduleContext } from './nemesis-schedules.js';
import { figure8Attempt, runSchedule, staleReadAttempt, voteCrashAttempt } from './nemesis-schedules.js';
import { Prng } from './prng.js';
import type { DiskFaults } from './sim-disk.js';
import { SimDisk } from './sim-disk.js';
import type { NetFaults } from './sim-net.js';
import { SimNet } from './sim-net.js';
import { SimWorld, settle } from './sim-world.js';

export type ScheduleKind = 'random' | 'figure8' | 'vote-crash' | 'stale-read';

export interface SimConfig {
  readonly seed: number;
  /** The nemesis: random faults, or one of the targeted schedules. */
  readonly schedule: ScheduleKind;
  readonly initialVoters: number;
  /** Virtual milliseconds of the safety phase. */
  readonly durationMs: number;
  readonly kvClients: number;
  readonly lockClients: number;
  readonly churn: boolean;
  readonly nemesisEveryMs: readonly [number, number];
  readonly net: NetFaults;
  readonly disk: DiskFaults;
  readonly snapshotThreshold: number;
  readonly trailing: number;
  readonly maxEntriesPerAppend: number;
  /** The dead-voter rule (0 = off): a voter silent this long is removed, down to three. */
  readonly removeDeadVotersAfterMs: number;
  readonly maxNodes: number;
  /**
   * Check-quorum (and the leader lease) on. Some seeds run without it: a deposed leader then
   * keeps believing it leads, which is what ReadIndex must be safe against on its own.
   */
  readonly checkQuorum: boolean;
  /** Keep a trace of every nemesis action and client operation. */
  readonly trace: boolean;
}

export interface SimReport {
  readonly seed: number;
  readonly ok: boolean;
  readonly violations: readonly string[];
  readonly events: number;
  readonly virtualMs: number;
  readonly stats: Readonly<Record<string, number>>;
  /** A hash of the whole run; equal for two runs of one seed (determinism check). */
  readonly fingerprint: string;
  readonly trace: readonly string[];
}

/**
 * The schedule a seed runs: even seeds random faults; of the odd ones, half Figure 8, a quarter
 * vote crash, a quarter stale read (so every window of 8 seeds has each).
 */
export function scheduleOfSeed(seed: number): ScheduleKind {
  const r = ((seed % 8) + 8) % 8;
  if (r % 2 === 0) return 'random';
  return r === 3 ? 'vote-crash' : r === 7 ? 'stale-read' : 'figure8';
}

/** Derive every parameter of a run from its seed. */
export function configFromSeed(seed: number, overrides: Partial<SimConfig> = {}): SimConfig {
  const p = new Prng(seed ^ 0x5eed);
  const schedule = overrides.schedule ?? scheduleOfSeed(seed);
  const voters = p.chance(0.6) ? 3 : 5;
  const targeted = schedule !== 'random';
  return {
    seed,
    schedule,
    initialVoters: voters,
    durationMs: p.int(3000, 5000),
    kvClients: p.int(2, 4),
    lockClients: p.int(1, 2),
    churn: !targeted && p.chance(0.5),
    nemesisEveryMs: [100, p.int(300, 700)],
    net: {
      drop: targeted ? p.pick([0, 0.01]) : p.pick([0, 0.01, 0.05, 0.1]),
      duplicate: p.pick([0, 0.02, 0.1]),
      survive: schedule === 'vote-crash' ? 1 : p.pick([0, 0.5]),
      delayMs: [1, p.int(2, 15)],
    },
    disk: { fsyncMs: [0, p.int(1, 12)], keepInFlight: 0.5, tear: p.pick([0.3, 0.8]) },
    snapshotThreshold: p.int(20, 120),
    trailing: p.int(0, 16),
    maxEntriesPerAppend: schedule === 'figure8' ? 16 : p.pick([1, 4, 16, 16]),
    removeDeadVotersAfterMs: targeted ? 0 : p.pick([0, 0, 400, 1000]),
    maxNodes: 7,
    checkQuorum: schedule !== 'stale-read' && p.chance(0.75),
    trace: false,
    ...overrides,
  };
}

export interface Slot {
  readonly id: string;
  readonly addr: string;
  readonly disk: SimDisk;
  /** Wall-clock skew of this machine (seconds either way). */
  readonly clockOffset: number;
  /** Origin of this incarnation's monotonic clock (each process has its own). */
  monoOrigin: number;
  incarnation: number;
  owner: string;
  node: ClusterNode | undefined;
  state: 'starting' | 'up' | 'down' | 'retired';
  paused: boolean;
  /** True once this node has been part of the cluster (a restart must not bootstrap again). */
  everStarted: boolean;
}

interface LockGrant {
  readonly owner: string;
  readonly ttlMs: number;
  readonly call: number;
  readonly ret: number;
  readonly token: number;
  /** When the holder asked to release it (whatever the answer was). */
  releaseCall: number | undefined;
}

const UNKNOWN = Number.POSITIVE_INFINITY;
const EPOCH = 1_700_000_000_000;
const KV_KEYS = ['k0', 'k1', 'k2'];
const COUNTER = 'ctr';

export async function runSimulation(config: SimConfig): Promise<SimReport> {
  const root = new Prng(config.seed);
  const world = new SimWorld();
  const netPrng = root.fork('net');
  const net = new SimNet(world, netPrng, { ...config.net, delayMs: [...config.net.delayMs] });
  const diskPrng = root.fork('disk');
  const nemesisPrng = root.fork('nemesis');
  const clientPrng = root.fork('clients');
  const nodePrng = root.fork('nodes');
  const checker = new InvariantChecker();
  const slots: Slot[] = [];
  const trace: string[] = [];
  /** Client operations; an entry becomes undefined when the operation certainly did not happen. */
  const history: Array<HistoryOp<KvInput, KvOutput> | undefined> = [];
  const grants: LockGrant[] = [];
  /** Every acquire a lock client issued: one that took effect replaced that owner's lease. */
  const acquires: Array<{ owner: string; call: number }> = [];
  const stats: Record<string, number> = {
    crashes: 0,
    restarts: 0,
    pauses: 0,
    partitions: 0,
    joins: 0,
    removals: 0,
    transfers: 0,
    opsOk: 0,
    opsUnknown: 0,
    opsFailed: 0,
    lockGrants: 0,
    fencedRejected: 0,
  };
  let fingerprint = 0x811c9dc5;
  const mark = (line: string): void => {
    for (let i = 0; i < line.length; i++)
      fingerprint = Math.imul(fingerprint ^ line.charCodeAt(i), 0x01000193) >>> 0;
    if (config.trace) trace.push(`${world.now.toString().padStart(6)} ${line}`);
  };
  let phase: 'safety' | 'liveness' | 'done' = 'safety';

  const nodeOptions = {
    tickMs: 10,
    electionTicks: 10,
    heartbeatTicks: 2,
    requestTimeoutMs: 1500,
    attemptTimeoutMs: 400,
    snapshotThreshold: config.snapshotThreshold,
    snapshotTrailingEntries: config.trailing,
    sweepIntervalMs: 100,
    joinTimeoutMs: 3000,
    maxInflight: 8,
    maxEntriesPerAppend: config.maxEntriesPerAppend,
    removeDeadVotersAfterMs: config.removeDeadVotersAfterMs,
    checkQuorum: config.checkQuorum,
  };

  const clockFor = (slot: Slot, owner: string): Clock => ({
    // Epoch-like wall clocks, each node off by its own offset (seconds of skew).
    now: () => EPOCH + world.now + slot.clockOffset,
    monotonic: () => world.now + slot.monoOrigin,
    setTimer(fn, ms) {
      let live = true;
      world.schedule(
        ms,
        () => {
          if (live) fn();
        },
        owner,
      );
      return () => {
        live = false;
      };
    },
    defer(fn) {
      world.schedule(0, fn, owner);
    },
  });

  const newSlot = (n: number): Slot => {
    const slot: Slot = {
      id: `n${n}`,
      addr: `10.0.0.${n}:7000`,
      disk: new SimDisk(),
      clockOffset: nodePrng.int(-3000, 3000),
      monoOrigin: 0,
      incarnation: 0,
      owner: '',
      node: undefined,
      state: 'down',
      paused: false,
      everStarted: false,
    };
    slots.push(slot);
    return slot;
  };

  const startSlot = (slot: Slot, bootstrap: boolean, seeds: string[]): void => {
    slot.incarnation++;
    slot.monoOrigin = nodePrng.int(0, 1_000_000);
    const owner = `${slot.id}#${slot.incarnation}`;
    slot.owner = owner;
    slot.state = 'starting';
    slot.paused = false;
    slot.everStarted = true;
    checker.resetNode(owner);
    mark(`start ${owner}${bootstrap ? ' bootstrap' : ''} seeds=${seeds.join(',')}`);
    const rnd = nodePrng.fork(owner);
    const options = {
      ...nodeOptions,
      onEvent: (e: ClusterEvent) => {
        // A node stops only on a failed write (the model disk never fails) or a broken
        // invariant inside the code (say, a conflict at a committed index).
        if (e.type === 'error' && e.fatal && slot.owner === owner)
          checker.violations.push(`${owner} stopped: ${e.error.message}`);
        if (e.type === 'dead-voter') {
          stats.deadVoterRemovals = (stats.deadVoterRemovals ?? 0) + 1;
          mark(`${owner} removes dead voter ${e.voter} (silent ${e.silentMs} ms)`);
        }
        if (e.type === 'storage-repaired') {
          stats.repairedTornEntries = (stats.repairedTornEntries ?? 0) + e.tornEntries;
          mark(`${owner} repaired ${e.tornEntries} torn entries, ${e.strayKeys} stray keys`);
        }
      },
    };
    ClusterNode.start({
      id: slot.id,
      addr: slot.addr,
      engine: slot.disk.engine(world, owner, diskPrng.fork(owner), config.disk),
      transport: net.transport(slot.id, slot.addr, owner),
      clock: clockFor(slot, owner),
      random: () => rnd.next(),
      bootstrap,
      seeds,
      options,
      attach: (handler) => net.register(slot.addr, slot.id, owner, handler),
      onRaftEvent: (e: RaftEvent) => {
        if (e.type === 'role')
          mark(`${owner} ${e.role} term ${e.term}${e.leader ? ` leader ${e.leader}` : ''}`);
        if (e.type === 'log-changed' || e.type === 'snapshot-restored')
          checker.logChanged(owner, e.type === 'log-changed' ? e.from : e.index);
      },
      onApply: (entry, result, clusterTime) => {
        if (slot.owner === owner) checker.applied(slot.id, entry, result, clusterTime);
      },
    }).then(
      (node) => {
        if (slot.owner !== owner) return; // crashed while starting
        slot.node = node;
        slot.state = 'up';
        mark(`up ${owner}`);
      },
      (err: unknown) => {
        if (slot.owner !== owner) return;
        mark(`start failed ${owner}: ${(err as Error).message}`);
        if (err instanceof ClusterError && err.code === 'MOCRA_ERR_CLUSTER_STORAGE_CORRUPT') {
          checker.violations.push(`${owner}: ${err.message}`);
        }
        slot.state = 'down';
        world.kill(owner);
        net.unregister(slot.addr);
      },
    );
  };

  /** `lose-unsynced`: power loss that keeps nothing of the writes in flight (no torn batch). */
  const crash = (slot: Slot, mode: 'kill' | 'power-loss' | 'lose-unsynced'): void => {
    mark(`crash ${slot.owner}${mode === 'kill' ? '' : ` ${mode}`}`);
    world.kill(slot.owner);
    net.unregister(slot.addr);
    if (mode === 'power-loss') slot.disk.crash(diskPrng, config.disk);
    else if (mode === 'lose-unsynced')
      slot.disk.crash(diskPrng, { ...config.disk, keepInFlight: 0, tear: 0 });
    else slot.disk.killKeepingCache();
    slot.node = undefined;
    slot.state = 'down';
    slot.paused = false;
    stats.crashes!++;
  };

  const upSlots = (): Slot[] => slots.filter((s) => s.state === 'up');
  /** Targeted schedules hold the clients off while they stage a scene. */
  let quiet = false;
  const liveNode = (prng: Prng): ClusterNode | undefined => {
    const up = upSlots();
    return up.length === 0 ? undefined : prng.pick(up).node;
  };

  // ── bootstrap ────────────────────────────────────────────────────────────────
  const first = newSlot(1);
  startSlot(first, true, []);
  for (let n = 2; n <= config.initialVoters; n++) {
    const slot = newSlot(n);
    world.schedule(20 * n, () => startSlot(slot, false, [first.addr]));
  }

  // ── clients ──────────────────────────────────────────────────────────────────
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => world.schedule(ms, resolve));
  const withDeadline = <T>(
    p: Promise<T>,
    ms: number,
  ): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> =>
    new Promise((resolve) => {
      let done = false;
      world.schedule(ms, () => {
        if (!done) {
          done = true;
          resolve({ ok: false, error: new Error('client deadline') });
        }
      });
      p.then(
        (value) => {
          if (!done) {
            done = true;
            resolve({ ok: true, value });
          }
        },
        (error: unknown) => {
          if (!done) {
            done = true;
            resolve({ ok: false, error });
          }
        },
      );
    });
  /** Errors after which the write certainly did not happen (the cluster says it never ran). */
  const certainlyNotApplied = (err: unknown): boolean =>
    err instanceof ClusterError &&
    (err.code === 'MOCRA_ERR_CLUSTER_NO_LEADER' ||
      err.code === 'MOCRA_ERR_CLUSTER_NOT_LEADER' ||
      err.code === 'MOCRA_ERR_CLUSTER_REMOVED');

  /** Run one client operation on `node` and record it in the history. */
  const kvOp = async (
    name: string,
    node: ClusterNode,
    input: KvInput,
  ): Promise<{ ok: true; value: KvOutput } | { ok: false }> => {
    const run = async (): Promise<KvOutput> => {
      switch (input.op) {
        case 'put':
          await node.set(input.key, input.value);
          return 'ok';
        case 'get':
          return (await node.get(input.key)) ?? null;
        case 'cas':
          return node.compareAndSet(input.key, input.expected ?? undefined, input.next ?? undefined);
        case 'del':
          return node.delete(input.key);
        case 'incr':
          return node.increment(input.key, input.by);
      }
    };
    const call = world.now;
    // Recorded at call time as "unknown": if the client never hears back (its node crashed),
    // the operation may still have happened and must stay in the history.
    const slot = history.length;
    history.push({ client: name, input, output: undefined, call, ret: UNKNOWN });
    const r = await withDeadline(run(), 4000);
    if (r.ok) {
      history[slot] = { client: name, input, output: r.value, call, ret: world.now };
      stats.opsOk!++;
      mark(`${name} ${input.op} ${input.key} on ${node.id} ok ${JSON.stringify(r.value)}`);
      return r;
    }
    if (input.op === 'get' || certainlyNotApplied(r.error)) {
      // A read that failed changed nothing; a write the cluster says never ran is dropped too
      // (if that claim were false, the checker would find the orphan value).
      history[slot] = undefined;
      stats.opsFailed!++;
      mark(`${name} ${input.op} ${input.key} on ${node.id} failed`);
    } else {
      stats.opsUnknown!++;
      const why = r.error instanceof ClusterError ? r.error.code : (r.error as Error).message;
      mark(`${name} ${input.op} ${input.key} on ${node.id} unknown (${why})`);
    }
    return { ok: false };
  };

  let valueSeq = 0;
  const kvClient = async (name: string, prng: Prng): Promise<void> => {
    let lastSeen: string | null = null;
    // Clients stick to one node for a while (as Jepsen's do): one bound to a deposed leader keeps
    // asking it while others write through the new one — the way stale reads get caught.
    let home: Slot | undefined;
    while (phase === 'safety') {
      await sleep(prng.int(1, 40));
      if (phase !== 'safety') break;
      if (quiet) continue;
      if (home?.state !== 'up' || prng.chance(0.08)) {
        const up = upSlots();
        home = up.length > 0 ? prng.pick(up) : undefined;
      }
      const node = home?.node;
      if (!node) continue;
      const key = prng.pick(KV_KEYS);
      const roll = prng.next();
      let input: KvInput;
      if (roll < 0.3) input = { op: 'put', key, value: `${name}-${++valueSeq}` };
      else if (roll < 0.55) input = { op: 'get', key };
      else if (roll < 0.75) {
        const expected: string | null = prng.chance(0.7) ? lastSeen : null;
        input = { op: 'cas', key, expected, next: `${name}-${++valueSeq}` };
      } else if (roll < 0.8) input = { op: 'del', key };
      else if (prng.chance(0.4)) input = { op: 'get', key: COUNTER };
      else input = { op: 'incr', key: COUNTER, by: 1 };
      const r = await kvOp(name, node, input);
      if (r.ok) {
        if (input.op === 'get') lastSeen = r.value as string | null;
        else if (input.op === 'put') lastSeen = input.value;
        else if (input.op === 'cas' && r.value === true) lastSeen = input.next;
      }
    }
  };

  const lockClient = async (name: string, prng: Prng): Promise<void> => {
    while (phase === 'safety') {
      await sleep(prng.int(5, 60));
      if (phase !== 'safety') break;
      if (quiet) continue;
      const node = liveNode(prng);
      if (!node) continue;
      const ttlMs = prng.int(100, 600);
      const call = world.now;
      acquires.push({ owner: name, call });
      const r = await withDeadline(node.acquireLock('L', { ttlMs, owner: name }), 4000);
      if (!r.ok || !r.value) continue;
      const lease = r.value;
      const grant: LockGrant = {
        owner: name,
        ttlMs,
        call,
        ret: world.now,
        token: lease.token,
        releaseCall: undefined,
      };
      grants.push(grant);
      stats.lockGrants!++;
      mark(`${name} acquired L token=${lease.token}`);
      const writes = prng.int(1, 3);
      for (let i = 0; i < writes && phase === 'safety'; i++) {
        // Sometimes the holder "pauses" past its TTL before writing: the fence must stop it.
        await sleep(prng.chance(0.2) ? ttlMs + prng.int(0, 300) : prng.int(1, 30));
        const n = liveNode(prng);
        if (!n) break;
        const w = await withDeadline(
          n.fencedPut('resource', lease.token, `${name}:${lease.token}:${i}`),
          4000,
        );
        if (w.ok && !w.value.accepted) {
          stats.fencedRejected!++;
          break;
        }
      }
      const n = liveNode(prng);
      if (n && prng.chance(0.7)) {
        grant.releaseCall = world.now;
        await withDeadline(n.releaseLock(lease), 4000);
      }
    }
  };

  for (let c = 0; c < config.kvClients; c++) {
    const prng = clientPrng.fork(`kv${c}`);
    world.schedule(300, () => void kvClient(`c${c}`, prng));
  }
  for (let c = 0; c < config.lockClients; c++) {
    const prng = clientPrng.fork(`lock${c}`);
    world.schedule(300, () => void lockClient(`l${c}`, prng));
  }

  // ── nemesis ──────────────────────────────────────────────────────────────────
  let nextNodeNumber = config.initialVoters + 1;
  const nemesis = (): void => {
    if (phase !== 'safety') return;
    const p = nemesisPrng;
    const members = slots.filter((s) => s.state !== 'retired');
    const down = members.filter((s) => s.state === 'down' && s.everStarted);
    const up = upSlots();
    const roll = p.next();
    if (roll < 0.18 && up.length > 0) {
      // Half the time, aim at a node with a write in flight: that is where fsync order matters.
      const writing = up.filter((s) => s.disk.inFlight > 0);
      const victim = writing.length > 0 && p.chance(0.5) ? p.pick(writing) : p.pick(up);
      crash(victim, p.chance(0.6) ? 'power-loss' : 'kill');
    } else if (roll < 0.36 && down.length > 0) {
      const slot = p.pick(down);
      stats.restarts!++;
      startSlot(
        slot,
        false,
        members.filter((s) => s !== slot).map((s) => s.addr),
      );
    } else if (roll < 0.46 && up.length > 0) {
      const slot = p.pick(up);
      if (slot.paused) {
        world.resume(slot.owner);
        slot.paused = false;
        mark(`resume ${slot.owner}`);
      } else {
        world.pause(slot.owner);
        slot.paused = true;
        stats.pauses!++;
        mark(`pause ${slot.owner}`);
        const owner = slot.owner;
        world.schedule(p.int(50, 800), () => {
          if (slot.owner === owner && slot.paused) {
            world.resume(owner);
            slot.paused = false;
            mark(`resume ${owner}`);
          }
        });
      }
    } else if (roll < 0.6) {
      net.cuts.clear();
      const ids = members.map((s) => s.id);
      const leader = up.find((s) => s.node!.status().role === 'leader');
      if (leader && p.chance(0.4)) {
        // Cut the leader off: the classic setup for a stale read from a deposed leader.
        for (const other of ids) {
          if (other === leader.id) continue;
          net.cuts.add(`${leader.id}->${other}`);
          net.cuts.add(`${other}->${leader.id}`);
        }
        mark(`isolate leader ${leader.id}`);
      } else if (p.chance(0.5)) {
        // A symmetric partition into two sides.
        const side = new Set(ids.filter(() => p.chance(0.5)));
        for (const a of ids) for (const b of ids) if (side.has(a) !== side.has(b)) net.cuts.add(`${a}->${b}`);
        mark(`partition ${[...side].join(',')} | ${ids.filter((i) => !side.has(i)).join(',')}`);
      } else {
        // One-way cuts: a node that can send but not hear, or hear but not send.
        const k = p.int(1, 3);
        for (let i = 0; i < k; i++) net.cuts.add(`${p.pick(ids)}->${p.pick(ids)}`);
        mark(`cuts ${[...net.cuts].join(' ')}`);
      }
      stats.partitions!++;
    } else if (roll < 0.72) {
      net.cuts.clear();
      mark('heal');
    } else if (roll < 0.78) {
      net.faults.drop = p.pick([0, 0.01, 0.05, 0.2]);
      net.faults.duplicate = p.pick([0, 0.05, 0.2]);
      mark(`net drop=${net.faults.drop} dup=${net.faults.duplicate}`);
    } else if (roll < 0.86 && config.churn && members.length < config.maxNodes && up.length > 0) {
      const slot = newSlot(nextNodeNumber++);
      const seeds = [p.pick(up).addr];
      stats.joins!++;
      startSlot(slot, false, seeds);
    } else if (roll < 0.92 && config.churn && up.length > 0) {
      const node = p.pick(up).node!;
      const status = node.status();
      if (status.voters.length + status.learners.length > 3) {
        const victim = p.pick(status.members.map((m) => m.id));
        stats.removals!++;
        mark(`remove ${victim} via ${node.id}`);
        node.removeNode(victim).then(
          () => {
            mark(`removed ${victim}`);
            const slot = slots.find((s) => s.id === victim);
            if (slot && slot.state !== 'down') {
              // A removed node lingers a while (it must not disturb anyone), then stops.
              world.schedule(p.int(0, 500), () => {
                if (slot.state === 'up' || slot.state === 'starting') crash(slot, 'kill');
                slot.state = 'retired';
              });
            } else if (slot) slot.state = 'retired';
          },
          () => mark(`remove ${victim} failed`),
        );
      }
    } else if (up.length > 0) {
      const node = p.pick(up).node!;
      stats.transfers!++;
      mark(`transfer via ${node.id}`);
      node.transferLeadership().then(
        (to) => mark(`transferred to ${to}`),
        () => mark('transfer failed'),
      );
    }
    world.schedule(p.int(config.nemesisEveryMs[0], config.nemesisEveryMs[1]), nemesis);
  };

  // ── targeted schedules ───────────────────────────────────────────────────────
  /** Steps run after every event (the schedules' eyes); each returns true when it is done. */
  const watchers = new Set<{ step: () => boolean; deadline: number; resolve: (ok: boolean) => void }>();
  const pollWatchers = (): boolean => {
    let resolved = false;
    for (const w of [...watchers]) {
      const done = w.step();
      if (done || world.now >= w.deadline) {
        watchers.delete(w);
        w.resolve(done);
        resolved = true;
      }
    }
    return resolved;
  };
  const scheduleContext: ScheduleContext = {
    net,
    prng: nemesisPrng,
    maxEntriesPerAppend: config.maxEntriesPerAppend,
    active: () => phase === 'safety',
    slots: () => slots,
    crash: (slot, mode) => crash(slot, mode === 'kill' ? 'kill' : 'lose-unsynced'),
    restart: (slot) => {
      stats.restarts!++;
      startSlot(
        slot,
        false,
        slots.filter((s) => s !== slot && s.state !== 'retired').map((s) => s.addr),
      );
    },
    pause: (slot) => {
      world.pause(slot.owner);
      slot.paused = true;
      stats.pauses!++;
      mark(`pause ${slot.owner}`);
    },
    resume: (slot) => {
      world.resume(slot.owner);
      slot.paused = false;
      mark(`resume ${slot.owner}`);
    },
    quiet: (on) => {
      quiet = on;
    },
    kvOp: (slot, input) =>
      slot.node ? kvOp('nemesis', slot.node, input) : Promise.resolve({ ok: false as const }),
    freshValue: () => `nemesis-${++valueSeq}`,
    watch: (step, ms) =>
      new Promise<boolean>((resolve) => {
        if (step()) resolve(true);
        else watchers.add({ step, deadline: world.now + ms, resolve });
      }),
    sleep,
    mark,
    count: (stat) => {
      stats[stat] = (stats[stat] ?? 0) + 1;
    },
  };
  if (config.schedule === 'random') world.schedule(800, nemesis);
  else {
    const attempt = {
      figure8: figure8Attempt,
      'vote-crash': voteCrashAttempt,
      'stale-read': staleReadAttempt,
    }[config.schedule];
    runSchedule(scheduleContext, attempt).catch((err: unknown) =>
      checker.violations.push(`the ${config.schedule} schedule failed: ${String(err)}`),
    );
  }

  // ── the run ──────────────────────────────────────────────────────────────────
  const checkAll = (): void => {
    for (const s of slots) {
      if (s.state !== 'up' || !s.node) continue;
      checker.checkNode(s.owner, s.id, s.node.internals().core);
    }
  };

  const run = async (until: number): Promise<void> => {
    while (world.now < until && checker.violations.length === 0) {
      if (!world.step()) break;
      await settle();
      checkAll();
      // A schedule that was waiting acts before the next event.
      if (watchers.size > 0 && pollWatchers()) await settle();
    }
  };

  await run(config.durationMs);

  // ── liveness: heal everything and require convergence ────────────────────────
  phase = 'liveness';
  quiet = false;
  for (const w of watchers) w.resolve(false);
  watchers.clear();
  mark('liveness');
  net.cuts.clear();
  net.faults.drop = 0;
  net.faults.duplicate = 0;
  for (const s of slots) {
    if (s.paused) {
      world.resume(s.owner);
      s.paused = false;
    }
  }
  const livenessStart = world.now;
  const restartDown = (): void => {
    const members = slots.filter((s) => s.state !== 'retired');
    for (const s of members) {
      if (s.state === 'down' && s.everStarted)
        startSlot(
          s,
          false,
          members.filter((o) => o !== s).map((o) => o.addr),
        );
    }
  };
  restartDown();
  const converged = (): boolean => {
    const up = upSlots();
    const leaders = up.filter((s) => s.node!.status().role === 'leader');
    if (leaders.length !== 1) return false;
    const lead = leaders[0]!.node!.status();
    const memberIds = new Set(lead.members.map((m) => m.id));
    for (const s of slots) {
      if (!memberIds.has(s.id)) continue;
      if (s.state !== 'up') return false;
      const st = s.node!.status();
      if (st.appliedIndex < lead.commitIndex || st.leaderId !== lead.id) return false;
    }
    return lead.appliedIndex >= lead.commitIndex;
  };
  let ok = false;
  while (world.now - livenessStart < 20_000 && checker.violations.length === 0) {
    await run(world.now + 100);
    if (world.now - livenessStart > 3000) restartDown();
    if (converged()) {
      ok = true;
      break;
    }
  }
  if (!ok && checker.violations.length === 0) {
    const states = slots.map(
      (s) =>
        `${s.id}:${s.state}${s.node ? `/${JSON.stringify(s.node.status().role)}@${s.node.status().appliedIndex}` : ''}`,
    );
    checker.violations.push(`liveness: no convergence within 20 s after healing (${states.join(' ')})`);
  }

  // Final linearizable reads of every key join the history. A reader can still go away (a
  // removal issued during the safety phase may land now), so a read moves on to the current
  // leader, a bounded number of times.
  if (checker.violations.length === 0) {
    for (const key of [...KV_KEYS, COUNTER]) {
      let done = false;
      for (let attempt = 0; attempt < 5 && !done; attempt++) {
        const up = upSlots();
        const reader = (up.find((s) => s.node!.status().role === 'leader') ?? up[0])?.node;
        if (!reader) break;
        const call = world.now;
        let out: { ok: boolean; value?: string | undefined } = { ok: false };
        reader.get(key).then(
          (value) => {
            out = { ok: true, value };
          },
          () => {},
        );
        const until = world.now + 3000;
        while (!out.ok && world.now < until) {
          if (!world.step()) break;
          await settle();
        }
        mark(
          `final read of ${key} on ${reader.id}: ${out.ok ? JSON.stringify(out.value ?? null) : 'no answer'}`,
        );
        if (out.ok) {
          history.push({
            client: 'final',
            input: { op: 'get', key },
            output: out.value ?? null,
            call,
            ret: world.now,
          });
          done = true;
        }
      }
      if (!done) checker.violations.push(`liveness: final read of ${key} did not complete`);
    }
    // Replicas that applied the same index hold the same state.
    const byIndex = new Map<number, string>();
    for (const s of upSlots()) {
      const sm = s.node!.internals().stateMachine;
      const known = byIndex.get(sm.appliedIndex);
      const text = sm.serialize();
      if (known === undefined) byIndex.set(sm.appliedIndex, text);
      else if (known !== text)
        checker.violations.push(`state machines differ at applied index ${sm.appliedIndex}`);
    }
  }
  phase = 'done';

  // ── verdicts on the histories ────────────────────────────────────────────────
  if (checker.violations.length === 0) {
    const ops = history.filter((op): op is HistoryOp<KvInput, KvOutput> => op !== undefined);
    const lin = checkLinearizable(kvModel, ops, { maxSteps: 3_000_000 });
    if (lin.result === 'illegal') {
      checker.violations.push(`history is not linearizable:\n    ${lin.partition.join('\n    ')}`);
    } else if (lin.result === 'unknown') {
      checker.violations.push('linearizability check ran out of budget');
    }
    // A lock never goes to another owner before the holder's TTL has passed in real time,
    // counted from when the holder asked (the grant happened after that), unless the holder
    // had asked to release it or to take it again (a new lease, whether or not the holder heard
    // back, replaces the old one). Skewed wall clocks and leader changes must not shorten a lease.
    for (const a of grants) {
      for (const b of grants) {
        if (b.owner === a.owner || b.token <= a.token) continue;
        const replaced = acquires.some((g) => g.owner === a.owner && g.call > a.call && g.call < b.ret);
        const released = a.releaseCall !== undefined && a.releaseCall < b.ret;
        if (replaced) continue;
        if (!released && b.ret < a.call + a.ttlMs) {
          checker.violations.push(
            `lock granted to ${b.owner} (token ${b.token}, returned at ${b.ret}) while ${a.owner}'s ${a.ttlMs} ms lease (token ${a.token}, asked at ${a.call}) still ran`,
          );
        }
      }
    }
    // Fencing tokens grow in real-time order: a grant that started after another ended has a larger token.
    const sorted = [...grants].sort((a, b) => a.ret - b.ret);
    for (const g of grants) {
      for (const earlier of sorted) {
        if (earlier.ret >= g.call) break;
        if (earlier.token >= g.token) {
          checker.violations.push(
            `fencing token ${g.token} granted after token ${earlier.token} had been returned`,
          );
        }
      }
    }
  }

  for (const s of slots) if (s.node) world.kill(s.owner);
  stats.events = world.eventsRun;
  stats.historyOps = history.filter((op) => op !== undefined).length;
  stats.tornBatches = slots.reduce((n, s) => n + s.disk.tornBatches, 0);
  stats.oracleGrants = checker.grants;
  stats.maxCommitted = checker.maxCommitted;
  stats.packets = net.packets;
  mark(`end ${checker.violations.length}`);
  return {
    seed: config.seed,
    ok: checker.violations.length === 0,
    violations: checker.violations,
    events: world.eventsRun,
    virtualMs: world.now,
    stats,
    fingerprint: fingerprint.toString(16),
    trace,
  };
}

/** The one-line command that replays a seed. */
export function replayCommand(seed: number): string {
  return `MOCRA_SIM_SEED=${seed} pnpm exec vitest run --project cluster packages/cluster/test/sim-replay.test.ts`;
}

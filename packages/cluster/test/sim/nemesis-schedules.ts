/**
 * Targeted nemesis schedules: fault sequences that set up the histories a random nemesis almost
 * never produces, each reacting to what the nodes do (as a Jepsen nemesis watching the cluster).
 * They only stage faults — cuts, crashes, pauses — and leave the verdict to the invariants.
 *
 * Figure 8 (Raft paper §5.4.2), for 3 or 5 voters:
 * ```
 *   old side (q-1 nodes, leader L)   rest (q nodes)
 *   a. L appends > maxEntriesPerAppend entries only the old side gets
 *   b.                                the rest elect S5; S5 is cut off before its no-op leaves
 *   c. the old side and the rest but S5 ("swing") elect W on the old side; W's first append to
 *      a swing node carries old-term entries only (more of them than one append holds), and
 *      W's link to it is cut right after it got them: its ack still reaches W, the rest of W's
 *      log (its no-op) does not. Counting replicas, W could now call the old entries committed.
 *   d. the old side dies; S5 comes back, wins with the swing nodes and overwrites those entries.
 * ```
 * A leader that commits an old-term entry by counting replicas breaks leader completeness at d.
 *
 * Stale read (checkQuorum off, so a deposed leader keeps believing it leads): the leader is cut
 * off, the others elect a new one, a write goes through it, and then a read of the same key goes
 * to the old leader. A read answered without a quorum round returns the old value: the history
 * is not linearizable.
 *
 * Vote crash (3 or 5 voters): two followers get the TimeoutNow of two leadership transfers at the
 * same instant (the network held the first one back), so both campaign in the same term and the
 * others are the voters. The moment a voter grants one of them while the other's request is on
 * its way, it crashes — either with the write that holds the vote still unsynced (power loss: the
 * write is lost) or just after it landed — and restarts at once, and the other request reaches
 * the new process. A node that sent its grant before the vote was durable, or that does not
 * persist its vote at all, grants twice: two leaders in one term.
 */
import type { RaftCore } from '../../src/internal.js';
import type { KvInput, KvOutput } from './lincheck.js';
import type { Prng } from './prng.js';
import type { SimNet } from './sim-net.js';
import type { Slot } from './simulation.js';

export interface ScheduleContext {
  readonly net: SimNet;
  readonly prng: Prng;
  readonly maxEntriesPerAppend: number;
  /** True while the safety phase runs. */
  active(): boolean;
  slots(): readonly Slot[];
  crash(slot: Slot, mode: 'kill' | 'power-loss'): void;
  restart(slot: Slot): void;
  pause(slot: Slot): void;
  resume(slot: Slot): void;
  /** Stop (true) or let (false) the clients issue operations. */
  quiet(on: boolean): void;
  /** A client operation through `slot`, recorded in the history like the clients' own. */
  kvOp(slot: Slot, input: KvInput): Promise<{ ok: true; value: KvOutput } | { ok: false }>;
  /** A value no client has written. */
  freshValue(): string;
  /** Run `step` after every event until it returns true (then resolve true) or `ms` pass (false). */
  watch(step: () => boolean, ms: number): Promise<boolean>;
  sleep(ms: number): Promise<void>;
  mark(line: string): void;
  count(stat: string): void;
}

const core = (s: Slot): RaftCore => s.node!.internals().core;
const isUp = (s: Slot): boolean => s.state === 'up' && s.node !== undefined && !s.paused;

function shuffled<T>(prng: Prng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = prng.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function cutBoth(net: SimNet, a: readonly Slot[], b: readonly Slot[]): void {
  for (const x of a) {
    for (const y of b) {
      net.cuts.add(`${x.id}->${y.id}`);
      net.cuts.add(`${y.id}->${x.id}`);
    }
  }
}

function healBoth(net: SimNet, a: readonly Slot[], b: readonly Slot[]): void {
  for (const x of a) {
    for (const y of b) {
      net.cuts.delete(`${x.id}->${y.id}`);
      net.cuts.delete(`${y.id}->${x.id}`);
    }
  }
}

/**
 * A leader every voter follows, all up and caught up (same last index and commit), with an
 * entry of its term committed. Resolves to it, or undefined after `ms`.
 */
async function stableLeader(ctx: ScheduleContext, ms: number): Promise<Slot | undefined> {
  let found: Slot | undefined;
  const ok = await ctx.watch(() => {
    const up = ctx.slots().filter(isUp);
    const leaders = up.filter((s) => core(s).role === 'leader');
    if (leaders.length !== 1) return false;
    const lead = leaders[0]!;
    const c = core(lead);
    if (!c.committedInTerm) return false;
    const voters = c.config.members.filter((m) => m.voter).map((m) => m.id);
    for (const id of voters) {
      const s = up.find((x) => x.id === id);
      if (!s) return false;
      const st = core(s).status();
      if (st.leader !== lead.id || st.lastIndex !== c.lastIndex || st.commitIndex !== c.commitIndex)
        return false;
    }
    found = lead;
    return true;
  }, ms);
  return ok ? found : undefined;
}

/**
 * The first node of `among` to lead a term above `term`, or undefined after `ms`. `onElected`
 * runs the moment it is seen, before the new leader's next turn sends anything.
 */
async function newLeader(
  ctx: ScheduleContext,
  among: readonly Slot[],
  term: number,
  ms: number,
  onElected?: (leader: Slot) => void,
): Promise<Slot | undefined> {
  let found: Slot | undefined;
  const ok = await ctx.watch(() => {
    found = among.find((s) => isUp(s) && core(s).role === 'leader' && core(s).term > term);
    if (found) onElected?.(found);
    return found !== undefined;
  }, ms);
  return ok ? found : undefined;
}

function voterSlots(ctx: ScheduleContext, leader: Slot): Slot[] {
  const ids = new Set(
    core(leader)
      .config.members.filter((m) => m.voter)
      .map((m) => m.id),
  );
  return ctx.slots().filter((s) => ids.has(s.id));
}

/** Run attempts of `attempt` until the safety phase ends. */
export async function runSchedule(
  ctx: ScheduleContext,
  attempt: (ctx: ScheduleContext, n: number) => Promise<void>,
): Promise<void> {
  await ctx.sleep(800);
  for (let n = 1; ctx.active(); n++) {
    await attempt(ctx, n);
    ctx.net.cuts.clear();
    ctx.quiet(false);
    for (const s of ctx.slots()) {
      if (s.paused) ctx.resume(s);
      if (s.state === 'down' && s.everStarted) ctx.restart(s);
    }
    await stableLeader(ctx, 3000);
    await ctx.sleep(ctx.prng.int(20, 200));
  }
}

export async function figure8Attempt(ctx: ScheduleContext, n: number): Promise<void> {
  const leader = await stableLeader(ctx, 3000);
  if (!leader || !ctx.active()) return;
  const voters = voterSlots(ctx, leader);
  if (voters.length !== 3 && voters.length !== 5) return;
  const q = Math.floor(voters.length / 2) + 1;
  const others = shuffled(
    ctx.prng,
    voters.filter((s) => s !== leader),
  );
  const old = [leader, ...others.slice(0, q - 2)];
  const rest = others.slice(q - 2);
  const oldTerm = core(leader).term;
  ctx.count('figure8Attempts');
  ctx.mark(`figure8 #${n}: old ${old.map((s) => s.id).join(',')} | rest ${rest.map((s) => s.id).join(',')}`);
  cutBoth(ctx.net, old, rest);

  // a. Entries of the old term that only the old side gets, more than one append carries.
  const before = core(leader).lastIndex;
  for (let i = 0; i < ctx.maxEntriesPerAppend + 4; i++) {
    leader.node!.set(`fig8/${i}`, `${n}.${i}`).catch(() => {});
  }
  const target = core(leader).lastIndex;
  if (target <= before) return;
  const replicated = await ctx.watch(
    () => old.every((s) => isUp(s) && core(s).lastIndex >= target && core(s).status().stableIndex >= target),
    600,
  );
  if (!replicated) return;

  // b. The rest elect a leader; it is cut off the moment it wins, before its no-op goes out.
  const isolated = await newLeader(ctx, rest, oldTerm, 2500, (s5) =>
    cutBoth(
      ctx.net,
      [s5],
      ctx.slots().filter((s) => s !== s5),
    ),
  );
  if (!isolated) return;
  const s5Term = core(isolated).term;
  ctx.mark(`figure8 #${n}: ${isolated.id} leads term ${s5Term}, cut off`);

  // c. The old side wins with the swing nodes; each swing node gets old entries only.
  const swing = rest.filter((s) => s !== isolated);
  healBoth(ctx.net, old, swing);
  const prefix = new Map(swing.map((s) => [s, core(s).lastIndex]));
  const winner = await newLeader(ctx, old, s5Term, 2500);
  if (!winner) return;
  const winnerTerm = core(winner).term;
  const pending = new Set(swing);
  let separated = true;
  const fed = await ctx.watch(() => {
    for (const s of pending) {
      const c = core(s);
      if (!isUp(s) || c.lastIndex <= prefix.get(s)!) continue;
      if (c.termAt(c.lastIndex) === winnerTerm) separated = false;
      // Acks still flow back to the winner; nothing more of its log reaches this node.
      ctx.net.cuts.add(`${winner.id}->${s.id}`);
      pending.delete(s);
    }
    return pending.size === 0;
  }, 1500);
  if (!fed) return;
  if (separated) ctx.count('figure8Separated');
  ctx.mark(
    `figure8 #${n}: ${winner.id} leads term ${winnerTerm}; swing nodes hold old entries only: ${separated}`,
  );
  await ctx.sleep(40);

  // d. The old side dies; the cut-off leader comes back and wins with the swing nodes.
  for (const s of old) if (s.state === 'up') ctx.crash(s, 'kill');
  ctx.net.cuts.clear();
  const back = await ctx.watch(() => isUp(isolated) && core(isolated).role === 'leader', 3000);
  ctx.mark(`figure8 #${n}: ${isolated.id} ${back ? `leads term ${core(isolated).term}` : 'did not win'}`);
  if (back) ctx.count('figure8Completed');
}

export async function voteCrashAttempt(ctx: ScheduleContext, n: number): Promise<void> {
  ctx.quiet(true);
  const leader = await stableLeader(ctx, 3000);
  if (!leader || !ctx.active()) return;
  const voters = voterSlots(ctx, leader);
  if (voters.length < 3) return;
  const [p, q] = shuffled(
    ctx.prng,
    voters.filter((s) => s !== leader),
  ) as [Slot, Slot];
  const afterSync = ctx.prng.chance(0.5);
  const term = core(leader).term;
  ctx.count('voteCrashAttempts');
  ctx.mark(
    `vote-crash #${n}: TimeoutNow from ${leader.id} to ${p.id} and ${q.id} at once; crash ${afterSync ? 'after the vote is synced' : 'in the fsync window'}`,
  );

  // The grant is seen in the core at once; the node's next turn hands it to the disk (and, for a
  // node that does not wait for durability, to the network), so the crash comes a check later.
  let granted: { voter: Slot; term: number; to: string; writing: boolean } | undefined;
  const crashed = ctx.watch(() => {
    for (const x of voters) {
      if (!isUp(x)) continue;
      const st = core(x).status();
      if (st.vote === null || st.vote === x.id || st.term <= term) continue;
      const rival = voters.some(
        (c) =>
          c !== x && c.id !== st.vote && isUp(c) && core(c).role === 'candidate' && core(c).term === st.term,
      );
      if (granted?.voter !== x || granted.term !== st.term || granted.to !== st.vote) {
        granted = { voter: x, term: st.term, to: st.vote, writing: false };
        continue;
      }
      if (x.disk.inFlight > 0) granted.writing = true;
      if (!rival) continue;
      const now = afterSync ? granted.writing && x.disk.inFlight === 0 : x.disk.inFlight > 0;
      if (!now) continue;
      ctx.mark(`vote-crash #${n}: ${x.id} granted ${st.vote} in term ${st.term}; crash and restart`);
      ctx.crash(x, afterSync ? 'kill' : 'power-loss');
      ctx.restart(x);
      ctx.count('voteCrashes');
      return true;
    }
    return false;
  }, 800);
  // Two transfers the leader started one after the other, their TimeoutNow messages held back by
  // the network and delivered together: both targets campaign in the same term.
  for (const target of [p, q]) {
    ctx.net.deliverLater(
      leader.id,
      target.id,
      target.addr,
      [{ type: 'timeout-now', from: leader.id, to: target.id, term }],
      1,
    );
  }
  await crashed;
}

export async function staleReadAttempt(ctx: ScheduleContext, n: number): Promise<void> {
  const leader = await stableLeader(ctx, 3000);
  if (!leader || !ctx.active()) return;
  const others = voterSlots(ctx, leader).filter((s) => s !== leader);
  if (others.length < 2) return;
  const term = core(leader).term;
  ctx.count('staleReadAttempts');
  ctx.mark(`stale-read #${n}: cut off ${leader.id}`);
  cutBoth(
    ctx.net,
    [leader],
    ctx.slots().filter((s) => s !== leader),
  );
  const next = await newLeader(ctx, others, term, 3000);
  if (!next) return;
  const key = ctx.prng.pick(['k0', 'k1', 'k2']);
  const written = await ctx.kvOp(next, { op: 'put', key, value: ctx.freshValue() });
  if (!written.ok || !isUp(leader)) return;
  ctx.count('staleReadProbes');
  // A millisecond later, so the read begins after the write ended (equal times count as overlap).
  await ctx.sleep(1);
  await ctx.kvOp(leader, { op: 'get', key });
}

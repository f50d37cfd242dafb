/**
 * Histories of the shape Jepsen's etcd register test records, for the linearizability checker's
 * tests and its benchmark: a few client processes doing reads, writes and compare-and-sets of
 * small integers on one key, where some operations never hear back (`:info` — the process is
 * replaced, as Jepsen does). Generated from a correct register, so they are linearizable;
 * `corruptRead` breaks one read.
 */
import type { HistoryOp, KvInput, KvOutput } from './lincheck.js';
import { kvModel } from './lincheck.js';
import { Prng } from './prng.js';

export type RegisterOp = HistoryOp<KvInput, KvOutput>;

export interface RegisterHistoryOptions {
  /** @default 73 */
  readonly ops?: number;
  /** Operations with an unknown outcome. @default 25 */
  readonly unknowns?: number;
  /** Concurrent processes. @default 5 */
  readonly processes?: number;
  /** Values are 0..values-1. @default 5 */
  readonly values?: number;
}

/** A linearizable history: each operation takes effect at a random point of its interval. */
export function registerHistory(seed: number, options: RegisterHistoryOptions = {}): RegisterOp[] {
  const n = options.ops ?? 73;
  const unknowns = Math.min(n, options.unknowns ?? 25);
  const processes = options.processes ?? 5;
  const values = options.values ?? 5;
  const p = new Prng(seed);
  const unknown = new Set<number>();
  while (unknown.size < unknowns) unknown.add(p.int(0, n - 1));
  const free = Array.from({ length: processes }, () => p.int(0, 5));
  const names = Array.from({ length: processes }, (_, i) => i);
  let nextName = processes;
  const planned: Array<{ op: RegisterOp; point: number | undefined }> = [];
  for (let i = 0; i < n; i++) {
    let c = 0;
    for (let k = 1; k < processes; k++) if (free[k]! < free[c]!) c = k;
    const call = free[c]! + p.int(0, 3);
    const ret = call + p.int(1, 25);
    const roll = p.next();
    const v = (): string => String(p.int(0, values - 1));
    const input: KvInput =
      roll < 0.4
        ? { op: 'get', key: 'r' }
        : roll < 0.7
          ? { op: 'put', key: 'r', value: v() }
          : { op: 'cas', key: 'r', expected: v(), next: v() };
    const lost = unknown.has(i);
    // An operation whose client never heard back took effect half the time.
    const point = lost && p.chance(0.5) ? undefined : call + p.next() * (ret - call);
    planned.push({
      op: {
        client: `p${names[c]}`,
        input,
        output: undefined,
        call,
        ret: lost ? Number.POSITIVE_INFINITY : ret,
      },
      point,
    });
    free[c] = ret;
    if (lost) names[c] = nextName++;
  }
  const order = planned
    .map((_, i) => i)
    .filter((i) => planned[i]!.point !== undefined)
    .sort((a, b) => planned[a]!.point! - planned[b]!.point!);
  let state: string | null = null;
  const outputs = new Map<number, KvOutput>();
  for (const i of order) {
    const input = planned[i]!.op.input;
    outputs.set(i, input.op === 'get' ? state : input.op === 'cas' ? state === input.expected : 'ok');
    state = kvModel.step(state, input, undefined).state;
  }
  return planned.map(({ op }, i) =>
    op.ret === Number.POSITIVE_INFINITY ? op : { ...op, output: outputs.get(i) },
  );
}

/**
 * Change the output of one completed read. `never-written`: the last read returns a value no
 * operation writes — certainly not linearizable, and the hardest case for a search, which must
 * rule out every ordering before it gets there. `other`: a random read returns another value of
 * the domain, which may or may not still be linearizable.
 */
export function corruptRead(
  history: readonly RegisterOp[],
  seed: number,
  kind: 'never-written' | 'other',
): RegisterOp[] {
  const p = new Prng(seed ^ 0xbad);
  const reads = history
    .map((op, i) => [op, i] as const)
    .filter(([op]) => op.input.op === 'get' && op.output !== undefined);
  if (reads.length === 0) throw new Error('the history has no completed read to corrupt');
  reads.sort((a, b) => b[0].call - a[0].call);
  const [victim, at] = kind === 'never-written' ? reads[0]! : p.pick(reads);
  const out = [...history];
  const was = victim.output === null ? -1 : Number(victim.output);
  out[at] = {
    ...victim,
    output: kind === 'never-written' ? 'never-written' : String((was + 1 + p.int(0, 3)) % 5),
  };
  return out;
}

// The linearizability checker is validated on histories whose answer is known before it is
// trusted with the simulator's and the multi-process tests' histories.
import { describe, expect, test } from 'vitest';
import type { HistoryOp, KvInput, KvOutput } from './sim/lincheck.js';
import { checkLinearizable, kvModel } from './sim/lincheck.js';
import { Prng } from './sim/prng.js';
import { corruptRead, registerHistory } from './sim/register-histories.js';

type Op = HistoryOp<KvInput, KvOutput>;
const INF = Number.POSITIVE_INFINITY;
const put = (client: string, value: string, call: number, ret: number, key = 'x'): Op => ({
  client,
  input: { op: 'put', key, value },
  output: ret === INF ? undefined : 'ok',
  call,
  ret,
});
const get = (client: string, value: string | null, call: number, ret: number, key = 'x'): Op => ({
  client,
  input: { op: 'get', key },
  output: value,
  call,
  ret,
});
const cas = (
  client: string,
  e: string | null,
  n: string | null,
  ok: boolean | undefined,
  call: number,
  ret: number,
): Op => ({
  client,
  input: { op: 'cas', key: 'x', expected: e, next: n },
  output: ok,
  call,
  ret,
});
const incr = (client: string, value: number | undefined, call: number, ret: number): Op => ({
  client,
  input: { op: 'incr', key: 'n', by: 1 },
  output: value,
  call,
  ret,
});
const check = (h: Op[]) => checkLinearizable(kvModel, h).result;

describe('linearizability checker', () => {
  test("Porcupine's README histories (register starting at 0, written here as absent)", () => {
    // C0:  |-------- put('100') --------|
    // C1:     |--- get() -> '100' ---|
    // C2:        |- get() -> '0' -|
    expect(check([put('c0', '100', 0, 5), get('c1', '100', 1, 4), get('c2', null, 2, 3)])).toBe('ok');
    // C0:  |---------------- put('200') ----------------|
    // C1:    |- get() -> '200' -|
    // C2:                           |- get() -> '0' -|
    expect(check([put('c0', '200', 0, 5), get('c1', '200', 1, 2), get('c2', null, 3, 4)])).toBe('illegal');
  });

  test('a stale read after a newer read completed is caught', () => {
    expect(check([put('a', '1', 0, 10), get('b', '1', 11, 12), get('c', null, 13, 14)])).toBe('illegal');
    expect(check([put('a', '1', 0, 10), get('b', null, 1, 4), get('c', '1', 11, 12)])).toBe('ok');
  });

  test('concurrent writes: a later reader may not flip back', () => {
    const w = [put('a', '1', 0, 10), put('b', '2', 0, 10)];
    expect(check([...w, get('c', '2', 11, 12), get('c', '1', 13, 14)])).toBe('illegal');
    expect(check([...w, get('c', '1', 11, 12), get('d', '1', 13, 14)])).toBe('ok');
  });

  test('two compare-and-sets from the same expected value cannot both win', () => {
    expect(check([cas('a', null, '1', true, 0, 5), cas('b', null, '2', true, 0, 5)])).toBe('illegal');
    expect(check([cas('a', null, '1', true, 0, 5), cas('b', null, '2', false, 0, 5)])).toBe('ok');
  });

  test('unknown outcomes may or may not have happened', () => {
    expect(check([put('a', '1', 0, INF), get('b', '1', 5, 6)])).toBe('ok');
    expect(check([put('a', '1', 0, INF), get('b', null, 5, 6)])).toBe('ok');
    expect(check([get('b', '1', 5, 6)])).toBe('illegal'); // a value nobody wrote
    // An unknown write cannot take effect before it was called.
    expect(check([get('b', '1', 0, 4), put('a', '1', 5, INF)])).toBe('illegal');
  });

  test('counters: no increment is lost or applied twice', () => {
    expect(check([incr('a', 1, 0, 5), incr('b', 1, 1, 6)])).toBe('illegal');
    expect(check([incr('a', 1, 0, 5), incr('b', 2, 1, 6)])).toBe('ok');
    expect(check([incr('a', undefined, 0, INF), incr('b', 2, 10, 11)])).toBe('ok');
    expect(check([incr('a', 2, 0, 5)])).toBe('illegal');
  });

  test('random histories from a sequential execution are linearizable; corrupting a read breaks them', () => {
    const prng = new Prng(42);
    for (let trial = 0; trial < 40; trial++) {
      const ops: Op[] = [];
      let value: string | null = null;
      let t = 0;
      for (let i = 0; i < 30; i++) {
        t += prng.int(1, 5);
        const point = t;
        // Each op's interval contains its linearization point.
        const call = point - prng.int(0, 8);
        const ret = point + prng.int(0, 8);
        const client = `c${i % 4}`;
        if (prng.chance(0.5)) {
          value = `v${i}`;
          ops.push(put(client, value, call, ret));
        } else {
          ops.push(get(client, value, call, ret));
        }
      }
      expect(check(ops)).toBe('ok');
      // A read of a value that was never written anywhere is never linearizable.
      const reads = ops.map((op, i) => [op, i] as const).filter(([op]) => op.input.op === 'get');
      if (reads.length === 0) continue;
      const [victim, at] = prng.pick(reads);
      const broken = [...ops];
      broken[at] = { ...victim, output: 'never-written' };
      expect(check(broken)).toBe('illegal');
    }
  });

  test('partitions are checked per key', () => {
    const h = [
      put('a', '1', 0, 5, 'k1'),
      get('b', '1', 6, 7, 'k1'),
      put('a', '2', 0, 5, 'k2'),
      get('b', null, 6, 7, 'k2'),
    ];
    const r = checkLinearizable(kvModel, h);
    expect(r.result).toBe('illegal');
    if (r.result === 'illegal') expect(r.partition.every((line) => line.includes('k2'))).toBe(true);
  });

  test('the prunings change no verdict: random small histories agree with a plain search of every order', () => {
    let illegal = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const clean = registerHistory(seed, { ops: 9, unknowns: 1 + (seed % 5), processes: 3, values: 3 });
      const hasRead = clean.some((op) => op.input.op === 'get' && op.output !== undefined);
      const h = seed % 3 === 0 || !hasRead ? clean : corruptRead(clean, seed, 'other');
      const expected = everyOrder(h) ? 'ok' : 'illegal';
      if (expected === 'illegal') illegal++;
      expect(check(h), `seed ${seed}`).toBe(expected);
    }
    expect(illegal).toBeGreaterThan(50);
  });

  test('Jepsen-register-shaped histories of 73 operations, 25 with unknown outcomes, are decided', () => {
    // A sample that stays quick; scripts/lincheck-bench.ts runs 40 seeds, the hardest included.
    for (const seed of [1, 2, 3, 5, 8, 9, 10]) {
      const h = registerHistory(seed);
      expect(h.filter((op) => op.output === undefined)).toHaveLength(25);
      const decide = (ops: Op[]) => checkLinearizable(kvModel, ops, { maxSteps: 20_000_000 }).result;
      expect(decide(h), `seed ${seed}`).toBe('ok');
      expect(decide(corruptRead(h, seed, 'never-written')), `seed ${seed}`).toBe('illegal');
      expect(decide(corruptRead(h, seed, 'other')), `seed ${seed}`).not.toBe('unknown');
    }
  });
});

/** The reference: try every order that respects real time, with no memory and no pruning. */
function everyOrder(ops: readonly Op[]): boolean {
  const done = ops.map(() => false);
  const known = ops.filter((op) => op.output !== undefined).length;
  const search = (state: string | null, left: number): boolean => {
    if (left === 0) return true;
    for (let i = 0; i < ops.length; i++) {
      if (done[i]) continue;
      const op = ops[i]!;
      // Not before an operation that returned before this one was called.
      if (ops.some((other, j) => !done[j] && j !== i && other.ret < op.call)) continue;
      const r = kvModel.step(state, op.input, op.output);
      if (!r.ok) continue;
      done[i] = true;
      if (search(r.state, left - (op.output === undefined ? 0 : 1))) return true;
      done[i] = false;
    }
    return false;
  };
  return search(kvModel.init(), known);
}

/**
 * A linearizability checker in the style of Wing & Gong with Lowe's memoization, as Porcupine
 * does it (anishathalye/porcupine): depth-first search over which pending operation takes
 * effect next, on a doubly linked list of call/return events, caching (linearized set, model
 * state) pairs already explored. Histories are split per key first (P-compositionality).
 *
 * Operations whose outcome the client never learned (a timeout, a crash) have `ret = Infinity`
 * (Jepsen's `:info`): they may take effect at any point after their call, or not at all.
 */

export interface HistoryOp<TInput, TOutput> {
  readonly client: string;
  readonly input: TInput;
  /** undefined = unknown outcome (then `ret` must be Infinity). */
  readonly output: TOutput | undefined;
  readonly call: number;
  readonly ret: number;
}

export interface Model<TState, TInput, TOutput> {
  init(): TState;
  /** Apply `input` to `state`; ok = the (known) output is what this model would answer. */
  step(state: TState, input: TInput, output: TOutput | undefined): { ok: boolean; state: TState };
  hash(state: TState): string;
  /** Split a history into independent parts (e.g. per key). */
  partition?(ops: readonly HistoryOp<TInput, TOutput>[]): HistoryOp<TInput, TOutput>[][];
  describe?(op: HistoryOp<TInput, TOutput>): string;
}

export type CheckResult =
  | { readonly result: 'ok'; readonly steps: number }
  | { readonly result: 'illegal'; readonly steps: number; readonly partition: string[] }
  | { readonly result: 'unknown'; readonly steps: number };

interface Node {
  readonly id: number;
  readonly isCall: boolean;
  /** For a call: its return node (null for an op with unknown outcome). */
  match: Node | null;
  prev: Node | null;
  next: Node | null;
}

export function checkLinearizable<S, I, O>(
  model: Model<S, I, O>,
  history: readonly HistoryOp<I, O>[],
  options: { maxSteps?: number } = {},
): CheckResult {
  const parts = model.partition ? model.partition(history) : [history.slice()];
  let steps = 0;
  const budget = options.maxSteps ?? 5_000_000;
  for (const part of parts) {
    const r = checkSingle(model, part, budget - steps);
    steps += r.steps;
    if (r.result === 'illegal') {
      const describe = model.describe ?? ((op: HistoryOp<I, O>) => JSON.stringify(op));
      return { result: 'illegal', steps, partition: part.map(describe) };
    }
    if (r.result === 'unknown') return { result: 'unknown', steps };
  }
  return { result: 'ok', steps };
}

function checkSingle<S, I, O>(
  model: Model<S, I, O>,
  ops: readonly HistoryOp<I, O>[],
  budget: number,
): { result: 'ok' | 'illegal' | 'unknown'; steps: number } {
  for (const op of ops) {
    if (op.output === undefined && op.ret !== Number.POSITIVE_INFINITY) {
      throw new Error('an operation with an unknown output must have ret = Infinity');
    }
    if (op.ret < op.call) throw new Error('an operation returned before it was called');
  }
  // Events in time order; at equal times calls come first (overlap is the conservative reading).
  const events: Array<{ t: number; isCall: boolean; id: number }> = [];
  ops.forEach((op, id) => {
    events.push({ t: op.call, isCall: true, id });
    if (op.ret !== Number.POSITIVE_INFINITY) events.push({ t: op.ret, isCall: false, id });
  });
  events.sort((a, b) => a.t - b.t || (a.isCall === b.isCall ? a.id - b.id : a.isCall ? -1 : 1));

  const head: Node = { id: -1, isCall: false, match: null, prev: null, next: null };
  let tail = head;
  const callNodes: Node[] = [];
  const returnNodes = new Map<number, Node>();
  for (const ev of events) {
    const node: Node = { id: ev.id, isCall: ev.isCall, match: null, prev: tail, next: null };
    tail.next = node;
    tail = node;
    if (ev.isCall) callNodes[ev.id] = node;
    else returnNodes.set(ev.id, node);
  }
  for (const [id, ret] of returnNodes) callNodes[id]!.match = ret;
  let returnsLeft = returnNodes.size;

  const lift = (call: Node): void => {
    call.prev!.next = call.next;
    if (call.next) call.next.prev = call.prev;
    const ret = call.match;
    if (ret) {
      ret.prev!.next = ret.next;
      if (ret.next) ret.next.prev = ret.prev;
      returnsLeft--;
    }
  };
  const unlift = (call: Node): void => {
    const ret = call.match;
    if (ret) {
      ret.prev!.next = ret;
      if (ret.next) ret.next.prev = ret;
      returnsLeft++;
    }
    call.prev!.next = call;
    if (call.next) call.next.prev = call;
  };

  const words = Math.ceil(ops.length / 32) || 1;
  const linearized = new Uint32Array(words);
  const cache = new Set<string>();
  const stack: Array<{ node: Node; state: S }> = [];
  let state = model.init();
  let entry: Node | null = head.next;
  let steps = 0;

  while (returnsLeft > 0) {
    if (++steps > budget) return { result: 'unknown', steps };
    if (entry === null) {
      // Only calls of unknown-outcome ops are left ahead, and none fits: backtrack.
      const top = stack.pop();
      if (!top) return { result: 'illegal', steps };
      linearized[top.node.id >> 5]! &= ~(1 << (top.node.id & 31));
      state = top.state;
      unlift(top.node);
      entry = top.node.next;
      continue;
    }
    if (entry.isCall) {
      const op = ops[entry.id]!;
      const r = model.step(state, op.input, op.output);
      if (r.ok) {
        linearized[entry.id >> 5]! |= 1 << (entry.id & 31);
        const key = `${linearized.join(',')}|${model.hash(r.state)}`;
        if (!cache.has(key)) {
          cache.add(key);
          stack.push({ node: entry, state });
          state = r.state;
          lift(entry);
          entry = head.next;
          continue;
        }
        linearized[entry.id >> 5]! &= ~(1 << (entry.id & 31));
      }
      entry = entry.next;
    } else {
      // An operation must have returned by now but nothing linearizes it: backtrack.
      const top = stack.pop();
      if (!top) return { result: 'illegal', steps };
      linearized[top.node.id >> 5]! &= ~(1 << (top.node.id & 31));
      state = top.state;
      unlift(top.node);
      entry = top.node.next;
    }
  }
  return { result: 'ok', steps };
}

// ── the key-value model used by the simulator and the multi-process tests ─────────

export type KvInput =
  | { readonly op: 'put'; readonly key: string; readonly value: string }
  | { readonly op: 'get'; readonly key: string }
  | {
      readonly op: 'cas';
      readonly key: string;
      readonly expected: string | null;
      readonly next: string | null;
    }
  | { readonly op: 'del'; readonly key: string }
  | { readonly op: 'incr'; readonly key: string; readonly by: number };

/** put → 'ok'; get → value or null; cas/del → boolean; incr → the new number. */
export type KvOutput = string | null | boolean | number;

export const kvModel: Model<string | null, KvInput, KvOutput> = {
  init: () => null,
  step(state, input, output) {
    switch (input.op) {
      case 'put':
        return { ok: output === undefined || output === 'ok', state: input.value };
      case 'get':
        return { ok: output === undefined || output === state, state };
      case 'cas': {
        const swapped = state === input.expected;
        return { ok: output === undefined || output === swapped, state: swapped ? input.next : state };
      }
      case 'del':
        return { ok: output === undefined || output === (state !== null), state: null };
      case 'incr': {
        const n = (state === null ? 0 : Number(state)) + input.by;
        return { ok: output === undefined || output === n, state: String(n) };
      }
    }
  },
  hash: (state) => (state === null ? '∅' : `=${state}`),
  partition(ops) {
    const byKey = new Map<string, HistoryOp<KvInput, KvOutput>[]>();
    for (const op of ops) {
      let list = byKey.get(op.input.key);
      if (!list) {
        list = [];
        byKey.set(op.input.key, list);
      }
      list.push(op);
    }
    return [...byKey.values()];
  },
  describe(op) {
    const i = op.input;
    const args =
      i.op === 'put'
        ? i.value
        : i.op === 'cas'
          ? `${i.expected}→${i.next}`
          : i.op === 'incr'
            ? String(i.by)
            : '';
    const out = op.output === undefined ? '?' : JSON.stringify(op.output);
    const ret = op.ret === Number.POSITIVE_INFINITY ? '∞' : String(op.ret);
    return `${op.client} ${i.op}(${i.key}${args ? `, ${args}` : ''}) → ${out} [${op.call}, ${ret}]`;
  },
};

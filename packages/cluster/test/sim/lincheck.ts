/**
 * A linearizability checker in the style of Wing & Gong with Lowe's memoization, as Porcupine
 * does it (anishathalye/porcupine): depth-first search over which pending operation takes
 * effect next, on a doubly linked list of call/return events, caching (linearized set, model
 * state) pairs already explored. Histories are split per key first (P-compositionality).
 *
 * Operations whose outcome the client never learned (a timeout, a crash) have `ret = Infinity`
 * (Jepsen's `:info`): they may take effect at any point after their call, or not at all. They
 * are what makes a search blow up — each one may sit anywhere after its call — so three sound
 * prunings apply to them:
 *  - one that cannot change the state (a read, `Model.readOnly`) is dropped;
 *  - one is never taken where it would leave the state as it is: not taking it is as good,
 *    and keeps it for later;
 *  - nothing is taken right after an unknown operation that it would make pointless (when it
 *    leads to the same state and answer without it, as a write after a write): that ordering
 *    is no better than taking it first and keeping the unknown one for later;
 *  - of unknown operations with equal inputs, only the earliest-called one not yet taken may be
 *    taken (any later one can swap places with it: its window is inside the earlier one's).
 * `Model.simplify` may also merge what no operation can tell apart (for the key-value model:
 * values that nobody reads or compares against), which turns more inputs equal.
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
  /**
   * Rewrite one part, op for op, into one with the same verdict that is easier to search (for
   * example, values no operation can tell apart become one value).
   */
  simplify?(ops: readonly HistoryOp<TInput, TOutput>[]): HistoryOp<TInput, TOutput>[];
  /** An input that never changes the state: with an unknown outcome it is dropped. */
  readOnly?(input: TInput): boolean;
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
    const searched = (model.simplify ? model.simplify(part) : part).filter(
      (op) => op.output !== undefined || !model.readOnly?.(op.input),
    );
    const r = checkSingle(model, searched, budget - steps);
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

  // Unknown-outcome ops with equal inputs form a chain in call order; only the first one not yet
  // linearized may be.
  const sameBefore = new Int32Array(ops.length).fill(-1);
  const lastWithInput = new Map<string, number>();
  for (const ev of events) {
    const op = ops[ev.id]!;
    if (!ev.isCall || op.output !== undefined) continue;
    const key = JSON.stringify(op.input);
    sameBefore[ev.id] = lastWithInput.get(key) ?? -1;
    lastWithInput.set(key, ev.id);
  }

  const words = Math.ceil(ops.length / 32) || 1;
  const linearized = new Uint32Array(words);
  const isLinearized = (id: number): boolean => (linearized[id >> 5]! & (1 << (id & 31))) !== 0;
  // The set as a short exact string (16 bits a character) for the cache key.
  const halves = new Uint16Array(linearized.buffer);
  const setKey = (): string => String.fromCharCode.apply(null, halves as unknown as number[]);
  const cache = new Set<string>();
  const stack: Array<{ node: Node; state: S; hash: string; unknown: boolean }> = [];
  let state = model.init();
  let hash = model.hash(state);
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
      hash = top.hash;
      unlift(top.node);
      entry = top.node.next;
      continue;
    }
    if (entry.isCall) {
      const op = ops[entry.id]!;
      const unknown = op.output === undefined;
      const earlier = sameBefore[entry.id]!;
      if (unknown && earlier >= 0 && !isLinearized(earlier)) {
        entry = entry.next;
        continue;
      }
      const r = model.step(state, op.input, op.output);
      const nextHash = r.ok ? model.hash(r.state) : '';
      let useful = r.ok && !(unknown && nextHash === hash);
      const top = stack[stack.length - 1];
      if (useful && top?.unknown) {
        // Would this op do the same without the unknown op just taken?
        const without = model.step(top.state, op.input, op.output);
        if (without.ok && model.hash(without.state) === nextHash) useful = false;
      }
      if (useful) {
        linearized[entry.id >> 5]! |= 1 << (entry.id & 31);
        const key = setKey() + nextHash;
        if (!cache.has(key)) {
          cache.add(key);
          stack.push({ node: entry, state, hash, unknown });
          state = r.state;
          hash = nextHash;
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
      hash = top.hash;
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

/** The one value all unread, unexpected values stand for in a simplified history. */
const UNSEEN = '\u0000unseen';

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
  readOnly: (input) => input.op === 'get',
  simplify(ops) {
    // Outputs depend on a value only through comparisons with values some op reads or expects
    // (and with "absent"): values nobody reads or expects cannot be told apart, so they become
    // one. Counters do arithmetic on values, so a part with increments is left alone.
    if (ops.some((op) => op.input.op === 'incr')) return [...ops];
    const seen = new Set<string>();
    for (const op of ops) {
      if (op.input.op === 'get' && typeof op.output === 'string') seen.add(op.output);
      if (op.input.op === 'cas' && op.input.expected !== null) seen.add(op.input.expected);
    }
    if (seen.has(UNSEEN)) return [...ops];
    const merge = (v: string): string => (seen.has(v) ? v : UNSEEN);
    return ops.map((op) => {
      const i = op.input;
      if (i.op === 'put') return { ...op, input: { ...i, value: merge(i.value) } };
      if (i.op === 'cas' && i.next !== null) return { ...op, input: { ...i, next: merge(i.next) } };
      return op;
    });
  },
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

import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  analyzeGraph,
  CycleError,
  createDag,
  createDagBuilder,
  DuplicateNodeError,
  EMPTY_PAYLOAD,
  EmptyGraphError,
  InvalidNodeError,
  type NodeRun,
  RESERVED_NODE_IDS,
  ReservedNodeIdError,
  UnknownNodeError,
  UnknownPredecessorError,
} from '../index.js';

const noop: NodeRun = () => EMPTY_PAYLOAD;

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('graph validation names the problem', () => {
  test('empty graph', () => {
    expect(() => createDagBuilder().build()).toThrow(EmptyGraphError);
    expect(() => analyzeGraph([])).toThrow(EmptyGraphError);
  });

  test('duplicate id — at add time and in createDag', () => {
    const b = createDagBuilder().addNode('a', noop);
    const err = thrown(() => b.addNode('a', noop)) as DuplicateNodeError;
    expect(err).toBeInstanceOf(DuplicateNodeError);
    expect(err.nodeId).toBe('a');
    expect(err.code).toBe('MOCRA_ERR_DAG_DUPLICATE_NODE');
    expect(() =>
      createDag([
        { id: 'x', run: noop },
        { id: 'x', run: noop },
      ]),
    ).toThrow(DuplicateNodeError);
  });

  test('unknown predecessor names both nodes', () => {
    const err = thrown(() =>
      createDagBuilder()
        .addNode('a', noop, { after: ['ghost'] })
        .build(),
    ) as UnknownPredecessorError;
    expect(err).toBeInstanceOf(UnknownPredecessorError);
    expect(err.nodeId).toBe('a');
    expect(err.predecessorId).toBe('ghost');
  });

  test('reserved ids', () => {
    expect(RESERVED_NODE_IDS).toEqual(['__start__', '__end__']);
    for (const id of RESERVED_NODE_IDS) {
      const err = thrown(() => createDagBuilder().addNode(id, noop)) as ReservedNodeIdError;
      expect(err).toBeInstanceOf(ReservedNodeIdError);
      expect(err.nodeId).toBe(id);
      expect(() => createDag([{ id, run: noop }])).toThrow(ReservedNodeIdError);
    }
    // a reserved id as a predecessor is simply not a node
    expect(() => createDag([{ id: 'a', run: noop, after: ['__start__'] }])).toThrow(UnknownPredecessorError);
  });

  test('a cycle lists its nodes in edge order, starting at the smallest id', () => {
    const err = thrown(() =>
      createDag([
        { id: 'root', run: noop },
        { id: 'c', run: noop, after: ['b'] },
        { id: 'b', run: noop, after: ['a', 'root'] },
        { id: 'a', run: noop, after: ['c'] },
        { id: 'after-cycle', run: noop, after: ['a'] },
      ]),
    ) as CycleError;
    expect(err).toBeInstanceOf(CycleError);
    expect(err.cycle).toEqual(['a', 'b', 'c', 'a']);
    expect(err.message).toContain('a -> b -> c -> a');
  });

  test('a self-loop is a cycle of one', () => {
    const err = thrown(() => createDag([{ id: 'x', run: noop, after: ['x'] }])) as CycleError;
    expect(err.cycle).toEqual(['x', 'x']);
  });

  test('bad node declarations', () => {
    const b = createDagBuilder();
    expect(() => b.addNode('', noop)).toThrow(InvalidNodeError);
    expect(() => b.addNode({ id: 'a' })).toThrow(/needs a run function/);
    expect(() => b.addNode({ id: 'a', run: 'x' as unknown as NodeRun })).toThrow(/run must be a function/);
    expect(() => b.addNode('a', noop, { after: 'b' as unknown as string[] })).toThrow(/after/);
    expect(() => b.addNode('a', noop, { idempotencyKey: '' })).toThrow(/idempotencyKey/);
    expect(() => b.addNode('a', noop, { placement: { kind: 'remote', workerGroup: '' } })).toThrow(
      /workerGroup/,
    );
    expect(() => b.addNode('a', noop, { timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => b.addNode('a', noop, { retry: { maxRetries: -1 } })).toThrow(/maxRetries/);
    expect(() => b.addNode('a', noop, { retry: { maxRetries: 1, jitter: 2 } })).toThrow(/jitter/);
    expect(() =>
      b.addNode('a', noop, { retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: -5 } } }),
    ).toThrow(/delayMs/);
    expect(() =>
      b.addNode('a', noop, {
        retry: { maxRetries: 1, backoff: { kind: 'exponential', initialDelayMs: 1, factor: 0.5 } },
      }),
    ).toThrow(/factor/);
    expect(() => b.addNode('a', noop, { circuitBreaker: { failureThreshold: 0, openMs: 1 } })).toThrow(
      /failureThreshold/,
    );
    const err = thrown(() => b.addNode('bad', noop, { timeoutMs: -1 })) as InvalidNodeError;
    expect(err.nodeId).toBe('bad');
    expect(err.code).toBe('MOCRA_ERR_DAG_INVALID_NODE');
    // nothing bad was added
    expect(b.size).toBe(0);
  });

  test('remote nodes may leave run out', () => {
    const dag = createDag([{ id: 'r', placement: { kind: 'remote', workerGroup: 'gpu' } }]);
    expect(dag.node('r').run).toBeUndefined();
    expect(dag.node('r').placement).toEqual({ kind: 'remote', workerGroup: 'gpu' });
  });
});

describe('builder shapes', () => {
  test('chain, fan-out and fan-in', () => {
    const dag = createDagBuilder()
      .addChain([
        { id: 'extract', run: noop },
        { id: 'clean', run: noop },
      ])
      .fanOut('clean', [
        { id: 'p1', run: noop },
        { id: 'p2', run: noop },
        { id: 'p3', run: noop },
      ])
      .fanIn(['p1', 'p2', 'p3'], { id: 'merge', run: noop })
      .addChain([{ id: 'load', run: noop }], { after: ['merge'] })
      .build();
    expect(dag.predecessors('clean')).toEqual(['extract']);
    expect(dag.successors('clean')).toEqual(['p1', 'p2', 'p3']);
    expect(dag.predecessors('merge')).toEqual(['p1', 'p2', 'p3']);
    expect(dag.predecessors('load')).toEqual(['merge']);
    expect(dag.roots).toEqual(['extract']);
    expect(dag.leaves).toEqual(['load']);
    expect(dag.layers).toEqual([['extract'], ['clean'], ['p1', 'p2', 'p3'], ['merge'], ['load']]);
    expect(dag.size).toBe(7);
    expect([...dag].map((n) => n.id)).toEqual(dag.topologicalOrder);
  });

  test('fan-out from several nodes; chain members keep their own extra predecessors', () => {
    const dag = createDagBuilder()
      .addNode('a', noop)
      .addNode('b', noop)
      .fanOut(['a', 'b'], [{ id: 'x', run: noop }])
      .addChain([
        { id: 'c1', run: noop },
        { id: 'c2', run: noop, after: ['a'] },
      ])
      .build();
    expect(dag.predecessors('x')).toEqual(['a', 'b']);
    expect(dag.predecessors('c2')).toEqual(['a', 'c1']);
  });

  test('predecessors may be declared after the nodes that name them; duplicates collapse', () => {
    const dag = createDagBuilder()
      .addNode('child', noop, { after: ['parent', 'parent'] })
      .addNode('parent', noop)
      .build();
    expect(dag.topologicalOrder).toEqual(['parent', 'child']);
    expect(dag.predecessors('child')).toEqual(['parent']);
  });

  test('lookups of unknown ids throw UnknownNodeError', () => {
    const dag = createDag([{ id: 'a', run: noop }]);
    expect(dag.has('a')).toBe(true);
    expect(dag.has('zz')).toBe(false);
    expect(() => dag.node('zz')).toThrow(UnknownNodeError);
    expect(() => dag.layerOf('zz')).toThrow(UnknownNodeError);
  });

  test('the built graph is immutable', () => {
    const dag = createDag([
      { id: 'a', run: noop },
      { id: 'b', run: noop, after: ['a'] },
    ]);
    expect(Object.isFrozen(dag.topologicalOrder)).toBe(true);
    expect(Object.isFrozen(dag.layers)).toBe(true);
    expect(Object.isFrozen(dag.node('b'))).toBe(true);
    expect(Object.isFrozen(dag.node('b').predecessors)).toBe(true);
  });
});

describe('deterministic order and layers', () => {
  test('smallest id first among the ready, whatever the insertion order', () => {
    const specs = [
      { id: 'd', after: ['b', 'c'] },
      { id: 'c', after: ['a'] },
      { id: 'b', after: ['a'] },
      { id: 'a' },
      { id: 'e' },
    ];
    expect(analyzeGraph(specs).order).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(analyzeGraph([...specs].reverse()).order).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(analyzeGraph(specs).layers).toEqual([['a', 'e'], ['b', 'c'], ['d']]);
  });

  test('ids compare by code unit, not locale', () => {
    expect(analyzeGraph([{ id: 'b' }, { id: 'B' }, { id: 'a' }, { id: 'é' }]).order).toEqual([
      'B',
      'a',
      'b',
      'é',
    ]);
  });

  test('a layer is the longest path from a root', () => {
    // a → b → c, a → c: c is at depth 2, not 1
    const g = analyzeGraph([{ id: 'a' }, { id: 'b', after: ['a'] }, { id: 'c', after: ['a', 'b'] }]);
    expect(Array.from(g.layerOf)).toEqual([0, 1, 2]);
  });

  /** Random DAGs: edges only from a lower to a higher index of a random permutation. */
  const randomDag = fc
    .integer({ min: 1, max: 40 })
    .chain((n) =>
      fc.record({
        n: fc.constant(n),
        perm: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
        edges: fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1)), { maxLength: n * 3 }),
      }),
    )
    .map(({ n, perm, edges }) => {
      const after: string[][] = Array.from({ length: n }, () => []);
      for (const [x, y] of edges) {
        if (x === y) continue;
        const [from, to] = x < y ? [x, y] : [y, x];
        (after[perm[to] as number] as string[]).push(`n${perm[from]}`);
      }
      return after.map((a, i) => ({ id: `n${i}`, after: a }));
    });

  test('property: the order respects every edge, is a permutation, and ignores insertion order', () => {
    fc.assert(
      fc.property(randomDag, fc.infiniteStream(fc.nat()), (specs, seeds) => {
        const g = analyzeGraph(specs);
        expect([...g.order].sort()).toEqual(specs.map((s) => s.id).sort());
        const pos = new Map(g.order.map((id, i) => [id, i]));
        for (const s of specs) for (const p of s.after) expect(pos.get(p)!).toBeLessThan(pos.get(s.id)!);
        // same graph, shuffled input: same order and layers
        const shuffled = [...specs].sort(() => (seeds.next().value % 3) - 1);
        const h = analyzeGraph(shuffled);
        expect(h.order).toEqual(g.order);
        expect(h.layers).toEqual(g.layers);
        // layers: roots at 0, every node one deeper than its deepest predecessor
        for (const s of specs) {
          const i = pos.get(s.id)!;
          const expected =
            s.after.length === 0 ? 0 : Math.max(...s.after.map((p) => g.layerOf[pos.get(p)!]!)) + 1;
          expect(g.layerOf[i]).toBe(expected);
        }
      }),
      { numRuns: 200 },
    );
  });

  test('property: adding a back edge makes a cycle whose listed edges all exist', () => {
    fc.assert(
      fc.property(randomDag, (specs) => {
        const g = analyzeGraph(specs);
        // find any edge p → s and add s → p
        const withEdge = specs.find((s) => s.after.length > 0);
        if (withEdge === undefined) return;
        const p = withEdge.after[0] as string;
        const cyclic = specs.map((s) => (s.id === p ? { ...s, after: [...s.after, withEdge.id] } : s));
        let err: unknown;
        try {
          analyzeGraph(cyclic);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(CycleError);
        const cycle = (err as CycleError).cycle;
        expect(cycle[0]).toBe(cycle[cycle.length - 1]);
        const afterOf = new Map(cyclic.map((s) => [s.id, s.after]));
        for (let k = 0; k + 1 < cycle.length; k++) expect(afterOf.get(cycle[k + 1]!)).toContain(cycle[k]);
        expect(g.order.length).toBe(specs.length);
      }),
      { numRuns: 200 },
    );
  });
});

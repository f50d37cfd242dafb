import { describe, expect, test } from 'vitest';
import { InvalidModuleError } from '../errors.js';
import { compileModuleGraph, graph } from './graph.js';
import { RunLedger } from './run-ledger.js';
import type { ModuleNode } from './types.js';

const node = (id: string, extra: Partial<ModuleNode> = {}): ModuleNode => ({ id, parse() {}, ...extra });

describe('compileModuleGraph', () => {
  test('steps make a chain; the first node is the only entry', () => {
    const [a, b, c] = [node('a'), node('b'), node('c')];
    const g = compileModuleGraph({ name: 'm', steps: [a, b, c] });
    expect(g.entry).toEqual(['a']);
    expect(g.successors('a')).toEqual(['b']);
    expect(g.predecessors('c')).toEqual(['b']);
    expect(g.order).toEqual(['a', 'b', 'c']);
  });

  test('a graph: every node without a predecessor is an entry, in declaration order', () => {
    const [x, a, b, m] = [node('x'), node('a'), node('b'), node('m', { join: true })];
    const g = compileModuleGraph({ name: 'm', graph: graph().edge(x, m).edge(b, a).edge(a, m).build() });
    expect(g.entry).toEqual(['x', 'b']);
    expect(g.successors('b')).toEqual(['a']);
    expect(g.predecessors('m')).toEqual(['x', 'a']);
  });

  test('nodes alone keep the old default: the first node starts', () => {
    const g = compileModuleGraph({ name: 'm', nodes: [node('a'), node('b')] });
    expect(g.entry).toEqual(['a']);
    expect(g.hasEdges).toBe(false);
  });

  test('steps may name nodes listed in nodes, by id', () => {
    const g = compileModuleGraph({ name: 'm', nodes: [node('a'), node('b')], steps: ['a', 'b'] });
    expect(g.successors('a')).toEqual(['b']);
  });

  test('invalid graphs are InvalidModuleError naming the module and the problem', () => {
    const [a, b] = [node('a'), node('b')];
    const cases: [() => unknown, RegExp][] = [
      [
        () => compileModuleGraph({ name: 'm', graph: graph().edge(a, b).edge(b, a).build() }),
        /module 'm': invalid node graph: .*cycle/i,
      ],
      [() => compileModuleGraph({ name: 'm', steps: [a, 'ghost'] }), /'ghost', which is not a node/],
      [() => compileModuleGraph({ name: 'm', nodes: [a, node('a')] }), /two different nodes are named 'a'/],
      [() => compileModuleGraph({ name: 'm', nodes: [] }), /has no nodes/],
      [() => compileModuleGraph({ name: 'm', nodes: [a], entry: ['zz'] }), /entry node 'zz' does not exist/],
      [
        () => compileModuleGraph({ name: 'm', nodes: [node('j', { join: true })] }),
        /asks for a join but has no predecessor/,
      ],
      [() => compileModuleGraph({ name: 'm', nodes: [{ id: 'x' } as ModuleNode] }), /node 'x' has no parse/],
      // The graph's former key, as JavaScript or an old module file passes it.
      [
        () => compileModuleGraph({ name: 'm', dag: graph().edge(a, b).build() } as never),
        /module 'm'.*'dag' was renamed: use 'graph'/,
      ],
    ];
    for (const [fn, message] of cases) {
      let error: unknown;
      try {
        fn();
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(InvalidModuleError);
      expect((error as InvalidModuleError).code).toBe('MOCRA_ERR_INVALID_MODULE');
      expect((error as Error).message).toMatch(message);
    }
  });
});

describe('RunLedger', () => {
  //   a ─▶ b ─▶ j (join)
  //   a ─▶ c ─┘
  const compiled = compileModuleGraph({
    name: 'm',
    graph: graph()
      .edge(node('a'), node('b'))
      .edge('a', node('c'))
      .edge('b', node('j', { join: true }))
      .edge('c', 'j')
      .build(),
  });

  test('a join becomes ready once, when every predecessor finished for the run', () => {
    const ledger = new RunLedger();
    ledger.add('r', compiled, 'm', 'a'); // the task
    ledger.add('r', compiled, 'm', 'a', 2); // two requests of a
    expect(ledger.done('r', 'm', 'a')).toEqual([]); // task done, requests pending
    ledger.add('r', compiled, 'm', 'b'); // a's parse hands off to b…
    expect(ledger.done('r', 'm', 'a')).toEqual([]); // …then that parse is done
    ledger.add('r', compiled, 'm', 'c');
    expect(ledger.done('r', 'm', 'a')).toEqual([]);
    expect(ledger.isFinished('r', 'm', 'a')).toBe(true);
    expect(ledger.done('r', 'm', 'b')).toEqual([]); // c still busy
    expect(ledger.done('r', 'm', 'c')).toEqual([{ runId: 'r', module: 'm', node: 'j' }]);
    ledger.add('r', compiled, 'm', 'j');
    expect(ledger.done('r', 'm', 'j')).toEqual([]); // fires once only
    expect(ledger.isFinished('r', 'm', 'j')).toBe(true);
  });

  test('runs are separate; a node that gets work again is not finished', () => {
    const ledger = new RunLedger();
    ledger.add('r1', compiled, 'm', 'a');
    ledger.add('r2', compiled, 'm', 'a');
    ledger.done('r1', 'm', 'a');
    expect(ledger.isFinished('r1', 'm', 'a')).toBe(true);
    expect(ledger.isFinished('r2', 'm', 'a')).toBe(false);
    ledger.add('r1', compiled, 'm', 'a');
    expect(ledger.isFinished('r1', 'm', 'a')).toBe(false);
    expect(ledger.isFinished('r1', 'm', 'b')).toBe(false);
  });

  test('the advance gate is claimed once per run × node; stop flags are per run × module', async () => {
    const ledger = new RunLedger();
    ledger.add('r', compiled, 'm', 'a');
    expect(await ledger.claimAdvance('r', 'm', 'a')).toBe(true);
    expect(await ledger.claimAdvance('r', 'm', 'a')).toBe(false);
    expect(await ledger.stoppedReason('r', 'm')).toBeUndefined();
    await ledger.stop('r', 'm', 'enough');
    expect(await ledger.stoppedReason('r', 'm')).toBe('enough');
    expect(await ledger.stoppedReason('r2', 'm')).toBeUndefined();
  });
});

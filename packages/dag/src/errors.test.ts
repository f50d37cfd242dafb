import { describe, expect, test } from 'vitest';
import * as dag from './index.js';
import {
  DAG_ERROR_CODES,
  DagError,
  ExecutionIncompleteError,
  isDagError,
  NodeFailedError,
  NodeTimeoutError,
  PermanentNodeError,
  RetryableNodeError,
  RetryExhaustedError,
  retryableOf,
  serializeError,
} from './index.js';

/** A stand-in report for constructing ExecutionIncompleteError directly. */
const report: dag.DagReport = {
  runId: 'r',
  fencingToken: undefined,
  durationMs: 0,
  outputs: new Map(),
  results: [],
  states: new Map(),
  layers: [],
  output: () => undefined,
};

/** Every exported error class, constructed with plausible arguments. */
const samples: DagError[] = [
  new dag.DuplicateNodeError('a'),
  new dag.UnknownPredecessorError('a', 'b'),
  new dag.CycleError(['a', 'b', 'a']),
  new dag.EmptyGraphError(),
  new dag.ReservedNodeIdError('__start__'),
  new dag.InvalidNodeError('a', 'why'),
  new dag.InvalidOptionsError('x', 'is bad'),
  new dag.UnknownNodeError('a'),
  new dag.NodeFailedError('a', 1, new Error('boom')),
  new dag.RetryExhaustedError('a', 3, 2, new Error('boom')),
  new dag.NodeTimeoutError('a', 1, 10),
  new dag.InvalidNodeOutputError('a', 42),
  new dag.RetryableNodeError('later'),
  new dag.PermanentNodeError('never'),
  new dag.RunTimeoutError('r', 10),
  new dag.RunAbortedError('r', 'stop'),
  new dag.ExecutionIncompleteError('r', ['a'], [], report, new Error('x')),
  new dag.RunInProgressError('k'),
  new dag.RunGuardAcquireError('k', new Error('down')),
  new dag.RunGuardLostError('k', 3),
  new dag.MissingFencingTokenError(),
  new dag.FencingTokenRejectedError('res', 1, 2),
  new dag.RunStateError('save', 'k', new Error('down')),
  new dag.IdempotencyStoreError('k', 'begin', new Error('down')),
  new dag.RemoteDispatchNotConfiguredError('a', 'gpu'),
  new dag.InvalidEnvelopeError('bad-magic', 'x'),
  new dag.UnsupportedEnvelopeVersionError(9, 1),
  new dag.InvalidPayloadError('x'),
];

describe('errors', () => {
  test('one class per code: every code in DAG_ERROR_CODES has exactly one class, and vice versa', () => {
    const codes = samples.map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect([...codes].sort()).toEqual(Object.keys(DAG_ERROR_CODES).sort());
  });

  test('every class is exported, named after itself, and an Error and a DagError', () => {
    for (const err of samples) {
      expect(err).toBeInstanceOf(Error);
      expect(err).toBeInstanceOf(DagError);
      expect(isDagError(err)).toBe(true);
      expect((dag as Record<string, unknown>)[err.name]).toBe(err.constructor);
      expect(err.code).toMatch(/^MOCRA_ERR_DAG_[A-Z_]+$/);
      expect(typeof err.retryable).toBe('boolean');
      expect(err.message.length).toBeGreaterThan(0);
    }
  });

  test('retryable classes: timeouts, guard loss, contention and store failures may be retried; graph errors may not', () => {
    const retryable = samples.filter((e) => e.retryable).map((e) => e.name);
    expect(retryable.sort()).toEqual(
      [
        'IdempotencyStoreError',
        'NodeTimeoutError',
        'RetryExhaustedError',
        'RetryableNodeError',
        'RunGuardAcquireError',
        'RunGuardLostError',
        'RunInProgressError',
        'RunStateError',
        'RunTimeoutError',
      ].sort(),
    );
  });

  test('wrapping errors take retryable from their cause', () => {
    expect(new NodeFailedError('a', 1, new NodeTimeoutError('a', 1, 5)).retryable).toBe(true);
    expect(new NodeFailedError('a', 1, new Error('plain')).retryable).toBe(false);
    expect(new RetryExhaustedError('a', 2, 1, new PermanentNodeError('x')).retryable).toBe(false);
    expect(new RetryExhaustedError('a', 2, 1, new Error('plain')).retryable).toBe(true);
    expect(new ExecutionIncompleteError('r', [], [], report, new RetryableNodeError('x')).retryable).toBe(
      true,
    );
  });

  test('messages name the problem', () => {
    expect(new dag.CycleError(['a', 'b', 'a']).message).toContain('a -> b -> a');
    expect(new dag.UnknownPredecessorError('child', 'ghost').message).toContain("'ghost'");
    const inc = new ExecutionIncompleteError('r1', ['x', 'y'], [], report, new Error('boom'));
    expect(inc.message).toContain('x, y');
    expect(inc.message).toContain('boom');
    expect(inc.cause).toBeInstanceOf(Error);
  });

  test('toJSON and serializeError give JSON-safe views', () => {
    const err = new NodeFailedError('a', 2, new Error('boom'));
    expect(JSON.parse(JSON.stringify(err))).toEqual({
      name: 'NodeFailedError',
      code: 'MOCRA_ERR_DAG_NODE_FAILED',
      message: err.message,
      retryable: false,
      cause: 'boom',
    });
    expect(serializeError(new RetryableNodeError('x'))).toEqual({
      name: 'RetryableNodeError',
      code: 'MOCRA_ERR_DAG_NODE_RETRYABLE',
      message: 'x',
      retryable: true,
    });
    expect(serializeError('just a string')).toEqual({
      name: 'Error',
      message: 'just a string',
      retryable: false,
    });
  });

  test('retryableOf reads a boolean retryable flag from anything', () => {
    expect(retryableOf(new RetryableNodeError('x'))).toBe(true);
    expect(retryableOf(Object.assign(new Error('x'), { retryable: false }))).toBe(false);
    expect(retryableOf(new Error('x'))).toBeUndefined();
    expect(retryableOf('x')).toBeUndefined();
    expect(retryableOf(null)).toBeUndefined();
  });

  test('isDagError recognises copies from another package instance by shape', () => {
    const foreign = Object.assign(new Error('x'), { code: 'MOCRA_ERR_DAG_CYCLE' });
    expect(isDagError(foreign)).toBe(true);
    expect(isDagError(Object.assign(new Error('x'), { code: 'MOCRA_ERR_INTERNAL' }))).toBe(false);
    expect(isDagError('MOCRA_ERR_DAG_CYCLE')).toBe(false);
  });

  test('RetryableNodeError carries an optional delay', () => {
    expect(new RetryableNodeError('x', { delayMs: 250 }).delayMs).toBe(250);
    expect(new RetryableNodeError('x').delayMs).toBeUndefined();
  });
});

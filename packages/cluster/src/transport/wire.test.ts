import { describe, expect, test } from 'vitest';
import { parseNodeRequest, parseRaftMessage, parseRaftMessages } from './wire.js';

const envelope = { from: 'a', to: 'b', term: 3 };

describe('wire parsing (untrusted input from peers)', () => {
  test('well-formed messages pass through', () => {
    const append = {
      type: 'append',
      ...envelope,
      prevIndex: 4,
      prevTerm: 2,
      commit: 4,
      entries: [{ index: 5, term: 3, kind: 'command', data: '{}' }],
    };
    expect(parseRaftMessage(append)).toEqual(append);
    expect(parseRaftMessage({ type: 'read-index-resp', ...envelope, ctx: 'x', index: -1 })).toMatchObject({
      index: -1,
    });
    const snap = {
      type: 'snapshot',
      ...envelope,
      snapshot: {
        meta: {
          index: 9,
          term: 3,
          config: { members: [{ id: 'a', addr: 'h:1', voter: true }], retired: [] },
        },
        data: 'S',
      },
    };
    expect(parseRaftMessage(snap)).toEqual(snap);
  });

  test.each([
    ['not an object', 5],
    ['unknown type', { type: 'gossip', ...envelope }],
    ['missing term', { type: 'heartbeat', from: 'a', to: 'b', commit: 1, round: 0 }],
    ['negative number', { type: 'heartbeat', ...envelope, commit: -1, round: 0 }],
    [
      'fractional index',
      { type: 'append-resp', ...envelope, reject: false, index: 1.5, hintIndex: 0, hintTerm: 0 },
    ],
    [
      'entries not an array',
      { type: 'append', ...envelope, prevIndex: 0, prevTerm: 0, commit: 0, entries: 'x' },
    ],
    [
      'bad entry kind',
      {
        type: 'append',
        ...envelope,
        prevIndex: 0,
        prevTerm: 0,
        commit: 0,
        entries: [{ index: 1, term: 1, kind: 'evil', data: '' }],
      },
    ],
    ['vote without flags', { type: 'vote', ...envelope, lastIndex: 1, lastTerm: 1 }],
    ['snapshot without meta', { type: 'snapshot', ...envelope, snapshot: { data: 'x' } }],
    ['read index below -1', { type: 'read-index-resp', ...envelope, ctx: 'c', index: -2 }],
  ])('%s is refused with MOCRA_ERR_CLUSTER_INVALID_MESSAGE', (_name, value) => {
    expect(() => parseRaftMessage(value)).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' }),
    );
  });

  test('batches and node requests', () => {
    expect(() => parseRaftMessages({})).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' }),
    );
    expect(parseNodeRequest({ kind: 'join', id: 'n2', addr: 'h:2' })).toEqual({
      kind: 'join',
      id: 'n2',
      addr: 'h:2',
    });
    expect(parseNodeRequest({ kind: 'transfer', to: null })).toEqual({ kind: 'transfer', to: null });
    expect(parseNodeRequest({ kind: 'app', topic: 'mocra.forward', body: { a: 1 } })).toEqual({
      kind: 'app',
      topic: 'mocra.forward',
      body: { a: 1 },
    });
    expect(() => parseNodeRequest({ kind: 'app', topic: 'no spaces' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' }),
    );
    expect(() => parseNodeRequest({ kind: 'explode' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' }),
    );
    expect(() => parseNodeRequest({ kind: 'propose' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' }),
    );
  });
});

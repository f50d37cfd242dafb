import { describe, expect, test } from 'vitest';
import { RaftLog } from './raft-log.js';
import type { LogEntry } from './types.js';

const e = (index: number, term: number, data = ''): LogEntry => ({ index, term, kind: 'command', data });

describe('RaftLog', () => {
  test('matching appends keep what is there; a conflict truncates and replaces', () => {
    const log = new RaftLog(0, 0, [e(1, 1), e(2, 1), e(3, 1)], 1);
    expect(log.maybeAppend(1, 1, [e(2, 1)])).toBe(2); // a stale prefix: nothing changes
    expect(log.lastIndex()).toBe(3);
    expect(log.maybeAppend(1, 1, [e(2, 1), e(3, 2, 'new'), e(4, 2)])).toBe(4);
    expect(log.entry(3)).toEqual(e(3, 2, 'new'));
    expect(log.maybeAppend(4, 9, [])).toBeUndefined(); // prev does not match
  });

  test('committed entries can never be truncated', () => {
    const log = new RaftLog(0, 0, [e(1, 1), e(2, 1)], 2);
    expect(() => log.maybeAppend(1, 1, [e(2, 5)])).toThrow(/committed/);
    expect(() => log.truncateFrom(2)).toThrow();
  });

  test('stable index follows writes and ignores a write overtaken by a truncation', () => {
    const log = new RaftLog(0, 0, [e(1, 1)], 1);
    log.append([e(2, 1), e(3, 1)]);
    expect(log.unstableEntries().map((x) => x.index)).toEqual([2, 3]);
    log.markInProgress(3);
    expect(log.unstableEntries()).toEqual([]);
    log.maybeAppend(1, 1, [e(2, 2)]); // conflict at 2 while 2..3 are being written
    expect(log.unstableEntries().map((x) => x.index)).toEqual([2]);
    expect(log.stableTo(3, 1)).toBe(false); // the old write landed, but entry 3 is gone
    expect(log.stableTo(2, 1)).toBe(false); // and 2 is now of term 2
    expect(log.stableTo(2, 2)).toBe(true);
  });

  test('compaction, snapshot restore and term lookups at the base', () => {
    const log = new RaftLog(0, 0, [e(1, 1), e(2, 1), e(3, 2)], 3);
    log.appliedTo(3);
    log.compact(2);
    expect(log.firstIndex()).toBe(3);
    expect(log.term(2)).toBe(1);
    expect(log.term(1)).toBeUndefined();
    expect(() => log.slice(2, 4)).toThrow();
    log.restore(10, 4);
    expect([log.lastIndex(), log.lastTerm(), log.committed, log.applied]).toEqual([10, 4, 10, 10]);
  });

  test('findConflictByTerm skips a whole term', () => {
    const log = new RaftLog(0, 0, [e(1, 1), e(2, 1), e(3, 3), e(4, 3), e(5, 3)], 1);
    expect(log.findConflictByTerm(5, 2)).toBe(2);
    expect(log.findConflictByTerm(5, 3)).toBe(5);
  });

  test('isUpToDate compares last term, then last index (§5.4.1)', () => {
    const log = new RaftLog(0, 0, [e(1, 1), e(2, 2)], 0);
    expect(log.isUpToDate(1, 3)).toBe(true);
    expect(log.isUpToDate(2, 2)).toBe(true);
    expect(log.isUpToDate(5, 1)).toBe(false);
  });
});

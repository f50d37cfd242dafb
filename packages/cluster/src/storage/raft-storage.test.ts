import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { Prng } from '../../test/sim/prng.js';
import { SimDisk } from '../../test/sim/sim-disk.js';
import { SimWorld } from '../../test/sim/sim-world.js';
import type { LogEntry, Snapshot } from '../raft/types.js';
import { LevelKvEngine } from './level-engine.js';
import { indexKey, RaftStorage } from './raft-storage.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function levelDir(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'mocra-raft-storage-'));
  dirs.push(d);
  return d;
}

const entry = (index: number, term: number, data = `cmd-${index}`): LogEntry => ({
  index,
  term,
  kind: 'command',
  data,
});
const boot: LogEntry = { index: 1, term: 1, kind: 'config', data: '{"members":[],"retired":[]}' };

async function reopen(dir: string, id = 'n1') {
  const engine = await LevelKvEngine.open(dir);
  return RaftStorage.open(engine, id);
}

describe('RaftStorage on LevelDB', () => {
  test('a new log gets the bootstrap entry; a restart recovers exactly what was saved', async () => {
    const dir = await levelDir();
    const { storage, state } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    expect(state.fresh).toBe(true);
    expect(state.entries).toEqual([boot]);
    await storage.save({
      hardState: { term: 3, vote: 'n2', commit: 2 },
      snapshot: undefined,
      entries: [entry(2, 3), entry(3, 3)],
    });
    await storage.close();
    const again = await reopen(dir);
    expect(again.state.fresh).toBe(false);
    expect(again.state.hardState).toEqual({ term: 3, vote: 'n2', commit: 2 });
    expect(again.state.entries).toEqual([boot, entry(2, 3), entry(3, 3)]);
    await again.storage.close();
  });

  test('entries that overwrite from an earlier index drop the old tail', async () => {
    const dir = await levelDir();
    const { storage } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    await storage.save({
      hardState: { term: 2, vote: null, commit: 1 },
      snapshot: undefined,
      entries: [2, 3, 4, 5].map((i) => entry(i, 2)),
    });
    await storage.save({
      hardState: { term: 3, vote: null, commit: 1 },
      snapshot: undefined,
      entries: [entry(3, 3, 'new-3'), entry(4, 3, 'new-4')],
    });
    await storage.close();
    const again = await reopen(dir);
    expect(again.state.entries.map((e) => [e.index, e.term, e.data])).toEqual([
      [1, 1, boot.data],
      [2, 2, 'cmd-2'],
      [3, 3, 'new-3'],
      [4, 3, 'new-4'],
    ]);
    await again.storage.close();
  });

  test('a received snapshot replaces the log; a local snapshot compacts it', async () => {
    const dir = await levelDir();
    const { storage } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    await storage.save({
      hardState: { term: 2, vote: null, commit: 3 },
      snapshot: undefined,
      entries: [entry(2, 2), entry(3, 2)],
    });
    const snap: Snapshot = {
      meta: {
        index: 10,
        term: 4,
        config: { members: [{ id: 'n1', addr: 'h:1', voter: true }], retired: [] },
      },
      data: 'S10',
    };
    await storage.save({
      hardState: { term: 4, vote: null, commit: 10 },
      snapshot: snap,
      entries: [entry(11, 4)],
    });
    await storage.saveSnapshot({ meta: { ...snap.meta, index: 11 }, data: 'S11' });
    await storage.save({ hardState: undefined, snapshot: undefined, entries: [entry(12, 4)] });
    await storage.close();
    const again = await reopen(dir);
    expect(again.state.snapshot).toEqual({ meta: { ...snap.meta, index: 11 }, data: 'S11' });
    expect(again.state.entries).toEqual([entry(12, 4)]);
    expect(again.state.repaired).toEqual({ tornEntries: 0, strayKeys: 0 });
    await again.storage.close();
  });

  test('a data directory of another node is refused', async () => {
    const dir = await levelDir();
    const { storage } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    await storage.close();
    const engine = await LevelKvEngine.open(dir);
    await expect(RaftStorage.open(engine, 'n2')).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_IDENTITY_MISMATCH',
    });
    await engine.close();
  });

  test('a flipped byte in an entry fails its checksum on open', async () => {
    const dir = await levelDir();
    const { storage } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    await storage.save({
      hardState: { term: 2, vote: null, commit: 1 },
      snapshot: undefined,
      entries: [entry(2, 2, 'payload')],
    });
    await storage.close();
    const engine = await LevelKvEngine.open(dir);
    const raw = (await engine.get(indexKey('e:', 2)))!;
    await engine.write([{ type: 'put', key: indexKey('e:', 2), value: raw.replace('payload', 'paYload') }], {
      sync: true,
    });
    await expect(RaftStorage.open(engine, 'n1')).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_STORAGE_CORRUPT',
    });
    await engine.close();
  });

  test('a missing entry in the middle of the log is reported, not papered over', async () => {
    const dir = await levelDir();
    const { storage } = await RaftStorage.open(await LevelKvEngine.open(dir), 'n1', boot);
    await storage.save({
      hardState: { term: 2, vote: null, commit: 1 },
      snapshot: undefined,
      entries: [2, 3, 4].map((i) => entry(i, 2)),
    });
    await storage.close();
    const engine = await LevelKvEngine.open(dir);
    await engine.write([{ type: 'del', key: indexKey('e:', 3) }], { sync: true });
    await expect(RaftStorage.open(engine, 'n1')).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_STORAGE_CORRUPT',
    });
    await engine.close();
  });
});

describe('RaftStorage: torn last batch (model disk)', () => {
  /**
   * Write `setup` durably on a model disk, start `torn` (never acknowledged), crash so that only
   * its first `tearAfterOps` operations land, and reopen from what survived.
   */
  async function tornRun(
    setup: (s: RaftStorage) => Promise<void>,
    torn: (s: RaftStorage) => Promise<void>,
    tearAfterOps: number,
  ) {
    const world = new SimWorld();
    const disk = new SimDisk();
    const prng = new Prng(7);
    const faults = { fsyncMs: [5, 5] as const, keepInFlight: 0, tear: 0 };
    const drive = async <T>(w: SimWorld, p: Promise<T>): Promise<T> => {
      let out: { v: T } | undefined;
      let err: unknown;
      p.then(
        (v) => {
          out = { v };
        },
        (e: unknown) => {
          err = e;
        },
      );
      for (let i = 0; i < 1000 && !out && err === undefined; i++) {
        w.step();
        await new Promise((r) => setImmediate(r));
      }
      if (err !== undefined) throw err;
      if (!out) throw new Error('did not finish');
      return out.v;
    };
    const { storage } = await drive(
      world,
      RaftStorage.open(disk.engine(world, 'a', prng, faults), 'n1', boot),
    );
    await drive(world, setup(storage));
    void torn(storage);
    // Replace the crash model's random choices with an exact tear point.
    const exactTear = { chance: (p: number) => p >= 1, int: () => tearAfterOps } as unknown as Prng;
    disk.crash(exactTear, { ...faults, keepInFlight: 0, tear: 1 });
    const world2 = new SimWorld();
    return drive(world2, RaftStorage.open(disk.engine(world2, 'b', prng, faults), 'n1'));
  }

  const hs = (term: number, commit: number) => ({ term, vote: null, commit });
  const shape = (entries: LogEntry[]): Array<[number, number]> => entries.map((e) => [e.index, e.term]);

  test.each([1, 2, 3])('an overwriting batch torn after %i puts rolls back to the last marker', async (n) => {
    const { state } = await tornRun(
      (s) => s.save({ hardState: hs(2, 2), snapshot: undefined, entries: [2, 3].map((i) => entry(i, 2)) }),
      (s) =>
        s.save({
          hardState: hs(3, 2),
          snapshot: undefined,
          entries: [3, 4, 5].map((i) => entry(i, 3, `x${i}`)),
        }),
      n,
    );
    expect(state.repaired.tornEntries).toBeGreaterThan(0);
    // The torn batch touched entry 3 first, so the surviving log is the prefix before it.
    expect(shape(state.entries)).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(state.hardState.term).toBe(2);
  });

  test('every tear point of an appending, truncating or snapshot-installing batch recovers a valid log', async () => {
    const before = [2, 3, 4, 5, 6, 7, 8].map((i) => entry(i, 2));
    const setup = (s: RaftStorage) => s.save({ hardState: hs(2, 4), snapshot: undefined, entries: before });
    const oldLog = shape([boot, ...before]);
    const snap: Snapshot = { meta: { index: 12, term: 4, config: { members: [], retired: [] } }, data: 'S' };
    const cases: Array<[string, (s: RaftStorage) => Promise<void>, Array<Array<[number, number]>>]> = [
      [
        'append',
        (s) => s.save({ hardState: hs(2, 4), snapshot: undefined, entries: [9, 10].map((i) => entry(i, 2)) }),
        [oldLog, [...oldLog, [9, 2], [10, 2]]],
      ],
      [
        'truncate',
        (s) => s.save({ hardState: hs(3, 4), snapshot: undefined, entries: [entry(6, 3, 'n6')] }),
        [oldLog, oldLog.slice(0, 5), [...oldLog.slice(0, 5), [6, 3]]],
      ],
      [
        'snapshot',
        (s) => s.save({ hardState: hs(4, 12), snapshot: snap, entries: [entry(13, 4)] }),
        [oldLog, [[13, 4]]],
      ],
    ];
    for (const [name, torn, allowed] of cases) {
      for (let k = 1; k <= 16; k++) {
        const { state } = await tornRun(setup, torn, k);
        const got = shape(state.entries);
        const ok = allowed.some((a) => JSON.stringify(a) === JSON.stringify(got));
        expect(ok, `${name} torn after ${k} ops recovered ${JSON.stringify(got)}`).toBe(true);
      }
    }
  });
});

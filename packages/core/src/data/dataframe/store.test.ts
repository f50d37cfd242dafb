import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { requireOptional } from '../../optional-dependency.js';
import { loadPolars } from './polars.js';
import { DataFrameStore, readDataFrame } from './store.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-df-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Book {
  id: number;
  title: string;
  price: number;
  inStock: boolean;
  seen: Date;
  tags: string[];
  note?: string | null;
}

const book = (i: number): Book => ({
  id: i,
  title: `Book ${i} “quoted”, with a comma`,
  price: i + 0.25,
  inStock: i % 3 === 0,
  seen: new Date(Date.UTC(2024, 0, 1) + i * 60_000),
  tags: [`t${i % 4}`],
  note: i % 5 === 0 ? null : `n${i}`,
});

describe('DataFrameStore', () => {
  test.each(['parquet', 'arrow'] as const)(
    '%s: batches joined into one file, read back row by row',
    (ext) => {
      const file = path.join(dir, `books.${ext}`);
      const store = new DataFrameStore<Book>({ path: file, batchSize: 10 });
      for (let i = 0; i < 25; i++) store.write(book(i));
      // Two full batches are on disk as parts while the third is still in memory.
      expect(fs.readdirSync(`${file}.parts`)).toHaveLength(2);
      store.close();
      expect(fs.existsSync(`${file}.parts`)).toBe(false);
      const frame = readDataFrame(file);
      expect(frame.height).toBe(25);
      expect(frame.columns).toEqual(['id', 'title', 'price', 'inStock', 'seen', 'tags', 'note']);
      expect(Object.fromEntries(Object.entries(frame.schema).map(([k, v]) => [k, String(v)]))).toMatchObject({
        id: expect.stringContaining('Int64'),
        price: expect.stringContaining('Float64'),
        inStock: expect.stringContaining('Bool'),
        seen: expect.stringContaining('Datetime'),
        tags: expect.stringContaining('String'),
      });
      const rows = frame.toRecords();
      for (let i = 0; i < 25; i++) {
        const b = book(i);
        expect(rows[i]).toEqual({ ...b, tags: JSON.stringify(b.tags), note: b.note ?? null });
      }
    },
  );

  test.each(['csv', 'ndjson'] as const)('%s: appended per batch, header once', (ext) => {
    const file = path.join(dir, `books.${ext}`);
    const store = new DataFrameStore<Book>({ path: file, batchSize: 4 });
    for (let i = 0; i < 10; i++) store.write(book(i));
    store.close();
    const text = fs.readFileSync(file, 'utf8');
    if (ext === 'csv') expect(text.split('\n').filter((l) => l.startsWith('id,'))).toHaveLength(1);
    const frame = readDataFrame(file);
    expect(frame.height).toBe(10);
    expect(frame.getColumn('id').toArray()).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(frame.getColumn('title').toArray()[3]).toBe(book(3).title);
  });

  test('a later item that does not fit the inferred schema: typed error naming column and row', () => {
    const store = new DataFrameStore({ path: path.join(dir, 'bad.parquet'), batchSize: 5 });
    for (let i = 0; i < 7; i++) store.write({ id: i, name: `n${i}` });
    expect(() => store.write({ id: 'eight', name: 'n8' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_DATAFRAME_SCHEMA', column: 'id', row: 7 }),
    );
    expect(() => store.write({ id: 8, name: 'n8', extra: true })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_DATAFRAME_SCHEMA', column: 'extra' }),
    );
    store.write({ id: 9, name: 'n9' });
    store.close();
    expect(readDataFrame(path.join(dir, 'bad.parquet')).getColumn('id').toArray()).toEqual([
      0, 1, 2, 3, 4, 5, 6, 9,
    ]);
  });

  test('mixed types inside the first batch are refused; a given schema decides', () => {
    const inferred = new DataFrameStore({ path: path.join(dir, 'mixed.parquet'), batchSize: 5 });
    inferred.write({ v: 1 });
    inferred.write({ v: 'x' });
    expect(() => inferred.flush()).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_DATAFRAME_SCHEMA', column: 'v', row: 1 }),
    );

    const file = path.join(dir, 'given.parquet');
    const given = new DataFrameStore({
      path: file,
      schema: { v: 'float64', label: { type: 'string', nullable: false }, extra: 'json' },
      extraFields: 'drop',
    });
    given.write({ v: 1, label: 'a', ignored: 1 });
    given.write({ v: 2.5, label: 'b', extra: { a: [1] } });
    expect(() => given.write({ v: 3 })).toThrow(expect.objectContaining({ column: 'label' }));
    given.close();
    expect(readDataFrame(file).toRecords()).toEqual([
      { v: 1, label: 'a', extra: null },
      { v: 2.5, label: 'b', extra: '{"a":[1]}' },
    ]);
  });

  test('append adopts the earlier output and the parts a killed run left', () => {
    const file = path.join(dir, 'resume.parquet');
    const first = new DataFrameStore({ path: file, batchSize: 3 });
    for (let i = 0; i < 4; i++) first.write({ url: `u${i}` });
    first.close();
    // A second run is "killed" without a journal: its first batch reached a part (written when
    // the fourth item arrived), the three items after it were only in memory.
    const killed = new DataFrameStore({ path: file, batchSize: 3, append: true });
    for (let i = 4; i < 10; i++) killed.write({ url: `u${i}` });
    expect(fs.existsSync(file)).toBe(false);
    const third = new DataFrameStore({ path: file, batchSize: 3, append: true });
    expect(third.adoptedRows).toBe(7);
    expect(third.adoptedColumn('url')).toEqual(Array.from({ length: 7 }, (_, i) => `u${i}`));
    third.write({ url: 'u10' });
    third.close();
    expect(readDataFrame(file).getColumn('url').toArray()).toEqual([
      ...Array.from({ length: 7 }, (_, i) => `u${i}`),
      'u10',
    ]);
  });

  test("trustedRows: journal lines past the caller's ledger are dropped", () => {
    const file = path.join(dir, 'trusted.parquet');
    const killed = new DataFrameStore({ path: file, batchSize: 3, journal: true });
    for (let i = 0; i < 5; i++) killed.write({ n: i });
    const resumed = new DataFrameStore({
      path: file,
      batchSize: 3,
      journal: true,
      append: true,
      trustedRows: 4,
    });
    expect(resumed.adoptedColumn('n')).toEqual([0, 1, 2, 3]);
    resumed.close();
    expect(() => new DataFrameStore({ path: file, append: true, trustedRows: 2 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_DATAFRAME_WRITE' }),
    );
  });

  test('no items: an empty file with the schema', () => {
    const file = path.join(dir, 'empty.parquet');
    new DataFrameStore({ path: file, schema: { a: 'int64' } }).close();
    const frame = readDataFrame(file);
    expect(frame.height).toBe(0);
    expect(frame.columns).toEqual(['a']);
  });

  test('bad options and a missing optional package are typed errors', () => {
    expect(() => new DataFrameStore({ path: path.join(dir, 'x.txt') })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => requireOptional('nodejs-polars-not-installed', 'DataFrames')).toThrow(
      expect.objectContaining({
        code: 'MOCRA_ERR_MISSING_DEPENDENCY',
        packageName: 'nodejs-polars-not-installed',
      }),
    );
    expect(loadPolars().DataFrame).toBeTypeOf('function');
  });
});

describe('journal', () => {
  test('a store killed mid-batch loses nothing it wrote: append replays the journal', () => {
    const file = path.join(dir, 'journal.parquet');
    const killed = new DataFrameStore({ path: file, batchSize: 4, journal: true });
    for (let i = 0; i < 10; i++) killed.write({ id: i, at: new Date(Date.UTC(2024, 0, 1 + i)) });
    // Two batches are in parts, two items only in the journal; a half-written line follows.
    fs.appendFileSync(path.join(`${file}.parts`, 'journal.ndjson'), '{"i":10,"r":{"id"');
    const resumed = new DataFrameStore({ path: file, batchSize: 4, journal: true, append: true });
    expect(resumed.adoptedRows).toBe(10);
    expect(resumed.adoptedColumn('id')).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Killed again before the replayed items reached a part: still nothing lost.
    resumed.write({ id: 10, at: new Date(Date.UTC(2024, 0, 11)) });
    const again = new DataFrameStore({ path: file, batchSize: 4, journal: true, append: true });
    expect(again.adoptedRows).toBe(11);
    for (let i = 11; i < 14; i++) again.write({ id: i, at: new Date(Date.UTC(2024, 0, 1 + i)) });
    again.close();
    const rows = readDataFrame(file).toRecords();
    expect(rows).toEqual(
      Array.from({ length: 14 }, (_, i) => ({ id: i, at: new Date(Date.UTC(2024, 0, 1 + i)) })),
    );
  });
});

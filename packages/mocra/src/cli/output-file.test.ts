// The CLI's output file and its resume ledger, with each kill point of a crash reproduced by
// hand: the line written but not its ledger entry, the entry cut short, both written. The
// journeys (packages/tests/test/journeys/resume.test.ts) kill the real bin at random points.
import { appendFileSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ledgerPathOf, OutputFile } from './output-file.js';

const root = mkdtempSync(path.join(tmpdir(), 'mocra-output-file-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
function paths(ext: string) {
  n++;
  const out = path.join(root, `out-${n}.${ext}`);
  const persist = path.join(root, `persist-${n}`);
  return { out, persist, ledger: ledgerPathOf(persist, out) };
}

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');

describe('resuming with a persist directory', () => {
  test('a line written without its ledger entry (killed between the two) is cut off and written once again', () => {
    const { out, persist } = paths('jsonl');
    const first = new OutputFile(out, { persist });
    expect(first.write('a', { v: 'a' })).toBe(true);
    expect(first.write('b', { v: 'b' })).toBe(true);
    first.close();
    appendFileSync(out, '{"v":"c"}\n'); // the line of a page the kill left unacknowledged

    const resumed = new OutputFile(out, { persist });
    expect(resumed.resumed).toBe(2);
    expect(lines(out)).toEqual(['{"v":"a"}', '{"v":"b"}']);
    expect(resumed.write('c', { v: 'c' })).toBe(true); // the page is parsed again
    resumed.close();
    expect(lines(out)).toEqual(['{"v":"a"}', '{"v":"b"}', '{"v":"c"}']);
  });

  test('a line whose entry was written (killed before the page was acknowledged) is not written again', () => {
    const { out, persist } = paths('jsonl');
    const first = new OutputFile(out, { persist });
    first.write('a', { v: 'a' });
    first.close();
    const resumed = new OutputFile(out, { persist });
    expect(resumed.write('a', { v: 'a' })).toBe(false);
    expect(resumed.write('b', { v: 'b' })).toBe(true);
    resumed.close();
    expect(lines(out)).toEqual(['{"v":"a"}', '{"v":"b"}']);
    expect(resumed.written).toBe(1);
  });

  test('an entry cut short by a kill is ignored, and so is the line it was for', () => {
    const { out, persist, ledger } = paths('jsonl');
    const first = new OutputFile(out, { persist });
    first.write('a', { v: 'a' });
    first.write('b', { v: 'b' });
    first.close();
    const text = readFileSync(ledger, 'utf8');
    truncateSync(ledger, text.length - 6); // the last entry, cut mid-way

    const resumed = new OutputFile(out, { persist });
    expect(lines(out)).toEqual(['{"v":"a"}']);
    expect(resumed.write('b', { v: 'b' })).toBe(true);
    resumed.write('c', { v: 'c' });
    resumed.close();
    expect(lines(out)).toEqual(['{"v":"a"}', '{"v":"b"}', '{"v":"c"}']);
    // The next resume reads the ledger past the cut entry.
    const again = new OutputFile(out, { persist });
    expect(again.resumed).toBe(3);
    again.close();
  });

  test("CSV: the first item's columns and the header survive the resume", () => {
    const { out, persist } = paths('csv');
    const first = new OutputFile(out, { persist });
    first.write('1', { title: 'a, "b"', n: 1 });
    first.close();
    const resumed = new OutputFile(out, { persist });
    resumed.write('2', { n: 2, title: 'c', extra: true });
    resumed.close();
    expect(lines(out)).toEqual(['title,n', '"a, ""b""",1', 'c,2']);
  });

  test('CSV with fixed columns: one header, however often it is resumed', () => {
    const { out, persist } = paths('csv');
    const csv = { fields: ['url', 'status'], header: ['url', 'status_code'] };
    for (const url of ['u1', 'u2', 'u3']) {
      const file = new OutputFile(out, { persist, csv });
      file.write(url, { url, status: 200 });
      file.close();
    }
    expect(lines(out)).toEqual(['url,status_code', 'u1,200', 'u2,200', 'u3,200']);
  });

  test('a file removed or cut shorter than the ledger says refuses the resume (MOCRA_ERR_OUTPUT_RESUME)', () => {
    const { out, persist } = paths('jsonl');
    const first = new OutputFile(out, { persist });
    first.write('a', { v: 'a' });
    first.close();
    truncateSync(out, 3);
    expect(() => new OutputFile(out, { persist })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_OUTPUT_RESUME' }),
    );
    rmSync(out);
    expect(() => new OutputFile(out, { persist })).toThrow(/the file is gone/);
  });

  test('a new persist directory starts a new file, whatever the file held', () => {
    const { out, persist } = paths('jsonl');
    writeFileSync(out, '{"old":true}\n');
    const file = new OutputFile(out, { persist });
    expect(file.resumed).toBe(0);
    file.write('a', { v: 'a' });
    file.close();
    expect(lines(out)).toEqual(['{"v":"a"}']);
  });
});

test('without a persist directory the file is replaced and a key is written once per run', () => {
  const { out } = paths('jsonl');
  writeFileSync(out, '{"old":true}\n');
  const file = new OutputFile(out);
  expect(file.write('a', { v: 1 })).toBe(true);
  expect(file.write('a', { v: 2 })).toBe(false);
  file.close();
  expect(lines(out)).toEqual(['{"v":1}']);
});

describe('lines written in batches', () => {
  test('a batch is in the file and the ledger once flushed() settles, with each line where it ends', async () => {
    const { out, persist } = paths('jsonl');
    const file = new OutputFile(out, { persist });
    // Multi-byte characters: a ledger entry's end is a byte offset, not a string length.
    file.write('a', { v: 'é' });
    file.write('b', { v: '→→' });
    const flushed = file.flushed();
    expect(flushed).toBeInstanceOf(Promise);
    await flushed;
    expect(file.flushed()).toBeUndefined();
    // Killed here: the file is left as it is (no close), and a line of an unacknowledged page after it.
    appendFileSync(out, '{"v":"c"}\n');
    const resumed = new OutputFile(out, { persist });
    expect(resumed.resumed).toBe(2);
    expect(lines(out)).toEqual(['{"v":"é"}', '{"v":"→→"}']);
    resumed.write('c', { v: 'c' });
    resumed.close();
    file.close();
    expect(lines(out)).toEqual(['{"v":"é"}', '{"v":"→→"}', '{"v":"c"}']);
  });

  test('flush() writes the waiting lines at once', () => {
    const { out } = paths('jsonl');
    const file = new OutputFile(out);
    file.write('a', { v: 1 });
    file.write('b', { v: 2 });
    file.flush();
    expect(lines(out)).toEqual(['{"v":1}', '{"v":2}']);
    file.close();
  });

  test('a batch larger than the limit is written without waiting for the turn to end', () => {
    const { out } = paths('jsonl');
    const file = new OutputFile(out);
    const big = 'x'.repeat(700_000);
    file.write('a', { v: big });
    file.write('b', { v: big });
    expect(lines(out)).toHaveLength(2);
    file.close();
  });
});

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { priceTableRows, signedItems, spreadsheetRows } from './index.js';
import { expectedSignature, SIGNED_API_PATH, SIGNER_JS, SIGNER_WASM } from './signing.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

describe('signed API', () => {
  test("the site's own JS + WASM compute the signature the server expects", () => {
    const context = vm.createContext({ bytes: SIGNER_WASM });
    vm.runInContext(
      'var signerWasm = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports;',
      context,
    );
    vm.runInContext(SIGNER_JS, context);
    const sign = vm.runInContext('signRequest', context) as (p: string, t: number) => string;
    for (const [p, t] of [
      ['/data/api/items?page=1', 1_700_000_000],
      ['/x', 0],
    ] as const) {
      expect(sign(p, t)).toBe(expectedSignature(p, t));
    }
  });

  test('a signed request gets its page; a bad or stale signature gets 403', async () => {
    const ts = Math.floor(Date.now() / 1000);
    const path2 = `${SIGNED_API_PATH}?page=2`;
    const ok = await fetch(`${site.url}${path2}&ts=${ts}`, {
      headers: { 'x-signature': expectedSignature(path2, ts) },
    });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { items: unknown[] };
    expect(body.items).toEqual(signedItems().slice(10, 20));
    const bad = await fetch(`${site.url}${path2}&ts=${ts}`, { headers: { 'x-signature': '00000000' } });
    expect(bad.status).toBe(403);
    const stale = await fetch(`${site.url}${path2}&ts=${ts - 3600}`, {
      headers: { 'x-signature': expectedSignature(path2, ts - 3600) },
    });
    expect(stale.status).toBe(403);
  });
});

test('the spreadsheet download is a zip with the workbook parts', async () => {
  const res = await fetch(`${site.url}/data/books.xlsx`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('spreadsheetml');
  const bytes = Buffer.from(await res.arrayBuffer());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fixture-xlsx-'));
  try {
    const file = path.join(dir, 'books.xlsx');
    fs.writeFileSync(file, bytes);
    // Python's zipfile checks every CRC; it is on the machine and shares nothing with the writer.
    const listing = execFileSync(
      'python3',
      [
        '-c',
        'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; print("\\n".join(z.namelist()))',
        file,
      ],
      {
        encoding: 'utf8',
      },
    );
    expect(listing).toContain('xl/worksheets/sheet1.xml');
    expect(listing).toContain('xl/sharedStrings.xml');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  expect(spreadsheetRows()).toHaveLength(50);
});

test('the price table: 100 rows a page, a next link, 404 past the end', async () => {
  const page = await (await fetch(`${site.url}/data/prices?page=2`)).text();
  expect(page.match(/<tr><td>/g)).toHaveLength(100);
  expect(page).toContain('href="/data/prices?page=3"');
  expect((await fetch(`${site.url}/data/prices?page=11`)).status).toBe(404);
  expect(priceTableRows()).toHaveLength(1000);
  expect(priceTableRows()[0]).toMatchObject({ ID: '1', Rating: expect.stringMatching(/^[1-5]\/5$/) });
});

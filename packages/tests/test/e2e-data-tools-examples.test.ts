// examples/table-to-parquet.ts, examples/excel-download.ts and examples/signing-with-site-js.ts
// run as documented against the fixture site: exit 0 and print what the fixture data says.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { catalogBooks, priceTableRows, signedItems, spreadsheetRows } from '@mocra/testkit';
import { toNumeric } from 'mocra';
import { expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');

function runExample(file: string): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', path.join(root, file)],
    {
      cwd: root,
      encoding: 'utf8',
      timeout: 90_000,
      env: { ...process.env, MOCRA_LOG_LEVEL: 'error' },
    },
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

test('examples/table-to-parquet.ts: 1000 rows from 10 pages, read back with their total', () => {
  const { code, stdout, stderr } = runExample('examples/table-to-parquet.ts');
  expect(code, stderr).toBe(0);
  expect(stdout).toContain('1000 rows from 10 pages → prices.parquet\n');
  expect(stdout).toContain('read back: 1000 rows, columns id, title, price, stock, rating\n');
  const total = priceTableRows().reduce((sum, r) => sum + (toNumeric(r.Price) ?? 0), 0);
  expect(stdout).toContain(`total price: ${total.toFixed(2)}\n`);
  const first = catalogBooks()[0]!;
  expect(stdout).toContain(`"title":"${first.title}","price":${first.priceCents / 100}`);
}, 120_000);

test('examples/excel-download.ts: the Books sheet, typed, with its stock value', () => {
  const { code, stdout, stderr } = runExample('examples/excel-download.ts');
  expect(code, stderr).toBe(0);
  expect(stdout).toContain('sheets: Books, About\n');
  expect(stdout).toContain('frame: 50 rows × 7 columns\n');
  const value = spreadsheetRows().reduce((sum, r) => sum + r.Value, 0);
  expect(stdout).toContain(`50 rows, stock value ${value.toFixed(2)}\n`);
}, 120_000);

test("examples/signing-with-site-js.ts: every item of the signed API through the site's own code", () => {
  const { code, stdout, stderr } = runExample('examples/signing-with-site-js.ts');
  expect(code, stderr).toBe(0);
  expect(stdout).toContain(`first: ${JSON.stringify(signedItems()[0])}\n`);
  expect(stdout).toMatch(/30 items from 6 pages, 0 given up\n$/);
}, 120_000);

// The README quick start is the example file, and the example runs as written: it crawls the
// fixture catalog, prints every book and exits 0 on its own.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { catalogBooks } from '@mocra/testkit';
import { expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');
const examplePath = path.join(root, 'examples/spider-quickstart.ts');

test('the README quick start block is exactly examples/spider-quickstart.ts', () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const block = /<!-- quickstart:start -->\n```ts\n([\s\S]*?)```\n<!-- quickstart:end -->/.exec(readme);
  expect(block, 'README.md has no quick start block between the markers').not.toBeNull();
  expect(block![1]).toBe(fs.readFileSync(examplePath, 'utf8'));
});

test('the quick start runs, prints the 40 books and exits 0', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', examplePath], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect(code, stderr).toBe(0);
  const lines = stdout.trimEnd().split('\n');
  const expected = catalogBooks({ catalog: { books: 40 } }).map((b) => `${b.title} — ${b.price}`);
  expect(lines.slice(0, -1).sort()).toEqual(expected.sort());
  expect(lines.at(-1)).toMatch(/^40 books from 42 pages in \d+ ms$/);
  // Quiet by default: nothing on stderr.
  expect(stderr).toBe('');
}, 30_000);

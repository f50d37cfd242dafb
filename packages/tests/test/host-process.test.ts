// mocra leaves the process it runs in alone: no package's code sets a V8 flag, and the built
// `mocra` bin, crawling the fixture site, never calls v8.setFlagsFromString.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { BIN } from './cli-bin.js';

const PACKAGES = path.resolve(import.meta.dirname, '../..');
const PROBE = path.resolve(import.meta.dirname, 'fixtures/v8-flags-probe.cjs');
const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-host-process-'));

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Every file under `dir`, skipping dependencies. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter(
      (e) => e.isFile() && !path.join(e.parentPath, e.name).includes(`${path.sep}node_modules${path.sep}`),
    )
    .map((e) => path.join(e.parentPath, e.name));
}

test("no package's src or dist sets a V8 flag", () => {
  const scanned: string[] = [];
  const offending: string[] = [];
  for (const pkg of readdirSync(PACKAGES)) {
    for (const part of ['src', 'dist']) {
      let found: string[];
      try {
        found = files(path.join(PACKAGES, pkg, part));
      } catch {
        continue; // a package without a build (the private tests package) has no dist
      }
      for (const file of found.filter((f) => /\.(ts|js|mjs|cjs)$/.test(f))) {
        scanned.push(file);
        if (readFileSync(file, 'utf8').includes('setFlagsFromString')) offending.push(file);
      }
    }
  }
  // The scan saw the built bin and the core's sources, so an empty result means something.
  expect(scanned).toContain(BIN);
  expect(scanned).toContain(path.join(PACKAGES, 'core/src/index.ts'));
  expect(offending).toEqual([]);
});

test('the built bin crawls without setting a V8 flag', async () => {
  const out = path.join(tmp, 'pages.jsonl');
  const child = spawn(
    process.execPath,
    [
      '--require',
      PROBE,
      BIN,
      'crawl',
      `${site.url}/graph/200/5/1024/0`,
      '--no-robots',
      '--no-progress',
      '-o',
      out,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, stderr).toBe(0);
  expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(200);
  const set = /V8-FLAGS-SET (.*)/.exec(stderr);
  expect(set, stderr).not.toBeNull();
  expect(JSON.parse(set![1]!)).toEqual([]);
}, 60_000);

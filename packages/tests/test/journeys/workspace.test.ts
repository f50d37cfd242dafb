// Journey: a clone of this repository, used the way README.md says — `pnpm mocra …` and
// `pnpm mocra-fixture-site` at its root, a package's own `pnpm --filter <pkg> test`, and the
// set-up of `npm test` on a machine that lacks the system tools the tests drive.
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, REPO, startCommand, tempDir, waitFor } from './harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('workspace');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const pnpm = (args: string[], timeoutMs = 120_000) =>
  startCommand(['pnpm', ...args], { cwd: REPO, timeoutMs });

describe('from the root of a clone', () => {
  test('pnpm mocra runs the CLI', async () => {
    const version = await pnpm(['mocra', '--version']).done;
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+/m);
    const crawl = await pnpm([
      'mocra',
      'crawl',
      `${site.url}/books/page/1`,
      '--max-pages',
      '2',
      '--no-robots',
      '--no-progress',
    ]).done;
    expect(crawl.code, crawl.stderr).toBe(0);
    const records = crawl.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { status: number });
    expect(records).toHaveLength(2);
  });

  test('pnpm mocra-fixture-site serves the fixture site', async () => {
    const server = pnpm(['mocra-fixture-site', '--port', '0']);
    try {
      const url = /http:\/\/127\.0\.0\.1:\d+/;
      expect(await waitFor(() => url.test(server.stdout()), 30_000, 20), server.stderr()).toBe(true);
      const res = await fetch(`${url.exec(server.stdout())![0]}/books/page/1`);
      expect(res.status).toBe(200);
      expect(await res.text()).toMatch(/product_pod/);
    } finally {
      server.stopAll();
      await server.done;
    }
  });
});

test('a package’s own test script finds its tests (pnpm --filter @mocra/cluster test)', async () => {
  const r = await pnpm(['--filter', '@mocra/cluster', 'test', 'partition.test'], 300_000).done;
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  expect(r.stdout).not.toMatch(/No test files found/);
  expect(r.stdout).toMatch(/Test Files +\d+ passed/);
}, 300_000);

test('npm test’s set-up on a machine without the system tools stops with one line naming the command', async () => {
  // A PATH with node alone: no chromium, promtool, tinyproxy — and no apt-get to install them.
  const bin = path.join(root, 'bin');
  mkdirSync(bin, { recursive: true });
  symlinkSync(process.execPath, path.join(bin, 'node'));
  const r = await startCommand([process.execPath, 'scripts/bootstrap.mjs', '--system-deps', '--no-build'], {
    cwd: REPO,
    env: { PATH: bin },
  }).done;
  expect(r.code).toBe(1);
  const lines = `${r.stdout}${r.stderr}`.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(
    /^system-deps: the tests need chromium .*promtool .*tinyproxy .*; install with: (sudo )?apt-get install -y --no-install-recommends chromium prometheus tinyproxy$/,
  );
});

// Journey: a service node (`mocra run` of a module file, `MOCRA_API__KEEP_ALIVE`, `--dashboard`)
// fed through `/start_work` by a deployment written for Rust mocra — its TaskEvent body
// (`module` a list, `priority` by name, `run_id`) — and by the native body; each runs the module
// against the fixture site and its items reach stdout.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { catalogBook, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, startMocra, tempDir, waitFor } from './harness.js';

const KEY = 'start-work-journey-key';
let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('start-work');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const MODULE = (url: string) => `import { defineModule, Request } from 'mocra';

export default defineModule<{ book: string; run: string; account: string | undefined }>({
  name: 'books',
  nodes: [
    {
      id: 'n',
      generate: (ctx) => [new Request('${url}/api/books/' + (ctx.params.id ?? 1))],
      parse: (res, cx) => cx.emit({ book: res.json<{ title: string }>().title, run: cx.runId, account: cx.account }),
    },
  ],
});
`;

test('the Rust TaskEvent body and the native body both start a run of the module', async () => {
  const dir = path.join(root, 'service');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'books.ts'), MODULE(site.url));
  writeFileSync(path.join(dir, 'mocra.toml'), '[crawler]\nauto_seed = false\n');
  const run = startMocra(
    ['run', 'books.ts', '--config', 'mocra.toml', '--dashboard', '0', '--api-key', KEY, '--no-progress'],
    // Service mode: the node stays up, idle, until work arrives.
    { cwd: dir, env: { MOCRA_API__KEEP_ALIVE: 'true' } },
  );
  try {
    expect(await waitFor(() => /dashboard at http/.test(run.stderr()), 30_000)).toBe(true);
    const base = /dashboard at (http:\/\/127\.0\.0\.1:\d+)/.exec(run.stderr())![1]!;
    const post = async (body: unknown) => {
      const res = await fetch(`${base}/start_work`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as unknown };
    };
    const rust = await post({
      account: 'acme',
      platform: 'fixture',
      module: ['books'],
      priority: 'High',
      run_id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
    });
    expect(rust).toEqual({
      status: 202,
      json: { accepted: true, modules: ['books'], runId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' },
    });
    const native = await post({ module: 'books', account: 'zed', params: { id: 2 }, runId: 'native-run' });
    expect(native).toEqual({ status: 202, json: { accepted: true, module: 'books', runId: 'native-run' } });
    expect((await post({ account: 'a', platform: 'p', module: ['nope'] })).status).toBe(422);

    expect(await waitFor(() => run.stdout().trim().split('\n').length >= 2, 30_000)).toBe(true);
    const items = run
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { book: string; run: string; account: string });
    expect(items.sort((a, b) => a.run.localeCompare(b.run))).toEqual([
      { book: catalogBook(1)?.title, run: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', account: 'acme' },
      { book: catalogBook(2)?.title, run: 'native-run', account: 'zed' },
    ]);
  } finally {
    run.stopAll('SIGTERM');
    await run.done;
  }
});

// Journey: `mocra run` of a module file (`defineModule`) with `--config mocra.toml`; MOCRA_*
// variables read with no config file, by the CLI and by a library user; a misspelt MOCRA_*
// variable warned about with the name it was probably meant to be.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  assertBuilt,
  mocra,
  REPO,
  readJsonl,
  startCommand,
  startMocra,
  tempDir,
  waitFor,
} from './harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('config');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A two-node module: listing pages follow their books to the detail node, which emits them. */
const SHOP_MODULE = (url: string) => `import { defineModule, Request } from 'mocra';

export default defineModule<{ title: string }>({
  name: 'shop',
  nodes: [
    {
      id: 'list',
      generate: () => [new Request('${url}/books/page/1')],
      parse(res, cx) {
        for (const a of res.$('article.product_pod h3 a').toArray()) cx.follow(a.attribs.href!, { node: 'detail' });
      },
    },
    {
      id: 'detail',
      parse: (res, cx) => cx.emit({ title: res.$('h1').text() }),
    },
  ],
});
`;

/** The graph spider of these journeys, in a file of its own: one item per page. */
const GRAPH_SPIDER = `import { defineSpider } from 'mocra';

export default defineSpider<{ url: string }>({
  name: 'graph',
  startUrls: [process.env.JOURNEY_START_URL!],
  parse(res, cx) {
    cx.emit({ url: res.url });
    cx.enqueueLinks();
  },
});
`;

function project(name: string, files: Record<string, string>): string {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(path.join(dir, file), text);
  return dir;
}

describe('mocra run of a module, with --config', () => {
  test('a defineModule export runs; the file’s keys apply (frontier.max_pages)', async () => {
    const dir = project('module', {
      'shop.ts': SHOP_MODULE(site.url),
      'mocra.toml': '[frontier]\nmax_pages = 6\n\n[crawler]\ntask_concurrency = 2\n',
    });
    const r = await mocra(
      ['run', 'shop.ts', '--config', 'mocra.toml', '--out', 'books.jsonl', '--no-progress'],
      {
        cwd: dir,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/module shop finished/);
    // 1 listing page + 5 detail pages: max_pages counts every request admitted.
    expect(readJsonl(path.join(dir, 'books.jsonl'))).toHaveLength(5);
    expect(r.stderr).toMatch(/pages +6 /);
  });

  test('a flag given on the command line wins over the file', async () => {
    const dir = project('module-flag', {
      'shop.ts': SHOP_MODULE(site.url),
      'mocra.toml': '[frontier]\nmax_pages = 6\n',
    });
    const r = await mocra(['run', 'shop.ts', '--config', 'mocra.toml', '--max-pages', '3', '--no-progress'], {
      cwd: dir,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(2);
  });

  test('a broken config file is refused with its error and exit 1', async () => {
    const dir = project('module-bad', {
      'shop.ts': SHOP_MODULE(site.url),
      'mocra.toml': '[frontier]\nmax_pagez = 6\n',
    });
    site.resetStats();
    const r = await mocra(['run', 'shop.ts', '--config', 'mocra.toml', '--no-progress'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      "mocra: invalid config: mocra.toml:2:1 frontier.max_pagez: unknown key (did you mean 'max_pages'?) (MOCRA_ERR_CONFIG_INVALID)",
    );
    expect(site.stats().requests).toBe(0);
  });
});

describe('a config.toml with module keys of Rust mocra', () => {
  test('default_timeout bounds the module; rate_limit is refused naming .politeness()', async () => {
    const dir = project('module-upstream', {
      // A slow route: answered after 3 s, well past the 1 s bound.
      'shop.ts': `import { defineModule, Request } from 'mocra';
export default defineModule<{ status: number }>({
  name: 'shop',
  nodes: [{ id: 'n', generate: () => [new Request('${site.url}/delay/3000')], parse: (res, cx) => cx.emit({ status: res.status }) }],
});
`,
      'mocra.toml': '[retry]\nmax_retries = 0\n\n[modules.shop]\ndefault_timeout = 1\n',
    });
    const timed = await mocra(['run', 'shop.ts', '--config', 'mocra.toml', '--no-progress'], { cwd: dir });
    expect(timed.stderr).toMatch(/MOCRA_ERR_TIMEOUT/);
    expect(timed.stdout).toBe('');

    writeFileSync(path.join(dir, 'mocra.toml'), '[modules.shop]\nrate_limit = 5\n');
    site.resetStats();
    const refused = await mocra(['run', 'shop.ts', '--config', 'mocra.toml', '--no-progress'], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /mocra\.toml:2:1 modules\.shop\.rate_limit: a key of Rust mocra that mocra does not read: request rates are limited per host: `\.politeness\(\{ delayMs: 1000 \/ rate_limit \}\)`/,
    );
    expect(site.stats().requests).toBe(0);
  });
});

describe('MOCRA_* variables without a config file', () => {
  const graph = () => site.graphUrl({ pages: 50, fanout: 3, bytes: 100 }, 0);

  test('mocra run reads them (MOCRA_FRONTIER__MAX_PAGES)', async () => {
    const dir = project('env', { 'graph.ts': GRAPH_SPIDER });
    const r = await mocra(['run', 'graph.ts', '--no-robots', '--no-progress'], {
      cwd: dir,
      env: { JOURNEY_START_URL: graph(), MOCRA_FRONTIER__MAX_PAGES: '4' },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(4);
  });

  test('a misspelt variable is warned about, with the name it was likely meant to be', async () => {
    const dir = project('env-typo', { 'graph.ts': GRAPH_SPIDER });
    const r = await mocra(['run', 'graph.ts', '--no-robots', '--no-progress', '--max-pages', '2'], {
      cwd: dir,
      env: { JOURNEY_START_URL: graph(), MOCRA_FRONTIER_MAX_PAGES: '4' },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      'mocra: warning: MOCRA_FRONTIER_MAX_PAGES is not a mocra variable and is ignored (did you mean MOCRA_FRONTIER__MAX_PAGES?)',
    );
  });

  test('a library user’s builder reads them too, and warns about a misspelt one', async () => {
    const dir = path.join(REPO, 'packages/tests');
    const script = `import { defineSpider, Mocra } from 'mocra';
const spider = defineSpider<{ url: string }>({
  name: 'graph',
  startUrls: [process.env.JOURNEY_START_URL!],
  parse(res, cx) { cx.emit({ url: res.url }); cx.enqueueLinks(); },
});
const summary = await Mocra.builder().spider(spider, () => {}).run();
console.log(JSON.stringify({ pages: summary.pages }));
`;
    const file = path.join(dir, `.journey-env-${process.pid}.ts`);
    writeFileSync(file, script);
    try {
      const r = await startCommand([process.execPath, '--import', 'tsx', file], {
        cwd: dir,
        env: {
          JOURNEY_START_URL: graph(),
          MOCRA_FRONTIER__MAX_PAGES: '3',
          MOCRA_CRAWLER_TASK_CONCURRENCY: '2',
        },
      }).done;
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toEqual({ pages: 3 });
      const warning = r.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string; variable?: string; suggestion?: string })
        .find((rec) => rec.variable === 'MOCRA_CRAWLER_TASK_CONCURRENCY');
      expect(warning).toMatchObject({ level: 40, suggestion: 'MOCRA_CRAWLER__TASK_CONCURRENCY' });
    } finally {
      rmSync(file, { force: true });
    }
  });
});

describe('the [api] table of --config', () => {
  test('reaches the CLI dashboard: the file’s key unlocks the control actions', async () => {
    const dir = project('api-config', { 'mocra.toml': '[api]\napi_key = "key-from-the-file"\n' });
    const run = startMocra(
      [
        'crawl',
        site.graphUrl({ pages: 100_000, fanout: 4, bytes: 512 }),
        '--no-robots',
        '-c',
        '1',
        '--max-pages',
        '2000',
        '--config',
        path.join(dir, 'mocra.toml'),
        '--dashboard',
        '0',
        '--no-progress',
        '--out',
        path.join(dir, 'out.jsonl'),
      ],
      { cwd: dir, timeoutMs: 90_000 },
    );
    try {
      const started = /mocra: dashboard at (http:\/\/127\.0\.0\.1:\d+) \(([^)]*)\)/;
      expect(await waitFor(() => started.test(run.stderr()), 60_000, 50), run.stderr()).toBe(true);
      const [, url, how] = started.exec(run.stderr())!;
      // It says where the key comes from, never the key itself.
      expect(how).toContain('api_key in');
      expect(run.stderr()).not.toContain('key-from-the-file');
      const pause = (key: string) =>
        fetch(`${url}/control/pause`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
      expect((await pause('not-the-key')).status).toBe(401);
      const paused = await pause('key-from-the-file');
      expect(paused.status, await paused.text()).toBeLessThan(300);
    } finally {
      run.stopAll('SIGKILL');
      await run.done;
    }
  }, 120_000);
});

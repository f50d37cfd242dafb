// The module-config keys of Rust mocra in a real crawl of the fixture site: `default_timeout`
// and `enable_proxy` take effect with their meaning there (from config.toml and from a database
// row), and every other runtime key of that project is refused when the config is loaded, with
// what does the job in mocra — never accepted and silently ignored.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigValidationError, type ErrorEvent, REFUSED_UPSTREAM_MODULE_KEYS } from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineModule, defineSpider, Mocra, Request } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { type CountingProxy, startCountingProxy } from './e2e-proxy-servers.js';
import { openTestDatabase, type TestDatabase } from './e2e-store-harness.js';

let site: FixtureSite;
let dir: string;
let proxy: CountingProxy;
beforeAll(async () => {
  site = await startFixtureSite();
  proxy = await startCountingProxy('127.0.0.1');
  dir = await mkdtemp(join(tmpdir(), 'mocra-upstream-keys-'));
});
afterAll(async () => {
  await proxy?.close();
  await site?.close();
  await rm(dir, { recursive: true, force: true });
});

let fileCount = 0;
async function toml(lines: readonly string[]): Promise<string> {
  const file = join(dir, `config-${++fileCount}.toml`);
  await writeFile(file, `${lines.join('\n')}\n`);
  return file;
}

/** One request to `path`; what came of it: items (the status) and the codes of errors. */
async function crawlOnce(name: string, path: string, file: string) {
  const items: number[] = [];
  const errors: ErrorEvent[] = [];
  const summary = await Mocra.builder()
    .fromToml(file, { watch: false })
    .spider(
      defineSpider<number>({
        name,
        startUrls: [`${site.url}${path}`],
        parse: (res, cx) => cx.emit(res.status),
      }),
      (status) => void items.push(status),
    )
    .onError((e) => void errors.push(e))
    .handleSignals(false)
    .run();
  return { items, codes: errors.map((e) => e.code), summary };
}

describe('keys that take effect', () => {
  test('default_timeout (seconds) bounds a slow route; the same route without it is fetched', async () => {
    const bounded = await toml(['[retry]', 'max_retries = 0', '[modules.slow]', 'default_timeout = 1']);
    const slow = await crawlOnce('slow', '/delay/3000', bounded);
    expect(slow.items).toEqual([]);
    expect(slow.codes).toEqual(['MOCRA_ERR_TIMEOUT']);

    const unbounded = await toml(['[retry]', 'max_retries = 0']);
    const control = await crawlOnce('slow', '/delay/3000', unbounded);
    expect(control.items).toEqual([200]);
    expect(control.codes).toEqual([]);
  });

  test('timeout_ms in a higher layer wins over default_timeout in a lower one, and the reverse', async () => {
    const file = await toml([
      '[retry]',
      'max_retries = 0',
      '[module_defaults]',
      'default_timeout = 1',
      '[modules.native-wins]',
      'timeout_ms = 60000',
      '[platforms.default]',
      'timeout_ms = 60000',
      '[modules.upstream-wins]',
      'default_timeout = 1',
    ]);
    expect((await crawlOnce('native-wins', '/delay/2000', file)).items).toEqual([200]);
    expect((await crawlOnce('upstream-wins', '/delay/3000', file)).codes).toEqual(['MOCRA_ERR_TIMEOUT']);
  });

  test('enable_proxy = false keeps a module off the [proxy] pool, true sends it through', async () => {
    const file = await toml([
      '[proxy]',
      `proxies = ["${proxy.url}"]`,
      '[modules.direct]',
      'enable_proxy = false',
      '[modules.proxied]',
      'enable_proxy = true',
    ]);
    proxy.counts.connects = 0;
    proxy.counts.requests = 0;
    expect((await crawlOnce('direct', '/quotes/page/1', file)).items).toEqual([200]);
    expect(proxy.counts).toEqual({ connects: 0, requests: 0 });
    expect((await crawlOnce('proxied', '/quotes/page/2', file)).items).toEqual([200]);
    expect(proxy.counts.connects + proxy.counts.requests).toBe(1);
  });

  test('one layer with both names of a key is refused', async () => {
    const file = await toml(['[modules.both]', 'timeout_ms = 1000', 'default_timeout = 1']);
    expect(() =>
      Mocra.builder()
        .fromToml(file, { watch: false })
        .spider(defineSpider({ name: 'both', startUrls: [site.url], parse() {} }), () => {})
        .build(),
    ).toThrow(
      /modules\.both\.default_timeout: set either 'timeout_ms' or its Rust mocra name 'default_timeout'/,
    );
  });
});

describe('keys that are refused at load', () => {
  test('each refused key in config.toml is an error at its line, naming what mocra does instead', async () => {
    const names = Object.keys(REFUSED_UPSTREAM_MODULE_KEYS);
    expect([...names].sort()).toEqual(
      [
        'cache_ttl',
        'enable_locker',
        'enable_rate_limit',
        'limit_id',
        'module_locker',
        'module_locker_ttl',
        'rate_limit',
        'wss_timeout',
      ].sort(),
    );
    const values: Record<string, string> = {
      cache_ttl: '60',
      enable_locker: 'true',
      enable_rate_limit: 'true',
      limit_id: '"shop"',
      module_locker: 'true',
      module_locker_ttl: '30',
      rate_limit: '5',
      wss_timeout: '30',
    };
    const file = await toml(['[modules.legacy]', ...names.map((n) => `${n} = ${values[n]}`)]);
    site.resetStats();
    let error: unknown;
    try {
      Mocra.builder()
        .fromToml(file, { watch: false })
        .spider(defineSpider({ name: 'legacy', startUrls: [site.url], parse() {} }), () => {})
        .build();
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigValidationError);
    const issues = (error as ConfigValidationError).issues;
    expect(issues.map((i) => i.key)).toEqual(names.map((n) => `modules.legacy.${n}`));
    expect(issues.map((i) => i.source)).toEqual(
      names.map((_, i) => ({ kind: 'file', file, line: i + 2, column: 1 })),
    );
    for (const [i, issue] of issues.entries()) {
      expect(issue.message).toBe(
        `a key of Rust mocra that mocra does not read: ${REFUSED_UPSTREAM_MODULE_KEYS[names[i]!]}`,
      );
    }
    expect(issues.find((i) => i.key.endsWith('.rate_limit'))!.message).toMatch(/\.politeness\(\{ delayMs/);
    expect(site.stats().requests).toBe(0);
  });

  test('in code too: a module config that sets one fails the build', () => {
    expect(() =>
      Mocra.builder()
        .module(
          defineModule({ name: 'coded', config: { wss_timeout: 30 }, nodes: [{ id: 'n', parse() {} }] }),
          () => {},
        )
        .build(),
    ).toThrow(/wss_timeout: a key of Rust mocra that mocra does not read: .*idleTimeoutMs/);
  });
});

describe('from the database', () => {
  let db: TestDatabase | undefined;
  afterEach(async () => {
    await db?.cleanup();
    db = undefined;
  });

  test("a module row's default_timeout bounds its requests; a row with rate_limit fails its task with the reason", async () => {
    db = await openTestDatabase('sqlite');
    await db.store.seed({
      accounts: [{ name: 'acme' }],
      platforms: [{ name: 'fixture' }],
      modules: [
        { name: 'timed', config: { default_timeout: 1 } },
        { name: 'limited', config: { rate_limit: 5 } },
      ],
      account_platforms: [{ account: 'acme', platform: 'fixture' }],
      module_accounts: [
        { module: 'timed', account: 'acme' },
        { module: 'limited', account: 'acme' },
      ],
      module_platforms: [
        { module: 'timed', platform: 'fixture' },
        { module: 'limited', platform: 'fixture' },
      ],
    });
    const errors: ErrorEvent[] = [];
    const statuses: number[] = [];
    const timeouts: (number | undefined)[] = [];
    const moduleOf = (name: string, path: string) =>
      defineModule<number>({
        name,
        nodes: [
          {
            id: 'n',
            generate(ctx) {
              timeouts.push(ctx.settings?.timeoutMs);
              return [new Request(`${site.url}${path}`)];
            },
            parse: (res, cx) => cx.emit(res.status),
          },
        ],
      });
    site.resetStats();
    const engine = Mocra.builder()
      .module(moduleOf('timed', '/delay/3000'), (s) => void statuses.push(s))
      .module(moduleOf('limited', '/quotes/page/1'), (s) => void statuses.push(s))
      .config({ crawler: { auto_seed: false }, retry: { max_retries: 0 } })
      .store({ store: db.store, configCacheMs: 0 })
      .onError((e) => void errors.push(e))
      .engineOptions({ endWhenIdle: false })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await engine.submit({ module: 'timed', account: 'acme', platform: 'fixture', runId: 'timed-run' });
    await engine.submit({ module: 'limited', account: 'acme', platform: 'fixture', runId: 'limited-run' });
    await vi.waitFor(() => expect(errors).toHaveLength(2), { timeout: 20_000, interval: 20 });
    await engine.stop();
    await run;
    expect(timeouts).toEqual([1000]);
    expect(statuses).toEqual([]);
    const byCode = Object.fromEntries(errors.map((e) => [e.code, e.message]));
    expect(Object.keys(byCode).sort()).toEqual(['MOCRA_ERR_CONFIG_INVALID', 'MOCRA_ERR_TIMEOUT']);
    expect(byCode.MOCRA_ERR_CONFIG_INVALID).toMatch(
      /rate_limit: a key of Rust mocra that mocra does not read: request rates are limited per host/,
    );
    // The refused module never fetched anything.
    expect(site.stats().paths['/quotes/page/1'] ?? 0).toBe(0);
  });
});

// Proxies from config.toml: the `[proxy]` section builds the pool, a module layer turns it off
// for one spider (`use_proxy = false`), and a bad key fails with its file position.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startTinyproxy, type Tinyproxy } from './e2e-proxy-servers.js';

let site: FixtureSite;
let tinyproxy: Tinyproxy;
let dir: string;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 2 });
  tinyproxy = await startTinyproxy();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-proxy-config-'));
});
afterAll(async () => {
  await tinyproxy.close();
  await site.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function pagesSpider(name: string, origin: string) {
  return defineSpider<number>({
    name,
    startUrls: [1, 2, 3].map((n) => `${origin}/quotes/page/${n}`),
    parse: (res, cx) => cx.emit(res.$('div.quote').length),
  });
}

test('[proxy] in config.toml routes the crawl through the pool; use_proxy = false keeps a module direct', async () => {
  const file = path.join(dir, 'config.toml');
  fs.writeFileSync(
    file,
    [
      '[proxy]',
      `proxies = ["${tinyproxy.url}"]`,
      'max_errors = 3',
      '',
      '[modules.direct]',
      'use_proxy = false',
      '',
    ].join('\n'),
  );
  site.resetStats();
  const counts: number[] = [];
  const summary = await Mocra.builder()
    .fromToml(file, { watch: false })
    .spider(pagesSpider('proxied', site.hostUrl(0)), (n) => void counts.push(n))
    .spider(pagesSpider('direct', site.hostUrl(1)), (n) => void counts.push(n))
    .handleSignals(false)
    .run();
  expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 6 });
  expect(counts).toEqual([10, 10, 10, 10, 10, 10]);
  // tinyproxy tunnelled host 0 (CONNECT 127.0.0.1:port) and never saw host 1.
  const port = new URL(site.url).port;
  const lines = tinyproxy.requestLines();
  expect(lines.some((l) => l.startsWith(`CONNECT 127.0.0.1:${port} `))).toBe(true);
  expect(lines.some((l) => l.includes(`127.0.0.2:${port}`))).toBe(false);
  expect(site.hostStats(1).requests).toBe(3);
});

test('a bad [proxy] key is a config error with its file position', () => {
  const file = path.join(dir, 'bad.toml');
  fs.writeFileSync(file, ['[proxy]', 'proxies = ["http://127.0.0.1:1"]', 'max_errors = 0', ''].join('\n'));
  expect(() =>
    Mocra.builder()
      .fromToml(file, { watch: false })
      .spider(pagesSpider('x', site.url), () => {})
      .build(),
  ).toThrow(/bad\.toml:3:1 proxy\.max_errors: /);
});

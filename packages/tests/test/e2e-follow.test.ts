// Follow-ups, dedup and the end of a run, on the fixture site.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { EchoResponse } from '@mocra/testkit';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, type ErrorEvent, Mocra, Request } from 'mocra';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
beforeEach(() => site.resetStats());
afterAll(async () => {
  await site.close();
});

describe('cx.follow keeps the request', () => {
  test('method, headers, body and meta survive a follow; relative URLs resolve against the final URL', async () => {
    const echoes: { echo: EchoResponse; meta: Record<string, unknown>; depth: number }[] = [];
    const spider = defineSpider<(typeof echoes)[number]>({
      name: 'follow',
      // Starts behind a redirect, so the relative follow must resolve against the final URL.
      startUrls: [`${site.url}/redirect-to?url=/books/page/2`],
      parse(res, cx) {
        if (res.url.endsWith('/books/page/2')) {
          expect(res.redirects).toHaveLength(1);
          cx.follow(
            new Request('../../echo?step=post', {
              method: 'POST',
              headers: { 'x-trace': 'abc', 'content-type': 'application/json' },
              body: JSON.stringify({ q: 'mocra' }),
              meta: { origin: 'listing', page: 2 },
            }),
          );
          cx.follow('/echo?step=get', { headers: { 'x-trace': 'def' }, meta: { origin: 'string' } });
          return;
        }
        cx.emit({ echo: res.json<EchoResponse>(), meta: cx.meta, depth: cx.depth });
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, (e) => void echoes.push(e))
      .run();
    expect(summary).toMatchObject({ reason: 'idle', items: 2, errors: 0 });
    const post = echoes.find((e) => e.echo.url === '/echo?step=post')!;
    expect(post.echo).toMatchObject({ method: 'POST', body: '{"q":"mocra"}' });
    expect(post.echo.headers).toMatchObject({ 'x-trace': 'abc', 'content-type': 'application/json' });
    expect(post.echo.headers['user-agent']).toMatch(/^mocra\//);
    expect(post.meta).toEqual({ origin: 'listing', page: 2 });
    expect(post.depth).toBe(1);
    const get = echoes.find((e) => e.echo.url === '/echo?step=get')!;
    expect(get.echo).toMatchObject({ method: 'GET', body: '' });
    expect(get.echo.headers['x-trace']).toBe('def');
    expect(get.meta).toEqual({ origin: 'string' });
  });
});

describe('dedup', () => {
  test('the same URL twice, or written differently, is fetched once', async () => {
    const base = site.url;
    const spider = defineSpider({
      name: 'dedup',
      startUrls: [
        `${base}/books/page/1`,
        `${base}/books/page/1`,
        `${base}/books/page/1#top`,
        `${base.replace('http://', 'HTTP://')}/books/page/1`,
        `${base}/books/page/2`,
      ],
      parse(_res, cx) {
        cx.follow('/books/page/2');
        cx.follow('/books/page/2#again');
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, () => {})
      .run();
    expect(summary.pages).toBe(2);
    expect(site.stats({ log: false }).paths).toEqual({ '/books/page/1': 1, '/books/page/2': 1 });
  });

  test('with query sorting on, ?a&b and ?b&a are one page; a POST is not the same as a GET', async () => {
    const spider = defineSpider({
      name: 'dedup-query',
      start(seeds) {
        seeds.get(`${site.url}/echo?a=1&b=2`);
        seeds.get(`${site.url}/echo?b=2&a=1`);
        seeds.add(new Request(`${site.url}/echo?a=1&b=2`, { method: 'POST', body: 'x' }));
        seeds.add(new Request(`${site.url}/echo?a=1&b=2`, { method: 'POST', body: 'y' }));
      },
      parse() {},
    });
    const summary = await Mocra.builder()
      .spider(spider, () => {})
      .frontier({ fingerprint: { sortQuery: true } })
      .run();
    expect(summary.pages).toBe(3);
    expect(site.stats({ log: false }).paths['/echo']).toBe(3);
  });

  test('with persist too, a request that skips dedup or has its own dedup key is fetched each time it is queued', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'mocra-dedup-persist-'));
    try {
      const spider = defineSpider({
        name: 'dedup-persist',
        start(seeds) {
          // One page polled twice on purpose, and one keyed per day: four fetches.
          seeds.add(new Request(`${site.url}/echo?poll=1`, { skipDedup: true }));
          seeds.add(new Request(`${site.url}/echo?poll=1`, { skipDedup: true }));
          seeds.add(new Request(`${site.url}/echo?daily=1`, { dedupKey: 'daily:2026-12-01' }));
          seeds.add(new Request(`${site.url}/echo?daily=1`, { dedupKey: 'daily:2026-12-02' }));
        },
        parse() {},
      });
      // One download at a time: the second copy starts after the first was parsed.
      const summary = await Mocra.builder()
        .spider(spider, () => {})
        .concurrency(1)
        .persist(dir)
        .run();
      expect(summary.pages).toBe(4);
      expect(site.stats({ log: false }).paths['/echo']).toBe(4);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the end of a run', () => {
  test('waits for delayed retries, then ends on its own with exact counts', async () => {
    const errors: ErrorEvent[] = [];
    const statuses: number[] = [];
    const spider = defineSpider<number>({
      name: 'flaky',
      startUrls: [
        `${site.url}/flaky/e2e-a/2?retry-after=0`,
        `${site.url}/flaky/e2e-b/1?status=500`,
        `${site.url}/books/page/1`,
      ],
      parse: (res, cx) => cx.emit(res.status),
    });
    const summary = await Mocra.builder()
      .spider(spider, (s) => void statuses.push(s))
      .retry({ maxRetries: 3, baseDelayMs: 50, maxDelayMs: 100 })
      .onError((e) => errors.push(e))
      .run();
    expect(summary).toMatchObject({
      reason: 'idle',
      pending: 0,
      pages: 3,
      items: 3,
      retries: 3,
      deadLettered: 0,
    });
    expect(statuses).toEqual([200, 200, 200]);
    expect(errors.map((e) => e.code)).toEqual([
      'MOCRA_ERR_HTTP_STATUS',
      'MOCRA_ERR_HTTP_STATUS',
      'MOCRA_ERR_HTTP_STATUS',
    ]);
    expect(site.stats({ log: false }).paths).toMatchObject({ '/flaky/e2e-a/2': 3, '/flaky/e2e-b/1': 2 });
  });
});

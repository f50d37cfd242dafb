import diagnosticsChannel from 'node:diagnostics_channel';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { agent, get, settled } from '../__fixtures__/http.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { filterLog, maxConcurrency, maxRequestsInWindow, minStartInterval } from './analysis.js';
import type { RequestLogEntry } from './request-log.js';
import { RequestLog } from './request-log.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 3 });
});
afterAll(() => site.close());

describe('multi-host listeners', () => {
  test('hosts: 3 listens on 127.0.0.1, 127.0.0.2 and 127.0.0.3 with the same content', async () => {
    expect(site.urls).toHaveLength(3);
    expect(site.urls.map((u) => new URL(u).hostname)).toEqual(['127.0.0.1', '127.0.0.2', '127.0.0.3']);
    expect(site.url).toBe(site.urls[0]);
    expect(site.hostUrl(2)).toBe(site.urls[2]);
    const bodies = await Promise.all(site.urls.map((u) => get(`${u}/book/3`)));
    expect(bodies.every((b) => b.body.equals(bodies[0]!.body))).toBe(true);
    expect(() => site.hostUrl(3)).toThrowError(
      expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_UNKNOWN_HOST', index: 3, hosts: 3 }),
    );
    expect(() => site.hostUrl(-1)).toThrowError(
      expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_UNKNOWN_HOST' }),
    );
  });
});

describe('counters and the request log', () => {
  test('per-host requests, in-flight and maximum in-flight, per-path counts', async () => {
    site.resetStats();
    // Five at once to host 1, two in a row to host 2.
    await Promise.all(Array.from({ length: 5 }, () => get(`${site.hostUrl(1)}/delay/300`)));
    await get(`${site.hostUrl(2)}/books/page/1`);
    await get(`${site.hostUrl(2)}/books/page/1?x=1`);
    await settled(site);
    const stats = site.stats();
    const h1 = site.hostStats(1);
    expect(h1).toEqual({ host: new URL(site.hostUrl(1)).host, requests: 5, inFlight: 0, maxInFlight: 5 });
    expect(site.hostStats(2)).toMatchObject({ requests: 2, maxInFlight: 1 });
    expect(site.hostStats(0)).toMatchObject({ requests: 0, maxInFlight: 0 });
    expect(stats.requests).toBe(7);
    expect(stats.maxInFlight).toBe(5);
    expect(stats.paths).toEqual({ '/delay/300': 5, '/books/page/1': 2 });
    expect(stats.log).toHaveLength(7);
    const host1 = filterLog(stats.log, { hostIndex: 1 });
    expect(host1).toHaveLength(5);
    expect(host1.every((e) => e.status === 200 && e.completed && e.end - e.start >= 290)).toBe(true);
    expect(maxConcurrency(stats.log, { hostIndex: 1 })).toBe(5);
    expect(maxConcurrency(stats.log, { host: new URL(site.hostUrl(2)).host })).toBe(1);
    expect(maxRequestsInWindow(stats.log, 1000, { hostIndex: 1 })).toBe(5);
    expect(filterLog(stats.log, { pathPrefix: '/books/' }).map((e) => e.url)).toEqual([
      '/books/page/1',
      '/books/page/1?x=1',
    ]);
    // Arrival numbers are distinct, and the two sequential requests to host 2 arrived in order.
    expect(new Set(stats.log.map((e) => e.seq)).size).toBe(7);
    const [first, second] = filterLog(stats.log, { hostIndex: 2 });
    expect(first!.seq).toBeLessThan(second!.seq);
  });

  test('dropped connections are logged with status 0 and completed=false; resetStats clears everything', async () => {
    site.resetStats();
    await request(`${site.url}/drop/before-headers`, { dispatcher: agent }).catch(() => undefined);
    await settled(site);
    const [entry] = site.stats().log;
    expect(entry).toMatchObject({ url: '/drop/before-headers', status: 0, completed: false, hostIndex: 0 });
    site.resetStats();
    const cleared = site.stats();
    expect(cleared).toMatchObject({
      requests: 0,
      inFlight: 0,
      maxInFlight: 0,
      paths: {},
      log: [],
      logDropped: 0,
    });
    expect(cleared.hosts).toEqual({});
  });

  test('a request in flight across resetStats stays counted in flight, then leaves the log alone', async () => {
    site.resetStats();
    const pending = get(`${site.url}/delay/500`);
    for (let i = 0; i < 400 && site.stats({ log: false }).inFlight === 0; i++)
      await new Promise((r) => setTimeout(r, 5));
    site.resetStats();
    expect(site.stats({ log: false })).toMatchObject({ requests: 0, inFlight: 1, maxInFlight: 1 });
    await pending;
    await settled(site);
    expect(site.stats()).toMatchObject({ inFlight: 0, log: [] });
  });

  test('latency injection delays every request by at least latencyMs', async () => {
    site.resetStats();
    site.setLatency(80);
    try {
      await get(`${site.url}/`);
      await settled(site);
      const [e] = site.stats().log;
      expect(e!.end - e!.start).toBeGreaterThanOrEqual(75);
    } finally {
      site.setLatency(0);
    }
    site.setLatency(30, 20);
    try {
      site.resetStats();
      await get(`${site.url}/`);
      await settled(site);
      expect(site.stats().log[0]!.end - site.stats().log[0]!.start).toBeGreaterThanOrEqual(28);
    } finally {
      site.setLatency(0);
    }
    expect(() => site.setLatency(-1)).toThrowError(
      expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION' }),
    );
  });

  test('control routes are not counted and expose the same stats over HTTP', async () => {
    site.resetStats();
    await get(`${site.url}/`);
    await settled(site);
    const remote = JSON.parse((await get(`${site.url}/__fixture/stats`)).text);
    expect(remote.requests).toBe(1);
    expect(remote.log).toHaveLength(1);
    expect(JSON.parse((await get(`${site.url}/__fixture/stats?log=0`)).text).log).toEqual([]);
    expect((await get(`${site.url}/__fixture/reset`, { method: 'POST' })).status).toBe(204);
    expect(site.stats({ log: false }).requests).toBe(0);
    site.invalidateSessions('nobody');
    expect(
      (await get(`${site.url}/__fixture/invalidate-sessions?user=user`, { method: 'POST' })).status,
    ).toBe(204);
    expect(site.stats({ log: false }).auth.invalidations).toBe(2);
  });

  test('each finished request is published on mocra:testkit:request', async () => {
    const seen: RequestLogEntry[] = [];
    const onMessage = (m: unknown) => seen.push(m as RequestLogEntry);
    diagnosticsChannel.subscribe('mocra:testkit:request', onMessage);
    try {
      await get(`${site.url}/book/9`);
      await settled(site);
    } finally {
      diagnosticsChannel.unsubscribe('mocra:testkit:request', onMessage);
    }
    expect(seen.map((e) => [e.url, e.status])).toEqual([['/book/9', 200]]);
  });

  test('the log and the path table are bounded', async () => {
    const s = await startFixtureSite({ requestLogSize: 5, maxTrackedPaths: 3 });
    try {
      for (let i = 1; i <= 8; i++) await get(`${s.url}/book/${i}`);
      await settled(s);
      const stats = s.stats();
      expect(stats.log.map((e) => e.url)).toEqual(['/book/4', '/book/5', '/book/6', '/book/7', '/book/8']);
      expect(stats.logDropped).toBe(3);
      expect(Object.keys(stats.paths)).toEqual(['/book/1', '/book/2', '/book/3']);
      expect(stats.untrackedPathRequests).toBe(5);
    } finally {
      await s.close();
    }
  });
});

describe('log analysis helpers', () => {
  const entry = (start: number, end: number, host = 'a'): RequestLogEntry => ({
    seq: start,
    method: 'GET',
    host,
    hostIndex: 0,
    url: '/',
    status: 200,
    start,
    end,
    completed: true,
  });

  test('maxRequestsInWindow, minStartInterval and maxConcurrency', () => {
    const log = [entry(0, 50), entry(100, 150), entry(150, 400), entry(1100, 1200), entry(1150, 1160, 'b')];
    expect(maxRequestsInWindow(log, 1000)).toBe(3); // 0, 100, 150 (1100 is outside [0, 1000))
    expect(maxRequestsInWindow(log, 1000, { host: 'a' })).toBe(3);
    expect(maxRequestsInWindow(log, 10)).toBe(1);
    expect(minStartInterval(log, { host: 'a' })).toBe(50);
    expect(minStartInterval([entry(1, 2)])).toBe(Number.POSITIVE_INFINITY);
    // [100,150] ends as [150,400] starts: not overlapping.
    expect(maxConcurrency(log, { host: 'a' })).toBe(1);
    expect(maxConcurrency(log)).toBe(2);
  });

  test('the ring buffer keeps the newest entries in order', () => {
    const ring = new RequestLog(3);
    for (let i = 0; i < 7; i++) ring.push(i, 'GET', 'h', 0, `/${i}`, 200, i, i + 1, true);
    expect(ring.entries().map((e) => e.url)).toEqual(['/4', '/5', '/6']);
    expect(ring.dropped).toBe(4);
    ring.clear();
    expect(ring.entries()).toEqual([]);
    const none = new RequestLog(0);
    none.push(0, 'GET', 'h', 0, '/', 200, 0, 1, true);
    expect(none.entries()).toEqual([]);
    expect(none.dropped).toBe(1);
  });
});

import { describe, expect, test } from 'vitest';
import { Request } from './request.js';

describe('Request', () => {
  test('defaults, upper-cased method, own copies of headers and meta', () => {
    const headers = { a: '1' };
    const meta = { k: 1 };
    const r = new Request('http://e.com/', { method: 'post', headers, meta });
    expect(r).toMatchObject({ method: 'POST', priority: 0, depth: 0, skipDedup: false, body: undefined });
    r.header('b', '2').withMeta({ j: 2 });
    expect(headers).toEqual({ a: '1' });
    expect(meta).toEqual({ k: 1 });
    expect(r.headers).toEqual({ a: '1', b: '2' });
    expect(r.meta).toEqual({ k: 1, j: 2 });
  });

  test('round-trips through JSON, binary bodies included', () => {
    const r = new Request('http://e.com/x', {
      method: 'PUT',
      body: new Uint8Array([0, 255, 7]),
      priority: 5,
      depth: 2,
      timeoutMs: 100,
      maxRedirects: 0,
      skipDedup: true,
      dedupKey: 'k',
      account: 'acc',
    });
    r.module = 'm';
    r.node = 'n';
    r.runId = 'run';
    r.fingerprint = 'fp';
    const copy = Request.from(JSON.parse(JSON.stringify(r)));
    expect(copy).toBeInstanceOf(Request);
    expect(copy.toJSON()).toEqual(r.toJSON());
    expect([...(copy.body as Uint8Array)]).toEqual([0, 255, 7]);
    expect(copy).toMatchObject({
      method: 'PUT',
      priority: 5,
      depth: 2,
      module: 'm',
      node: 'n',
      runId: 'run',
      fingerprint: 'fp',
    });
    expect(Request.from(r)).toBe(r);
  });

  test('clone copies request fields but not the engine-set ones', () => {
    const r = new Request('http://e.com/', { meta: { a: 1 }, priority: 3 });
    r.module = 'm';
    r.fingerprint = 'fp';
    const c = r.clone({ url: 'http://e.com/2' });
    expect(c).toMatchObject({
      url: 'http://e.com/2',
      priority: 3,
      meta: { a: 1 },
      module: undefined,
      fingerprint: undefined,
    });
    c.meta.a = 2;
    expect(r.meta.a).toBe(1);
  });
});

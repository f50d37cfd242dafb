import {
  brotliDecompressSync,
  createGunzip,
  createInflate,
  gunzipSync,
  inflateRawSync,
  inflateSync,
} from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { agent, get } from '../__fixtures__/http.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { paddedPage } from './bodies.js';
import { CHARSET_PAGES, type CharsetPageName, charsetPageBytes } from './charsets.js';
import { crc32, crc32OfZeros } from './crc32.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hugeBodyBytes: 3_000_000, bombBytes: 32 * 1024 * 1024 });
});
afterAll(() => site.close());

/** Reads a whole response, resolving with the error the client raised (or undefined). */
async function readError(path: string, options: { bodyTimeout?: number } = {}): Promise<Error | undefined> {
  try {
    const res = await request(`${site.url}${path}`, { dispatcher: agent, ...options });
    await res.body.arrayBuffer();
    return undefined;
  } catch (err) {
    return err as Error;
  }
}

describe('timing and status', () => {
  test('/delay/<ms> answers after the delay', async () => {
    const start = Date.now();
    const f = await get(`${site.url}/delay/120`);
    expect(f.status).toBe(200);
    expect(f.text).toContain('Waited 120 ms.');
    expect(Date.now() - start).toBeGreaterThanOrEqual(115);
    expect((await get(`${site.url}/delay/600001`)).status).toBe(404);
  });

  test('/status/<code> answers any status, with any method', async () => {
    for (const code of [200, 201, 404, 418, 500, 502, 599]) {
      const f = await get(`${site.url}/status/${code}`);
      expect(f.status).toBe(code);
      expect(f.text).toBe(`Status ${code}\n`);
    }
    expect((await get(`${site.url}/status/500`, { method: 'POST', body: 'x' })).status).toBe(500);
    const noContent = await get(`${site.url}/status/204`);
    expect(noContent.status).toBe(204);
    expect(noContent.body.length).toBe(0);
    const moved = await get(`${site.url}/status/301?location=/books/page/1`);
    expect(moved.headers.location).toBe('/books/page/1');
    expect((await get(`${site.url}/status/301?location=http://example.com/`)).status).toBe(400);
    expect((await get(`${site.url}/status/199`)).status).toBe(404);
    expect((await get(`${site.url}/status/600`)).status).toBe(404);
  });

  test('429 and 503 carry Retry-After in the delay-seconds and the HTTP-date forms', async () => {
    const seconds = await get(`${site.url}/status/429?retry-after=7`);
    expect(seconds.status).toBe(429);
    expect(seconds.headers['retry-after']).toBe('7');
    const before = Date.now();
    const dated = await get(`${site.url}/status/503?retry-after-date=30`);
    expect(dated.status).toBe(503);
    const value = String(dated.headers['retry-after']);
    expect(value).toMatch(
      /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/,
    );
    const at = Date.parse(value);
    expect(at).toBeGreaterThanOrEqual(before + 29_000);
    expect(at).toBeLessThanOrEqual(Date.now() + 31_000);
    expect((await get(`${site.url}/status/429`)).headers['retry-after']).toBeUndefined();
    expect((await get(`${site.url}/status/429?retry-after=soon`)).status).toBe(400);
  });

  test('/flaky/<key>/<n> fails n times, then succeeds; keys are independent; resetStats starts over', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await get(`${site.url}/flaky/a/2?status=429&retry-after=1`)).status);
    expect(statuses).toEqual([429, 429, 200, 200]);
    expect((await get(`${site.url}/flaky/b/1`)).status).toBe(503);
    expect((await get(`${site.url}/flaky/b/1`)).headers['x-fixture-attempt']).toBe('2');
    site.resetStats();
    expect((await get(`${site.url}/flaky/a/2`)).status).toBe(503);
  });
});

describe('redirects', () => {
  test('/redirect/<n> is a chain of n redirects to a final page, relative or absolute, any 3xx', async () => {
    let path = '/redirect/3?status=307';
    const chain: string[] = [];
    for (;;) {
      const f = await get(`${site.url}${path}`);
      if (f.status === 200) {
        expect(f.text).toContain('Final page');
        break;
      }
      expect(f.status).toBe(307);
      path = String(f.headers.location);
      chain.push(path);
    }
    expect(chain).toEqual(['/redirect/2?status=307', '/redirect/1?status=307', '/redirect/0?status=307']);
    const abs = await get(`${site.url}/redirect/2?absolute=1`);
    expect(abs.status).toBe(302);
    expect(abs.headers.location).toBe(`${site.url}/redirect/1?absolute=1`);
    expect((await get(`${site.url}/redirect/1?status=200`)).status).toBe(400);
  });

  test('/redirect-loop/<len>/<i> cycles forever; /redirect-to only goes to loopback targets', async () => {
    const seen: string[] = [];
    let path = '/redirect-loop/3/0';
    for (let i = 0; i < 6; i++) {
      const f = await get(`${site.url}${path}`);
      expect(f.status).toBe(302);
      path = String(f.headers.location);
      seen.push(path);
    }
    expect(seen).toEqual([
      '/redirect-loop/3/1',
      '/redirect-loop/3/2',
      '/redirect-loop/3/0',
      '/redirect-loop/3/1',
      '/redirect-loop/3/2',
      '/redirect-loop/3/0',
    ]);
    expect((await get(`${site.url}/redirect-loop/1/0`)).headers.location).toBe('/redirect-loop/1/0');
    const to = await get(
      `${site.url}/redirect-to?url=${encodeURIComponent('http://127.0.0.2:1/x')}&status=301`,
    );
    expect(to.status).toBe(301);
    expect(to.headers.location).toBe('http://127.0.0.2:1/x');
    for (const bad of ['http://example.com/', '//example.com/', 'ftp://127.0.0.1/', 'javascript:alert(1)']) {
      expect((await get(`${site.url}/redirect-to?url=${encodeURIComponent(bad)}`)).status, bad).toBe(400);
    }
  });
});

describe('broken transfers', () => {
  test('a connection dropped before the headers makes the request fail', async () => {
    const err = await readError('/drop/before-headers');
    expect(err).toBeInstanceOf(Error);
    expect((err as Error & { code?: string }).code).toBe('UND_ERR_SOCKET');
  });

  test('a connection dropped mid-body and a body shorter than its Content-Length make reading fail', async () => {
    const cases: Array<[string, string]> = [
      ['/drop/mid-body', 'UND_ERR_SOCKET'],
      ['/truncated', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'],
      ['/truncated?declared=100&sent=10', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'],
    ];
    for (const [path, code] of cases) {
      const res = await request(`${site.url}${path}`, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      await expect(res.body.arrayBuffer(), path).rejects.toMatchObject({ code });
    }
    expect((await get(`${site.url}/truncated?declared=10&sent=10`)).status).toBe(400);
  });

  test('chunked encoding: a good stream arrives whole; a bad chunk size and a missing last chunk fail', async () => {
    const ok = await get(`${site.url}/chunked/ok?chunks=4&intervalMs=5`);
    expect(ok.status).toBe(200);
    expect(ok.headers['transfer-encoding']).toBe('chunked');
    expect(ok.text.match(/<p class="chunk">/g)).toHaveLength(4);
    const invalid = await readError('/chunked/invalid-size');
    expect(invalid?.name).toBe('HTTPParserError');
    expect(invalid?.message).toMatch(/chunk size/i);
    const unterminated = await readError('/chunked/unterminated');
    expect(unterminated?.name).toBe('HTTPParserError');
  });

  test('a trickling body arrives whole when waited for, and trips a short body timeout', async () => {
    const f = await get(`${site.url}/trickle?bytes=300&chunk=100&intervalMs=20`);
    expect(f.text).toBe(paddedPage(300));
    const err = await readError('/trickle?bytes=1000&chunk=10&intervalMs=1000', { bodyTimeout: 100 });
    expect((err as Error & { code?: string }).code).toBe('UND_ERR_BODY_TIMEOUT');
  });
});

describe('bodies', () => {
  test('gzip, deflate (zlib and raw) and brotli bodies carry the right Content-Encoding and decode to the same page', async () => {
    const plain = paddedPage(20_000);
    const identity = await get(`${site.url}/compressed/identity?bytes=20000`);
    expect(identity.text).toBe(plain);
    expect(identity.headers['content-encoding']).toBeUndefined();
    const decoders = {
      gzip: ['gzip', gunzipSync],
      deflate: ['deflate', inflateSync],
      'deflate-raw': ['deflate', inflateRawSync],
      br: ['br', brotliDecompressSync],
    } as const;
    for (const [name, [encoding, decode]] of Object.entries(decoders)) {
      const f = await get(`${site.url}/compressed/${name}?bytes=20000`);
      expect(f.headers['content-encoding'], name).toBe(encoding);
      expect(f.body.length, name).toBeLessThan(20_000);
      expect(decode(f.body).toString('utf8'), name).toBe(plain);
    }
    expect((await get(`${site.url}/compressed/zstd`)).status).toBe(404);
  });

  test('the gzip bomb is small on the wire and inflates to exactly the promised zeros (CRC checked)', async () => {
    const size = 32 * 1024 * 1024;
    const res = await request(`${site.url}/bomb/gzip`, { dispatcher: agent });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['x-inflated-bytes']).toBe(String(size));
    const wire = Number(res.headers['content-length']);
    expect(wire).toBeLessThan(size / 900);
    let inflated = 0;
    let nonZero = 0;
    let onWire = 0;
    const gunzip = createGunzip();
    gunzip.on('data', (chunk: Buffer) => {
      inflated += chunk.length;
      for (let i = 0; i < chunk.length; i += 4096) nonZero += chunk[i]!;
    });
    const done = new Promise<void>((resolve, reject) => {
      gunzip.on('end', resolve);
      gunzip.on('error', reject);
    });
    for await (const chunk of res.body) {
      onWire += (chunk as Buffer).length;
      gunzip.write(chunk);
    }
    gunzip.end();
    await done;
    expect(onWire).toBe(wire);
    expect(inflated).toBe(size);
    expect(nonZero).toBe(0);
  });

  test('the default bomb is 1 GiB in about 1 MB, and deflate bombs work too (Adler-32 checked)', async () => {
    const s = await startFixtureSite();
    try {
      const res = await request(`${s.url}/bomb/gzip`, { dispatcher: agent });
      expect(res.headers['x-inflated-bytes']).toBe(String(1024 ** 3));
      expect(Number(res.headers['content-length'])).toBeLessThan(1.1 * 1024 * 1024);
      await res.body.dump({ limit: 0 }).catch(() => undefined);
    } finally {
      await s.close();
    }
    const size = 3 * 1024 * 1024 + 12_345;
    const res = await request(`${site.url}/bomb/deflate?size=${size}`, { dispatcher: agent });
    expect(res.headers['content-encoding']).toBe('deflate');
    const inflate = createInflate();
    let inflated = 0;
    inflate.on('data', (c: Buffer) => {
      inflated += c.length;
    });
    const done = new Promise<void>((resolve, reject) => {
      inflate.on('end', resolve);
      inflate.on('error', reject);
    });
    for await (const chunk of res.body) inflate.write(chunk);
    inflate.end();
    await done;
    expect(inflated).toBe(size);
  });

  test('CRC-32 of zeros computed in O(log n) matches the byte-by-byte CRC', () => {
    for (const n of [0, 1, 7, 1000, 65_537, 1 << 20])
      expect(crc32OfZeros(n), String(n)).toBe(crc32(new Uint8Array(n)));
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
  });

  test('/huge streams exactly the configured size with Content-Length (or chunked), generated lazily', async () => {
    const res = await request(`${site.url}/huge`, { dispatcher: agent });
    expect(res.headers['content-length']).toBe('3000000');
    let n = 0;
    let first = '';
    for await (const chunk of res.body) {
      if (n === 0) first = (chunk as Buffer).subarray(0, 15).toString();
      n += (chunk as Buffer).length;
    }
    expect(n).toBe(3_000_000);
    expect(first).toBe('<!DOCTYPE html>');
    const chunked = await request(`${site.url}/huge?bytes=100000&chunked=1`, { dispatcher: agent });
    expect(chunked.headers['transfer-encoding']).toBe('chunked');
    expect((await chunked.body.arrayBuffer()).byteLength).toBe(100_000);
    // The default huge body of a default site is 200 MB; read only its headers.
    const s = await startFixtureSite();
    try {
      const big = await request(`${s.url}/huge`, { dispatcher: agent });
      expect(big.headers['content-length']).toBe('200000000');
      big.body.destroy();
    } finally {
      await s.close();
    }
  });

  test('wrong content types: HTML as image/png, JSON as text/html, a PNG as text/html, none at all', async () => {
    const htmlAsPng = await get(`${site.url}/wrong-type/html-as-png`);
    expect(htmlAsPng.headers['content-type']).toBe('image/png');
    expect(htmlAsPng.text.startsWith('<!DOCTYPE html>')).toBe(true);
    const jsonAsHtml = await get(`${site.url}/wrong-type/json-as-html`);
    expect(jsonAsHtml.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(JSON.parse(jsonAsHtml.text)).toMatchObject({ kind: 'json' });
    const pngAsHtml = await get(`${site.url}/wrong-type/png-as-html`);
    expect(pngAsHtml.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(pngAsHtml.body.subarray(0, 8)).toEqual(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );
    const htmlAsJson = await get(`${site.url}/wrong-type/html-as-json`);
    expect(htmlAsJson.headers['content-type']).toBe('application/json; charset=utf-8');
    const none = await get(`${site.url}/wrong-type/missing`);
    expect(none.status).toBe(200);
    expect(none.headers['content-type']).toBeUndefined();
    expect(none.text.startsWith('<!DOCTYPE html>')).toBe(true);
  });
});

/**
 * windows-1252 decoding written out here: Node 20's TextDecoder('windows-1252') maps 0x80–0x9F
 * to C1 controls (ISO-8859-1 behaviour), so it cannot check these bytes.
 */
const CP1252 = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ';
function decode(bytes: Buffer, encoding: string): string {
  if (encoding !== 'windows-1252') return new TextDecoder(encoding).decode(bytes);
  let out = '';
  for (const b of bytes) out += b >= 0x80 && b < 0xa0 ? CP1252[b - 0x80] : String.fromCharCode(b);
  return out;
}

describe('charsets', () => {
  test('bytes on the wire are latin-1, windows-1252 and Shift_JIS, as declared', async () => {
    const latin1 = await get(`${site.url}/charset/latin1`);
    expect(latin1.headers['content-type']).toBe('text/html; charset=ISO-8859-1');
    // "café" in ISO-8859-1: é is the single byte 0xE9, not UTF-8's C3 A9.
    expect(latin1.body.includes(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe(true);
    expect(latin1.body.includes(Buffer.from([0xc3, 0xa9]))).toBe(false);

    const cp1252 = await get(`${site.url}/charset/windows-1252`);
    expect(cp1252.headers['content-type']).toBe('text/html; charset=windows-1252');
    // “ = 0x93, ” = 0x94, € = 0x80, — = 0x97 in windows-1252.
    expect(cp1252.body.includes(Buffer.from([0x93]))).toBe(true);
    expect(cp1252.body.includes(Buffer.from([0x80, 0x35]))).toBe(true);
    expect(cp1252.body.includes(Buffer.from([0x97]))).toBe(true);

    const sjis = await get(`${site.url}/charset/shift_jis`);
    expect(sjis.headers['content-type']).toBe('text/html; charset=Shift_JIS');
    // 日本語 in Shift_JIS.
    expect(sjis.body.includes(Buffer.from([0x93, 0xfa, 0x96, 0x7b, 0x8c, 0xea]))).toBe(true);
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(sjis.body)).toThrow();
  });

  test('every charset page decodes to its sample with the encoding a browser would pick', async () => {
    for (const [name, page] of Object.entries(CHARSET_PAGES)) {
      const f = await get(`${site.url}${page.path}`);
      expect(f.status, name).toBe(200);
      expect(f.headers['content-type'], name).toBe(page.contentType);
      expect(f.body.equals(charsetPageBytes(name as CharsetPageName)), name).toBe(true);
      const text = decode(f.body, page.encoding);
      expect(text, name).toContain(`<p class="sample">${page.sample}</p>`);
    }
  });

  test('meta-only and BOM pages declare their encoding only in the body', async () => {
    const meta = await get(`${site.url}/charset/meta`);
    expect(meta.headers['content-type']).toBe('text/html');
    expect(meta.text).toContain('<meta charset="windows-1252">');
    const metaSjis = await get(`${site.url}/charset/meta-shift_jis`);
    expect(metaSjis.text).toContain(
      '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
    );
    const bom = await get(`${site.url}/charset/bom`);
    expect(bom.body.subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(bom.text).not.toContain('charset=');
    const invalid = await get(`${site.url}/charset/invalid-utf8`);
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(invalid.body)).toThrow();
  });
});

describe('echo and cookies', () => {
  test('/echo returns method, headers and body as received', async () => {
    const f = await get(`${site.url}/echo?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-custom': 'kept' },
      body: 'payload ü',
    });
    const echo = JSON.parse(f.text);
    expect(echo).toMatchObject({ method: 'POST', url: '/echo?x=1', body: 'payload ü', bodyBytes: 10 });
    expect(echo.headers['x-custom']).toBe('kept');
    const json = JSON.parse(
      (
        await get(`${site.url}/echo`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"a":1}',
        })
      ).text,
    );
    expect(json.body).toBe('{"a":1}');
  });

  test('/cookies/set sets cookies and /cookies shows those sent back', async () => {
    const set = await get(`${site.url}/cookies/set?a=1&b=two`);
    expect(set.status).toBe(302);
    expect(String(set.headers['set-cookie'])).toContain('a=1; Path=/');
    const shown = JSON.parse((await get(`${site.url}/cookies`, { headers: { cookie: 'a=1; b=two' } })).text);
    expect(shown).toEqual({ cookies: { a: '1', b: 'two' } });
    const deleted = await get(`${site.url}/cookies/delete?a`);
    expect(deleted.status).toBe(302);
    expect(String(deleted.headers['set-cookie'])).toMatch(/^a=; .*Expires=Thu, 01 Jan 1970/);
  });
});

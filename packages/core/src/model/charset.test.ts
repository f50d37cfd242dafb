import { describe, expect, test } from 'vitest';
import { cachedLabelCount, detectCharset, normalizeCharset } from './charset.js';
import { Request } from './request.js';
import { Response } from './response.js';

function response(body: Uint8Array | string, contentType?: string): Response {
  return new Response({
    url: 'http://example.test/page',
    status: 200,
    headers: contentType === undefined ? {} : { 'content-type': contentType },
    body: typeof body === 'string' ? Buffer.from(body) : body,
    request: new Request('http://example.test/page'),
  });
}

// "Grüße, café" in windows-1252 and "日本語" in Shift_JIS, as bytes.
const LATIN1 = Buffer.from([0x47, 0x72, 0xfc, 0xdf, 0x65, 0x2c, 0x20, 0x63, 0x61, 0x66, 0xe9]);
const SJIS = Buffer.from([0x93, 0xfa, 0x96, 0x7b, 0x8c, 0xea]);

describe('charset detection', () => {
  test('Content-Type charset', () => {
    const res = response(LATIN1, 'text/html; charset=ISO-8859-1');
    expect(res.charset).toBe('windows-1252');
    expect(res.text()).toBe('Grüße, café');
    expect(response(SJIS, 'text/plain; charset="Shift_JIS"').text()).toBe('日本語');
  });

  test('windows-1252 maps 0x80–0x9F to the WHATWG characters (not C1 controls)', () => {
    const bytes = Buffer.from([0x93, 0x51, 0x94, 0x20, 0x80, 0x35, 0x20, 0x97, 0x20, 0x85, 0x99, 0xe9]);
    expect(response(bytes, 'text/html; charset=windows-1252').text()).toBe('“Q” €5 — …™é');
    expect(response(bytes, 'text/html; charset=iso-8859-1').text()).toBe('“Q” €5 — …™é');
  });

  test('a BOM wins over the header', () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('héllo')]);
    const res = response(body, 'text/html; charset=windows-1252');
    expect(detectCharset(body, 'text/html; charset=windows-1252')).toMatchObject({
      charset: 'utf-8',
      source: 'bom',
    });
    expect(res.text()).toBe('héllo');
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('hi ✓', 'utf16le')]);
    expect(response(utf16).text()).toBe('hi ✓');
  });

  test('<meta charset> and http-equiv when the header says nothing', () => {
    const meta = Buffer.concat([Buffer.from('<html><head><meta charset="shift_jis"></head><body>'), SJIS]);
    expect(response(meta, 'text/html').charset).toBe('shift_jis');
    expect(response(meta, 'text/html').text()).toContain('日本語');
    const equiv = Buffer.concat([
      Buffer.from('<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>'),
      LATIN1,
    ]);
    const res = response(equiv);
    expect(detectCharset(equiv, undefined)).toMatchObject({ charset: 'windows-1252', source: 'meta' });
    expect(res.text()).toContain('Grüße, café');
  });

  test('meta is not sniffed for non-HTML types, and utf-16 in a meta means utf-8', () => {
    const meta = Buffer.from('<meta charset="shift_jis">');
    expect(detectCharset(meta, 'application/json').source).toBe('default');
    expect(detectCharset(Buffer.from('<meta charset="utf-16">'), 'text/html').charset).toBe('utf-8');
  });

  test('unknown labels are skipped; without a declaration: UTF-8 when the bytes are, else windows-1252', () => {
    expect(detectCharset(Buffer.from('x'), 'text/html; charset=klingon')).toMatchObject({
      charset: 'windows-1252',
      source: 'default',
    });
    expect(detectCharset(Buffer.from('naïve'), 'text/html')).toMatchObject({
      charset: 'utf-8',
      source: 'detected',
    });
    expect(response('naïve', 'text/html; charset=bogus').text()).toBe('naïve');
    expect(response(LATIN1, 'text/html').text()).toBe('Grüße, café');
    // A body cut by a size limit in the middle of a character is still UTF-8.
    const cut = Buffer.from('日本語').subarray(0, 7);
    expect(detectCharset(cut, 'text/html').charset).toBe('utf-8');
    // JSON, CSS, JavaScript, plain text: UTF-8 unless declared.
    expect(detectCharset(LATIN1, 'application/json')).toMatchObject({ charset: 'utf-8', source: 'default' });
  });

  test('a <meta charset> late in the head is found; one in a comment is not', () => {
    const head = `<html><head><style>${'p{color:red}'.repeat(200)}</style>\n<meta charset="shift_jis"></head><body>`;
    expect(Buffer.byteLength(head)).toBeGreaterThan(1024);
    expect(response(Buffer.concat([Buffer.from(head), SJIS]), 'text/html').text()).toContain('日本語');
    const commented = `<!--<meta charset="shift_jis">--><meta charset="windows-1252">`;
    expect(detectCharset(Buffer.from(commented), 'text/html').charset).toBe('windows-1252');
    // Past 1,024 bytes, a tag that cannot be in a head ends the search.
    const inBody = `<html><head></head><body>${'<p>x</p>'.repeat(200)}<meta charset="shift_jis">`;
    expect(detectCharset(Buffer.from(inBody), 'text/html').source).toBe('default');
  });

  test('XML declarations; replacement and x-user-defined labels', () => {
    const xml = Buffer.concat([Buffer.from('<?xml version="1.0" encoding="ISO-8859-1"?><a>'), LATIN1]);
    expect(detectCharset(xml, 'application/rss+xml')).toMatchObject({
      charset: 'windows-1252',
      source: 'meta',
    });
    expect(response(Buffer.from('abc'), 'text/html; charset=iso-2022-kr').text()).toBe('\ufffd');
    expect(response(Buffer.from([0x61, 0x80]), 'text/html; charset=x-user-defined').text()).toBe('a\uf780');
    expect(detectCharset(Buffer.from('<meta charset="x-user-defined">'), 'text/html').charset).toBe(
      'windows-1252',
    );
  });

  test('labels: ASCII whitespace and case only; unknown or absurd labels name nothing', () => {
    expect(normalizeCharset(' \tShift_JIS\n')).toBe('shift_jis');
    expect(normalizeCharset('latin1')).toBe('windows-1252');
    expect(normalizeCharset('\u00a0utf-8')).toBeUndefined();
    expect(normalizeCharset('x'.repeat(8192))).toBeUndefined();
    // A unique bogus label per page costs nothing to remember: only real labels are cached.
    for (let i = 0; i < 2000; i++) expect(normalizeCharset(`bogus-${i}`)).toBeUndefined();
    expect(cachedLabelCount()).toBeLessThan(300);
  });

  test('invalid bytes are replaced by default; fatal mode throws MOCRA_ERR_TEXT_DECODING', () => {
    const bad = Buffer.from([0x61, 0xff, 0xfe, 0x62]);
    const res = response(bad, 'text/plain; charset=utf-8');
    expect(res.text()).toBe('a\ufffd\ufffdb');
    expect(() => res.text({ fatal: true })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_TEXT_DECODING' }),
    );
    expect(res.text({ charset: 'windows-1252' })).toBe('aÿþb');
  });
});

describe('Response', () => {
  test('json(), header(), contentType and a lazily parsed, cached $', () => {
    const res = response('{"a":[1,2]}', 'Application/JSON; charset=utf-8');
    expect(res.json()).toEqual({ a: [1, 2] });
    expect(res.contentType).toBe('application/json');
    expect(res.header('Content-Type')).toBe('Application/JSON; charset=utf-8');
    const html = response('<ul><li class="x">one</li><li class="x">two</li></ul>', 'text/html');
    expect(html.$('li.x').length).toBe(2);
    expect(html.$).toBe(html.$);
    expect(html.$('li').last().text()).toBe('two');
  });

  test('round-trips through its serialized form', () => {
    const req = new Request('http://example.test/a', {
      method: 'POST',
      body: new Uint8Array([1, 2, 3]),
      meta: { k: 1 },
    });
    req.fingerprint = 'fp';
    const res = new Response({
      url: 'http://example.test/b',
      status: 201,
      headers: { 'set-cookie': ['a=1', 'b=2'] },
      body: Buffer.from('body'),
      request: req,
      redirects: [{ url: 'http://example.test/a', status: 302, location: 'http://example.test/b' }],
    });
    const copy = Response.from(JSON.parse(JSON.stringify(res)));
    expect(copy).not.toBe(res);
    expect(copy.text()).toBe('body');
    expect(copy.header('set-cookie')).toBe('a=1, b=2');
    expect(copy.redirects).toEqual(res.redirects);
    expect(copy.request.method).toBe('POST');
    expect([...(copy.request.body as Uint8Array)]).toEqual([1, 2, 3]);
    expect(copy.request.meta).toEqual({ k: 1 });
    expect(copy.request.fingerprint).toBe('fp');
    expect(Response.from(res)).toBe(res);
  });
});

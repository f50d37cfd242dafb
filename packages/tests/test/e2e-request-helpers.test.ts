// The request helpers (Scrapy's JsonRequest / FormRequest, Crawlee's payload) against the
// fixture site's /echo, which answers with the request as it arrived: `json`, `form`, `params`
// and `cookies` on seeds and on follows, with the right method, content type and encoding —
// from the library and from a spider file run by the built bin.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra, Request } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, mocra, readJsonl, tempDir } from './journeys/harness.js';

interface Echo {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  site = await startFixtureSite();
  root = tempDir('request-helpers');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('json, form, params and cookies arrive encoded, with their headers and method', async () => {
  const echoes = new Map<string, Echo>();
  await Mocra.builder()
    .spider(
      defineSpider<[string, Echo]>({
        name: 'helpers',
        start(seeds) {
          seeds.get(`${site.url}/echo?kind=json`, { json: { q: 'café', n: [1, 2], ok: true } }).meta.kind =
            'json';
          seeds.get(`${site.url}/echo?kind=form`, {
            form: { user: 'a b&c', tag: ['x', 'y'], n: 3 },
          }).meta.kind = 'form';
          seeds.get(`${site.url}/echo?kind=params`, {
            params: { q: 'a&b=c é', page: 2, tag: ['t1', 't2'] },
          }).meta.kind = 'params';
          seeds.get(`${site.url}/echo?kind=cookies`, {
            headers: { Cookie: 'existing=1' },
            cookies: { session: 'abc123', theme: 'dark' },
          }).meta.kind = 'cookies';
          seeds.add(
            new Request(`${site.url}/echo?kind=put`, {
              method: 'put',
              json: [1],
              headers: { 'content-type': 'application/vnd.x+json' },
            }),
          ).meta.kind = 'put';
        },
        parse(res, cx) {
          const kind = String(cx.meta.kind);
          cx.emit([kind, res.json<Echo>()]);
          if (kind === 'json')
            cx.follow('/echo?kind=follow', { form: { from: 'follow' }, meta: { kind: 'follow' } });
        },
      }),
      ([kind, echo]) => void echoes.set(kind, echo),
    )
    .handleSignals(false)
    .run();

  const json = echoes.get('json')!;
  expect(json.method).toBe('POST');
  expect(json.headers['content-type']).toBe('application/json');
  expect(JSON.parse(json.body)).toEqual({ q: 'café', n: [1, 2], ok: true });

  const form = echoes.get('form')!;
  expect(form.method).toBe('POST');
  expect(form.headers['content-type']).toBe('application/x-www-form-urlencoded');
  expect(form.body).toBe('user=a+b%26c&tag=x&tag=y&n=3');

  const params = new URL(echoes.get('params')!.url, site.url);
  expect(echoes.get('params')!.method).toBe('GET');
  expect(params.searchParams.getAll('kind')).toEqual(['params']);
  expect(params.searchParams.get('q')).toBe('a&b=c é');
  expect(params.searchParams.getAll('tag')).toEqual(['t1', 't2']);
  expect(params.searchParams.get('page')).toBe('2');

  expect(echoes.get('cookies')!.headers.cookie).toBe('existing=1; session=abc123; theme=dark');

  const put = echoes.get('put')!;
  expect(put.method).toBe('PUT'); // a chosen method is kept
  expect(put.headers['content-type']).toBe('application/vnd.x+json'); // and a chosen content type
  expect(put.body).toBe('[1]');

  const follow = echoes.get('follow')!;
  expect([follow.method, follow.body, follow.headers['content-type']]).toEqual([
    'POST',
    'from=follow',
    'application/x-www-form-urlencoded',
  ]);
});

test('unusable input is refused where the request is made', () => {
  expect(() => new Request('https://example.com/', { json: {}, form: {} })).toThrow(
    /one of body, json and form, not json and form/,
  );
  expect(() => new Request('https://example.com/', { cookies: { 'a b': '1' } })).toThrow(/not a valid token/);
  expect(() => new Request('https://example.com/', { cookies: { a: 'x;y' } })).toThrow(/without spaces/);
  expect(() => new Request('https://example.com/', { params: { a: { b: 1 } as never } })).toThrow(
    /params\.a must be/,
  );
});

test('journey: a spider file that posts a form and a JSON body, run by the built bin', async () => {
  assertBuilt();
  const dir = path.join(root, 'file');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'post.ts'),
    `import { defineSpider } from 'mocra';

export default defineSpider<{ method: string; type: string; body: string }>({
  name: 'post',
  start(seeds) {
    seeds.get('${site.url}/echo?a=1', { form: { q: 'shoes & socks' } });
    seeds.get('${site.url}/echo?a=2', { json: { q: 'shoes' }, params: { page: 3 } });
  },
  parse(res, cx) {
    const echo = res.json<{ method: string; url: string; headers: Record<string, string>; body: string }>();
    cx.emit({ method: echo.method, type: echo.headers['content-type'] ?? '', body: echo.body + ' ' + echo.url });
  },
});
`,
  );
  const r = await mocra(['run', 'post.ts', '--out', 'out.jsonl', '--no-progress'], { cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  const rows = readJsonl<{ method: string; type: string; body: string }>(path.join(dir, 'out.jsonl'));
  expect(rows.sort((a, b) => a.body.localeCompare(b.body))).toEqual([
    { method: 'POST', type: 'application/json', body: '{"q":"shoes"} /echo?a=2&page=3' },
    { method: 'POST', type: 'application/x-www-form-urlencoded', body: 'q=shoes+%26+socks /echo?a=1' },
  ]);
});

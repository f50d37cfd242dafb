// Routing by label (Crawlee's router) on the fixture site's catalog: a listing → detail spider
// with no `if` on the label, run by the library and as a spider file by the built bin; a label
// without a handler is an error that names the labels there are.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ErrorEvent } from '@mocra/core';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { createRouter, defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, mocra, readJsonl, tempDir } from './journeys/harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  site = await startFixtureSite();
  root = tempDir('router');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const firstPageTitles = () =>
  catalogBooks()
    .slice(0, 20)
    .map((b) => b.title)
    .sort();

test('listing pages go to the default handler, detail pages to their label', async () => {
  const router = createRouter<{ title: string; from: string }>();
  router.addDefaultHandler((_res, cx) => {
    cx.enqueueLinks({ selector: 'article.product_pod h3 a', label: 'detail' });
  });
  router.addHandler('detail', (res, cx) =>
    cx.emit({ title: res.$('h1').text(), from: String(cx.meta.label) }),
  );
  expect(router.labels).toEqual(['detail']);
  expect(() => router.addHandler('detail', () => {})).toThrow(/label 'detail' has a handler already/);

  const items: { title: string; from: string }[] = [];
  const summary = await Mocra.builder()
    .spider(
      defineSpider({ name: 'books', startUrls: [`${site.url}/books/page/1`], parse: router }),
      (i) => void items.push(i),
    )
    .handleSignals(false)
    .run();
  expect(summary.pages).toBe(21);
  expect(items.map((i) => i.title).sort()).toEqual(firstPageTitles());
  expect(new Set(items.map((i) => i.from))).toEqual(new Set(['detail']));
});

test('cx.follow(url, { label }) routes too; a label with no handler fails that page, named', async () => {
  const errors: ErrorEvent[] = [];
  const items: string[] = [];
  const router = createRouter<string>({
    detail: (res, cx) => cx.emit(res.$('h1').text()),
  }).addDefaultHandler((_res, cx) => {
    cx.follow('/book/1', { label: 'detail' });
    cx.follow('/book/2', { label: 'detial' });
  });
  await Mocra.builder()
    .spider(
      defineSpider({ name: 'typo', startUrls: [`${site.url}/books/page/1`], parse: router }),
      (t) => void items.push(t),
    )
    .onError((e) => void errors.push(e))
    .handleSignals(false)
    .run();
  expect(items).toEqual([catalogBooks()[0]!.title]);
  expect(errors.map((e) => [e.code, e.url])).toEqual([['MOCRA_ERR_NON_RETRYABLE', `${site.url}/book/2`]]);
  expect(errors[0]!.message).toMatch(/no handler for label "detial" .*labels with a handler: 'detail'/);
});

test('journey: a spider file with a router, run by the built bin', async () => {
  assertBuilt();
  const dir = path.join(root, 'file');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'books.ts'),
    `import { createRouter, defineSpider } from 'mocra';

const router = createRouter<{ title: string }>();
router.addDefaultHandler((res, cx) => {
  cx.enqueueLinks({ selector: 'article.product_pod h3 a', label: 'detail' });
});
router.addHandler('detail', (res, cx) => cx.emit({ title: res.$('h1').text() }));

export default defineSpider({ name: 'books', startUrls: ['${site.url}/books/page/1'], parse: router });
`,
  );
  const r = await mocra(['run', 'books.ts', '--out', 'books.jsonl', '--no-progress'], { cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  const titles = readJsonl<{ title: string }>(path.join(dir, 'books.jsonl')).map((b) => b.title);
  expect(titles.sort()).toEqual(firstPageTitles());
});

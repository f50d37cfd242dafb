import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createChannelSink,
  createJsonlSink,
  defineSpider,
  type ItemMeta,
  Mocra,
  onItem,
} from '../src/index.js';

let site: FixtureSite;
let dir: string;
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 30, perPage: 10, categories: 3 } });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-sinks-'));
});
afterAll(async () => {
  await site.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const meta = (i: number): ItemMeta => ({
  itemId: `fp:${i}`,
  index: i,
  url: 'http://a.test/',
  module: 'm',
  node: 'n',
  runId: 'r',
});

/** Emits the 10 titles of each of the 3 listing pages. */
function titles(name = 'titles') {
  return defineSpider<{ title: string }>({
    name,
    startUrls: [`${site.url}/books/page/1`],
    parse(res, cx) {
      for (const el of res.$('article.product_pod h3 a').toArray()) cx.emit({ title: res.$(el).text() });
      const next = res.$('li.next a').attr('href');
      if (next) cx.follow(next);
    },
  });
}

describe('onItem', () => {
  test('gets every item with its meta', async () => {
    const metas: ItemMeta[] = [];
    await Mocra.builder()
      .spider(
        titles(),
        onItem((_item, m) => void metas.push(m)),
      )
      .run();
    expect(metas).toHaveLength(30);
    expect(new Set(metas.map((m) => m.itemId)).size).toBe(30);
    expect(metas.every((m) => m.module === 'titles' && m.node === 'spider')).toBe(true);
  });
});

describe('channel sink', () => {
  test('is an AsyncIterable that ends when the run ends', async () => {
    const sink = createChannelSink<{ title: string }>({ capacity: 4 });
    const run = Mocra.builder().spider(titles(), sink).run();
    const got: string[] = [];
    for await (const item of sink) got.push(item.title);
    const summary = await run;
    expect(got).toHaveLength(30);
    expect(summary.items).toBe(30);
  });

  test('a full buffer makes write wait for the reader (backpressure)', async () => {
    const sink = createChannelSink<number>({ capacity: 2 });
    await sink.write(1, meta(1));
    await sink.write(2, meta(2));
    let third = false;
    const pending = sink.write(3, meta(3)).then(() => {
      third = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(third).toBe(false);
    expect(sink.size).toBe(2);
    const it = sink.entries();
    expect((await it.next()).value).toEqual({ item: 1, meta: meta(1) });
    await pending;
    expect(third).toBe(true);
    sink.close();
    expect((await it.next()).value?.item).toBe(2);
    expect((await it.next()).value?.item).toBe(3);
    expect((await it.next()).done).toBe(true);
  });

  test('leaving the loop closes the channel: waiting and later writes fail with MOCRA_ERR_SINK_CLOSED', async () => {
    const sink = createChannelSink<number>({ capacity: 1 });
    await sink.write(1, meta(1));
    const second = sink.write(2, meta(2));
    const third = sink.write(3, meta(3));
    // Reading item 1 makes room for item 2; item 3 is still waiting when the reader leaves.
    for await (const _ of sink) break;
    await expect(second).resolves.toBeUndefined();
    await expect(third).rejects.toMatchObject({ code: 'MOCRA_ERR_SINK_CLOSED' });
    await expect(sink.write(4, meta(4))).rejects.toMatchObject({ code: 'MOCRA_ERR_SINK_CLOSED' });
  });

  test('rejects a bad capacity', () => {
    expect(() => createChannelSink({ capacity: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('JSON Lines sink', () => {
  test('writes one JSON document per line and closes the file at the end of the run', async () => {
    const file = path.join(dir, 'out', 'titles.jsonl');
    await Mocra.builder().spider(titles(), createJsonlSink(file)).run();
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(30);
    expect(lines.map((l) => JSON.parse(l) as { title: string }).every((b) => b.title.length > 0)).toBe(true);
  });

  test('withMeta adds itemId and url; append keeps earlier lines', async () => {
    const file = path.join(dir, 'meta.jsonl');
    await Mocra.builder()
      .spider(titles('a'), createJsonlSink(file, { withMeta: true }))
      .run();
    await Mocra.builder()
      .spider(titles('b'), createJsonlSink(file, { withMeta: true, append: true }))
      .run();
    const records = fs
      .readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { itemId: string; url: string; item: { title: string } });
    expect(records).toHaveLength(60);
    expect(records[0]).toMatchObject({
      itemId: expect.stringMatching(/:\d+$/),
      url: expect.stringContaining('/books/page/'),
    });
    // The same pages give the same item ids in both runs: a consumer can dedupe on them.
    expect(new Set(records.map((r) => r.itemId)).size).toBe(30);
  });

  test('a run without items still leaves an (empty) file', async () => {
    const file = path.join(dir, 'empty.jsonl');
    const spider = defineSpider({ name: 'none', startUrls: [`${site.url}/status/404`], parse() {} });
    await Mocra.builder().spider(spider, createJsonlSink(file)).run();
    expect(fs.readFileSync(file, 'utf8')).toBe('');
  });
});

// Module hooks around a run (Rust mocra's pre_process / post_process), on a real crawl of the
// fixture site: onRunStart before the entry nodes generate, onRunEnd once when the run's work
// ran out (after its last item) or it was stopped; a throwing onRunStart fails the task, which
// is retried; a throwing onRunEnd reaches the screen of the built bin with its stack.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ErrorEvent } from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineModule, defineSpider, Mocra, Request, RetryLaterError } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, mocra, tempDir } from './journeys/harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  site = await startFixtureSite();
  root = tempDir('run-hooks');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('onRunStart and onRunEnd on a module', () => {
  test('a list → detail run: start before the first generate, end once after the last item, per run', async () => {
    const events: string[] = [];
    const items: string[] = [];
    const shop = defineModule<string>({
      name: 'shop',
      onRunStart: (ctx) =>
        void events.push(`start ${ctx.runId} ${ctx.account} page=${String(ctx.params.page)}`),
      onRunEnd: (ctx) => void events.push(`end ${ctx.runId} items=${items.length} stopped=${ctx.stopped}`),
      nodes: [
        {
          id: 'list',
          generate(ctx) {
            events.push(`generate ${ctx.runId}`);
            return [new Request(`${site.url}/books/page/${String(ctx.params.page)}`)];
          },
          parse(res, cx) {
            for (const a of res.$('article.product_pod h3 a').toArray().slice(0, 3))
              cx.follow(a.attribs.href!, { node: 'detail' });
          },
        },
        { id: 'detail', parse: (res, cx) => cx.emit(res.$('h1').text()) },
      ],
    });
    const engine = Mocra.builder()
      .module(shop, (title) => void items.push(title))
      .engineOptions({ autoSeed: false })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await engine.submit({ module: 'shop', account: 'alice', params: { page: 1 }, runId: 'r1' });
    await engine.submit({ module: 'shop', account: 'alice', params: { page: 2 }, runId: 'r2' });
    const summary = await run;
    expect(summary.items).toBe(6);
    const of = (runId: string) => events.filter((e) => e.split(' ')[1] === runId);
    expect(of('r1')[0]).toBe('start r1 alice page=1');
    expect(of('r1')[1]).toBe('generate r1');
    expect(of('r2').slice(0, 2)).toEqual(['start r2 alice page=2', 'generate r2']);
    const ends = events.filter((e) => e.startsWith('end '));
    expect(ends.map((e) => e.split(' ')[1]).sort()).toEqual(['r1', 'r2']);
    // The run that ended last had seen every item; each ended after its own three.
    expect(ends.at(-1)).toMatch(/items=6 stopped=undefined$/);
    for (const e of ends) expect(Number(/items=(\d+)/.exec(e)![1])).toBeGreaterThanOrEqual(3);
  });

  test('a stopped run ends with the stop reason', async () => {
    const ends: (string | undefined)[] = [];
    await Mocra.builder()
      .spider(
        defineSpider<number>({
          name: 'stopper',
          startUrls: [`${site.url}/quotes/page/1`],
          onRunEnd: (ctx) => void ends.push(ctx.stopped),
          parse(_res, cx) {
            cx.enqueueLinks();
            cx.stop('enough after one page');
          },
        }),
        () => {},
      )
      .handleSignals(false)
      .run();
    expect(ends).toEqual(['enough after one page']);
  });

  test('onRunStart throwing RetryLaterError retries the task; a plain error dead-letters it, shown with its code', async () => {
    let calls = 0;
    const errors: ErrorEvent[] = [];
    const items: number[] = [];
    const summary = await Mocra.builder()
      .spider(
        defineSpider<number>({
          name: 'flaky-start',
          startUrls: [`${site.url}/quotes/page/1`],
          onRunStart() {
            calls++;
            if (calls === 1) throw new RetryLaterError('database not ready', 10);
          },
          parse: (res, cx) => cx.emit(res.status),
        }),
        (s) => void items.push(s),
      )
      .onError((e) => void errors.push(e))
      .handleSignals(false)
      .run();
    expect(calls).toBe(2);
    expect(items).toEqual([200]);
    expect(errors.map((e) => [e.code, e.stage])).toEqual([['MOCRA_ERR_RETRY_LATER', 'task']]);
    expect(summary.items).toBe(1);

    const broken: ErrorEvent[] = [];
    const failed = await Mocra.builder()
      .spider(
        defineSpider<number>({
          name: 'broken-start',
          startUrls: [`${site.url}/quotes/page/1`],
          onRunStart() {
            throw new Error('bad credentials');
          },
          parse: (res, cx) => cx.emit(res.status),
        }),
        () => {},
      )
      .onError((e) => void broken.push(e))
      .handleSignals(false)
      .run();
    expect(broken.map((e) => [e.code, e.stage])).toEqual([['MOCRA_ERR_RUN_HOOK_FAILED', 'task']]);
    expect(broken[0]!.message).toMatch(/onRunStart of broken-start \(run .+\) threw: bad credentials/);
    expect(failed).toMatchObject({ pages: 0, deadLettered: 1 });
  });
});

test('journey: a spider file whose onRunEnd throws shows the error and its stack; its items are kept', async () => {
  assertBuilt();
  const dir = path.join(root, 'spider');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'report.ts'),
    `import { defineSpider } from 'mocra';

function sendReport(): never {
  throw new Error('report server unreachable');
}

export default defineSpider<{ quotes: number }>({
  name: 'report',
  startUrls: ['${site.url}/quotes/page/1'],
  parse: (res, cx) => cx.emit({ quotes: res.$('div.quote').length }),
  onRunEnd: () => sendReport(),
});
`,
  );
  const r = await mocra(['run', 'report.ts', '--no-progress'], { cwd: dir });
  expect(r.stdout.trim()).toBe('{"quotes":10}');
  expect(r.stderr).toMatch(/onRunEnd of report \(run [^)]+\) threw: report server unreachable/);
  expect(r.stderr).toMatch(/at sendReport \(.*report\.ts:\d+:\d+\)/);
});

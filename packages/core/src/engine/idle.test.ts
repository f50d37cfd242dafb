// Idle detection: a run ends exactly when nothing is queued, delayed, leased or being seeded —
// never early while work hides in a handler or a delay, and never late (no idle timer).
//
// These tests use an in-process downloader that answers from a function (a real Downloader
// implementation, no network), so the timing of work is fully under the test's control. The
// HTTP path is covered by the downloader tests and packages/core/test/engine.test.ts.
import { describe, expect, test } from 'vitest';
import type { Downloader } from '../downloader/types.js';
import { RetryLaterError } from '../errors.js';
import { Request } from '../model/request.js';
import { Response } from '../model/response.js';
import type { Module } from '../module/types.js';
import { createEngine, type EngineOptions } from './engine.js';

/** Answers every request with the body `answer(url)` returns (after `delayMs`, if any). */
function inProcessDownloader(answer: (url: string) => string | Error, delayMs = 0): Downloader {
  return {
    name: 'in-process',
    async download(request) {
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      const body = answer(request.url);
      if (body instanceof Error) throw body;
      return new Response({ url: request.url, status: 200, headers: {}, body: Buffer.from(body), request });
    },
    async close() {},
  };
}

function chainModule(length: number, parseDelayMs = 0): Module<number> {
  return {
    name: 'chain',
    nodes: [
      {
        id: 'n',
        generate: () => [new Request('http://chain.test/0')],
        async parse(res, cx) {
          const n = Number(res.url.split('/').pop());
          if (parseDelayMs > 0) await new Promise((r) => setTimeout(r, parseDelayMs));
          cx.emit(n);
          if (n + 1 < length) cx.follow(`/${n + 1}`);
        },
      },
    ],
  };
}

function engine(options: EngineOptions = {}) {
  return createEngine({ downloader: inProcessDownloader(() => 'ok'), ...options });
}

describe('idle detection', () => {
  test('a strictly sequential chain (one message alive at a time) runs to its end', async () => {
    const items: number[] = [];
    const summary = await engine()
      .register(chainModule(60), { write: (n) => void items.push(n) })
      .run();
    expect(summary).toMatchObject({ reason: 'idle', pages: 60, items: 60, pending: 0 });
    expect(items).toEqual(Array.from({ length: 60 }, (_, i) => i));
  });

  test('work hidden in slow handlers keeps the run alive', async () => {
    const summary = await engine({ downloader: inProcessDownloader(() => 'ok', 20) })
      .register(chainModule(5, 30), { write() {} })
      .run();
    expect(summary).toMatchObject({ reason: 'idle', pages: 5, items: 5 });
  });

  test('only delayed retries left: the run waits for them', async () => {
    let failures = 0;
    const downloader = inProcessDownloader((url) =>
      url.endsWith('/3') && failures++ < 2 ? new RetryLaterError('come back', 80) : 'ok',
    );
    const summary = await engine({ downloader })
      .register(chainModule(6), { write() {} })
      .run();
    expect(summary).toMatchObject({ reason: 'idle', pages: 6, items: 6, retries: 2, pending: 0 });
    expect(summary.errorsByCode).toEqual({ MOCRA_ERR_RETRY_LATER: 2 });
  });

  test('a run started paused does not end; resume ends it', async () => {
    const e = engine().register(chainModule(1), { write() {} });
    e.pause();
    const running = e.run();
    let ended = false;
    void running.then(() => {
      ended = true;
    });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    expect(e.state).toBe('running');
    expect((await e.stats()).stages.task.queued).toBe(1);
    e.resume();
    expect(await running).toMatchObject({ reason: 'idle', pages: 1 });
  });

  test('paused with nothing queued at all, the run waits; resume ends it', async () => {
    const e = engine({ autoSeed: false }).register(chainModule(1), { write() {} });
    e.pause();
    const running = e.run();
    let ended = false;
    void running.then(() => {
      ended = true;
    });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    e.resume();
    expect(await running).toMatchObject({ reason: 'idle', pages: 0 });
  });

  test('submit() adds work to a running engine; autoSeed: false starts empty and ends at once', async () => {
    const empty = await engine({ autoSeed: false })
      .register(chainModule(3), { write() {} })
      .run();
    expect(empty).toMatchObject({ reason: 'idle', pages: 0 });

    const e = engine({ autoSeed: false }).register(chainModule(3), { write() {} });
    const submitted = e.submit({ module: 'chain' });
    const summary = await e.run();
    await submitted;
    expect(summary).toMatchObject({ reason: 'idle', pages: 3 });
    await expect(e.submit({ module: 'chain' })).rejects.toMatchObject({ code: 'MOCRA_ERR_ENGINE_STATE' });
  });
});

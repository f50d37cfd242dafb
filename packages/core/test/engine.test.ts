import diagnostics_channel from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  attachEngineTelemetry,
  CriticalError,
  createEngine,
  createMemoryQueueBackend,
  createMetrics,
  type DataSink,
  type EngineOptions,
  type ErrorEvent,
  type ItemMeta,
  type Module,
  type ParseContext,
  type PolicyDecision,
  Request,
  type Response,
  TOPICS,
} from '../src/index.js';
import { startTestSite, type TestSite, TREE_PAGES, treeChildren } from './helpers/site.js';

let site: TestSite;
beforeAll(async () => {
  site = await startTestSite();
});
afterAll(async () => {
  await site.close();
});

interface Page {
  path: string;
  title: string;
}

function collect<T>(): DataSink<T> & { items: T[]; metas: ItemMeta[]; closed: number } {
  const sink = {
    items: [] as T[],
    metas: [] as ItemMeta[],
    closed: 0,
    write(item: T, meta: ItemMeta) {
      sink.items.push(item);
      sink.metas.push(meta);
    },
    close() {
      sink.closed++;
    },
  };
  return sink;
}

/** Crawls the test site's tree: one item per page, follows every link (duplicates included). */
function treeModule(
  name = 'tree',
  extra: (res: Response, cx: ParseContext<Page>) => void | Promise<void> = () => {},
): Module<Page> {
  return {
    name,
    nodes: [
      {
        id: 'page',
        generate: () => [new Request(`${site.url}/t/0`)],
        async parse(res, cx) {
          const $ = res.$;
          cx.emit({ path: $('h1').text(), title: $('title').text() });
          for (const a of $('a').toArray()) cx.follow($(a).attr('href')!);
          await extra(res, cx);
        },
      },
    ],
  };
}

function engine(options: EngineOptions = {}) {
  return createEngine({ retry: { baseDelayMs: 5, maxDelayMs: 20 }, ...options });
}

describe('Engine: a crawl end to end', () => {
  test('crawls every page once, emits one item per page and ends on its own when idle', async () => {
    const sink = collect<Page>();
    const e = engine({ concurrency: 4 }).register(treeModule(), sink);
    const summary = await e.run();
    expect(summary.reason).toBe('idle');
    expect(summary.pending).toBe(0);
    expect(summary.pages).toBe(TREE_PAGES);
    expect(summary.items).toBe(TREE_PAGES);
    expect(summary.errors).toBe(0);
    expect(sink.items).toHaveLength(TREE_PAGES);
    expect(new Set(sink.items.map((p) => p.path)).size).toBe(TREE_PAGES);
    // Every page links to the root and to itself: dedup keeps each URL to one fetch.
    expect(summary.frontier.admitted).toBe(TREE_PAGES);
    expect(summary.frontier.duplicates).toBe(TREE_PAGES * 2);
    expect(sink.closed).toBe(1);
    expect(e.state).toBe('stopped');
    expect(summary.stages.download.done).toBe(TREE_PAGES);
    expect(summary.stages.parse.done).toBe(TREE_PAGES);
  });

  test('every item has a stable itemId: request fingerprint + position in its parse', async () => {
    const sink = collect<{ n: number }>();
    const mod: Module<{ n: number }> = {
      name: 'ids',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/t/0`)],
          parse(_res, cx) {
            for (let n = 0; n < 3; n++) cx.emit({ n });
          },
        },
      ],
    };
    await engine().register(mod, sink).run();
    const fp = sink.metas[0]!.itemId.split(':')[0]!;
    expect(fp).toMatch(/^[A-Za-z0-9_-]{27}$/);
    expect(sink.metas.map((m) => m.itemId)).toEqual([`${fp}:0`, `${fp}:1`, `${fp}:2`]);
    expect(sink.metas[0]).toMatchObject({ url: `${site.url}/t/0`, module: 'ids', node: 'n', index: 0 });
  });

  test('follow keeps method, headers, body and meta; relative URLs resolve against the response URL', async () => {
    const sink = collect<unknown>();
    const mod: Module<unknown> = {
      name: 'follow',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/t/0`)],
          parse(res, cx) {
            if (res.url.endsWith('/t/0')) {
              cx.follow(
                new Request('../echo?x=1', {
                  method: 'PUT',
                  headers: { 'x-custom': 'yes', 'content-type': 'text/plain' },
                  body: 'payload',
                  meta: { page: 7 },
                }),
              );
              return;
            }
            cx.emit({ echo: res.json(), meta: cx.meta, depth: cx.depth });
          },
        },
      ],
    };
    await engine().register(mod, sink).run();
    expect(sink.items).toEqual([
      {
        echo: expect.objectContaining({
          method: 'PUT',
          body: 'payload',
          path: '/echo?x=1',
          headers: expect.objectContaining({ 'x-custom': 'yes' }),
        }),
        meta: { page: 7 },
        depth: 1,
      },
    ]);
  });

  test('a seed task with nothing to do ends at once', async () => {
    const mod: Module = { name: 'empty', nodes: [{ id: 'n', generate: () => [], parse() {} }] };
    const summary = await engine().register(mod, collect()).run();
    expect(summary).toMatchObject({ reason: 'idle', pages: 0, items: 0, pending: 0 });
  });

  test('maxPages and maxDepth bound the crawl', async () => {
    const limited = await engine({ frontier: { maxPages: 5 } })
      .register(treeModule(), collect())
      .run();
    expect(limited.pages).toBe(5);
    expect(limited.frontier.overLimit).toBeGreaterThan(0);
    const shallow = await engine({ frontier: { maxDepth: 1 } })
      .register(treeModule(), collect())
      .run();
    expect(shallow.pages).toBe(1 + 3);
  });

  test('follow-ups can name another node of the module', async () => {
    const sink = collect<string>();
    const mod: Module<string> = {
      name: 'two-nodes',
      nodes: [
        {
          id: 'list',
          generate: () => [new Request(`${site.url}/t/0`)],
          parse(_res, cx) {
            for (const child of treeChildren('0')) cx.follow(`/t/${child}`, { node: 'detail' });
          },
        },
        {
          id: 'detail',
          parse(res, cx) {
            cx.emit(`detail:${res.$('h1').text()}`);
          },
        },
      ],
    };
    await engine().register(mod, sink).run();
    expect(sink.items.sort()).toEqual(['detail:0-0', 'detail:0-1', 'detail:0-2']);
  });
});

describe('Engine: failures are reported with typed errors and the crawl goes on', () => {
  function errorsOf(options: EngineOptions = {}) {
    const events: { event: ErrorEvent; decision: PolicyDecision }[] = [];
    return {
      events,
      options: {
        ...options,
        onError: (event: ErrorEvent, decision: PolicyDecision) => events.push({ event, decision }),
      },
    };
  }

  test('retryable statuses are retried with backoff; the run waits for delayed retries', async () => {
    const sink = collect<string>();
    const { events, options } = errorsOf();
    const mod: Module<string> = {
      name: 'flaky',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/flaky/a?n=2`), new Request(`${site.url}/flaky/b?n=1`)],
          parse(res, cx) {
            cx.emit(`${res.status}:${res.text()}`);
          },
        },
      ],
    };
    const summary = await engine({ ...options, retry: { baseDelayMs: 30, maxDelayMs: 60 } })
      .register(mod, sink)
      .run();
    expect(summary).toMatchObject({
      reason: 'idle',
      pending: 0,
      pages: 2,
      items: 2,
      errors: 3,
      retries: 3,
      deadLettered: 0,
    });
    expect(sink.items.sort()).toEqual(['200:ok after 1 failures', '200:ok after 2 failures']);
    expect(events.map((e) => e.event.code)).toEqual([
      'MOCRA_ERR_HTTP_STATUS',
      'MOCRA_ERR_HTTP_STATUS',
      'MOCRA_ERR_HTTP_STATUS',
    ]);
    expect(events.map((e) => e.decision.action)).toEqual(['retry', 'retry', 'retry']);
    const attemptsOfA = events.filter((e) => e.event.url?.includes('/flaky/a')).map((e) => e.event.attempt);
    expect(attemptsOfA).toEqual([1, 2]);
  });

  test('after the last retry a failing status reaches parse; a dead host is dead-lettered', async () => {
    const sink = collect<number>();
    const { events, options } = errorsOf();
    const mod: Module<number> = {
      name: 'dead',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/status/500`), new Request('http://127.0.0.1:1/')],
          parse(res, cx) {
            cx.emit(res.status);
          },
        },
      ],
    };
    const e = engine({ ...options, retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 5 } }).register(
      mod,
      sink,
    );
    const summary = await e.run();
    expect(sink.items).toEqual([500]);
    expect(summary.errorsByCode).toEqual({ MOCRA_ERR_HTTP_STATUS: 2, MOCRA_ERR_CONNECTION: 3 });
    expect(summary.deadLettered).toBe(1);
    const last = events.filter((e) => e.event.code === 'MOCRA_ERR_CONNECTION').at(-1)!;
    expect(last.event).toMatchObject({ attempt: 3, stage: 'download', url: 'http://127.0.0.1:1/' });
    expect(last.decision.action).toBe('dead-letter');
  });

  test('the dead-lettered failure keeps its payload, error and attempts in the error topic DLQ', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'dlq-test' });
    const mod: Module = {
      name: 'dlq',
      nodes: [{ id: 'n', generate: () => [new Request('http://127.0.0.1:1/x')], parse() {} }],
    };
    await engine({ queue, retry: { maxRetries: 1, baseDelayMs: 1 } })
      .register(mod, collect())
      .run();
    const letters = await queue.topic<ErrorEvent>(TOPICS.error).deadLetters.list();
    expect(letters).toHaveLength(1);
    expect(letters[0]!.payload).toMatchObject({
      code: 'MOCRA_ERR_CONNECTION',
      attempt: 2,
      stage: 'download',
      topic: 'request',
    });
    expect((letters[0]!.payload!.payload as Request).url).toBe('http://127.0.0.1:1/x');
    await queue.close();
  });

  test("an error event written under the follow-up stage's former name is handled as followUp", async () => {
    const queue = createMemoryQueueBackend({ namespace: 'legacy-stage' });
    const followUp = { module: 'legacy', node: 'n', runId: 'old-run', requests: [], meta: {}, depth: 1 };
    // What a run persisted before the rename left on its error topic.
    const legacy = {
      stage: 'parserTask',
      topic: TOPICS.followUp,
      payload: followUp,
      code: 'MOCRA_ERR_GENERATE_FAILED',
      message: 'generate threw',
      retryable: false,
      attempt: 1,
      at: 0,
      priority: 0,
    };
    await queue.topic(TOPICS.error).publish([{ payload: legacy }]);
    const stages: string[] = [];
    const mod: Module = { name: 'legacy', nodes: [{ id: 'n', generate: () => [], parse() {} }] };
    const e = engine({ queue, runId: 'old-run', onError: (event) => stages.push(event.stage) });
    const metrics = createMetrics({ node: 't', processMetrics: false, system: false });
    attachEngineTelemetry(e, { metrics });
    await e.register(mod, collect()).run();
    expect(stages).toEqual(['followUp']);
    expect(
      await metrics.value('mocra_errors_total', { stage: 'follow_up', code: 'MOCRA_ERR_GENERATE_FAILED' }),
    ).toBe(1);
    await queue.close();
  });

  test('a parse that throws is reported (not retried) and the other pages go on', async () => {
    const sink = collect<Page>();
    const { events, options } = errorsOf();
    const mod = treeModule('throws', (res) => {
      if (res.url.endsWith('/t/0-1')) throw new TypeError('cannot read that page');
    });
    const summary = await engine(options).register(mod, sink).run();
    expect(events).toHaveLength(1);
    expect(events[0]!.event).toMatchObject({
      code: 'MOCRA_ERR_PARSE_FAILED',
      stage: 'parse',
      url: `${site.url}/t/0-1`,
    });
    expect(events[0]!.decision.action).toBe('dead-letter');
    // The failed page's items and follow-ups are not used: its 3 children are never found.
    expect(summary.items).toBe(TREE_PAGES - 1 - 3 - 9);
    expect(summary.reason).toBe('idle');
  });

  // A parse-stage failure retries the parse from the response (through the response topic),
  // not the download: also when the response was parsed where it was downloaded.
  test.each([false, true])(
    'a sink that throws is retried from the response, not fetched again; items keep their ids (parseWhereDownloaded %s)',
    async (parseWhereDownloaded) => {
      let failures = 0;
      const written: string[] = [];
      const sink: DataSink<Page> = {
        write(item, meta) {
          if (item.path === '0-2' && failures < 1) {
            failures++;
            throw new Error('disk full');
          }
          written.push(meta.itemId);
        },
      };
      const fetched: string[] = [];
      const listener = (msg: unknown) => fetched.push((msg as { request: Request }).request.url);
      diagnostics_channel.subscribe('mocra:downloader:request', listener);
      try {
        const { events, options } = errorsOf();
        const summary = await engine({ ...options, parseWhereDownloaded })
          .register(treeModule('sinky'), sink)
          .run();
        expect(events.map((e) => [e.event.code, e.decision.action])).toEqual([
          ['MOCRA_ERR_SINK_FAILED', 'retry'],
        ]);
        expect(summary.items).toBe(TREE_PAGES);
        expect(new Set(written).size).toBe(TREE_PAGES);
        expect(fetched.filter((u) => u.endsWith('/t/0-2'))).toHaveLength(1);
        expect(fetched).toHaveLength(TREE_PAGES);
      } finally {
        diagnostics_channel.unsubscribe('mocra:downloader:request', listener);
      }
    },
  );

  test('invalid seed and follow URLs are reported as MOCRA_ERR_INVALID_URL', async () => {
    const { events, options } = errorsOf();
    const mod: Module<string> = {
      name: 'bad-urls',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request('not a url'), new Request(`${site.url}/t/0-0-0`)],
          parse(res, cx) {
            expect(cx.follow('mailto:someone@example.com')).toBeUndefined();
            cx.follow('http://[bad');
            cx.emit(res.url);
          },
        },
      ],
    };
    const sink = collect<string>();
    const summary = await engine(options).register(mod, sink).run();
    expect(sink.items).toEqual([`${site.url}/t/0-0-0`]);
    expect(events.map((e) => e.event.code)).toEqual([
      'MOCRA_ERR_INVALID_URL',
      'MOCRA_ERR_INVALID_URL',
      'MOCRA_ERR_INVALID_URL',
    ]);
    expect(events.every((e) => e.decision.action === 'dead-letter')).toBe(true);
    expect(summary.reason).toBe('idle');
  });

  test('a generate that throws, and a follow to an unknown node', async () => {
    const { events, options } = errorsOf();
    const broken: Module = {
      name: 'broken',
      nodes: [
        {
          id: 'n',
          generate: () => {
            throw new Error('no seeds today');
          },
          parse() {},
        },
      ],
    };
    const lost: Module = {
      name: 'lost',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/t/0`)],
          parse(_res, cx) {
            cx.follow('/t/0-0', { node: 'nowhere' });
          },
        },
      ],
    };
    const summary = await engine(options).register(broken, collect()).register(lost, collect()).run();
    expect(events.map((e) => e.event.code).sort()).toEqual([
      'MOCRA_ERR_GENERATE_FAILED',
      'MOCRA_ERR_UNKNOWN_MODULE',
    ]);
    expect(summary.reason).toBe('idle');
  });

  test('a CriticalError stops the run cleanly', async () => {
    const mod = treeModule('critical', () => {
      throw new CriticalError('stop everything');
    });
    const summary = await engine({ concurrency: 1, stages: { parse: 1 } })
      .register(mod, collect())
      .run();
    expect(summary.reason).toBe('critical');
    expect(summary.deadLettered).toBe(1);
  });

  test('failures are published on mocra:engine:error', async () => {
    const seen: string[] = [];
    const listener = (msg: unknown) => seen.push((msg as { event: ErrorEvent }).event.code);
    diagnostics_channel.subscribe('mocra:engine:error', listener);
    try {
      const mod: Module = {
        name: 'chan',
        nodes: [{ id: 'n', generate: () => [new Request('bad')], parse() {} }],
      };
      await engine().register(mod, collect()).run();
    } finally {
      diagnostics_channel.unsubscribe('mocra:engine:error', listener);
    }
    expect(seen).toEqual(['MOCRA_ERR_INVALID_URL']);
  });
});

describe('Engine: control', () => {
  test('pause stops progress; resume finishes the crawl with exact counts', async () => {
    const sink = collect<Page>();
    let paused = false;
    let e: ReturnType<typeof engine>;
    const mod = treeModule('pausing', () => {
      if (!paused) {
        paused = true;
        e.pause();
      }
    });
    e = engine({ concurrency: 2 }).register(mod, sink);
    const running = e.run();
    // Wait until the pause has taken effect and everything in flight has settled.
    for (;;) {
      const s = await e.stats();
      const inFlight = Object.values(s.stages).reduce((n, st) => n + st.inFlight, 0);
      if (paused && inFlight === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const before = await e.stats();
    await new Promise((r) => setTimeout(r, 100));
    const after = await e.stats();
    expect(after.pages).toBe(before.pages);
    expect(after.items).toBe(before.items);
    expect(after.paused).toBe(true);
    expect(before.pages).toBeLessThan(TREE_PAGES);
    e.resume();
    const summary = await running;
    expect(summary).toMatchObject({ reason: 'idle', pages: TREE_PAGES, items: TREE_PAGES });
  });

  test('stop() mid-crawl: in-flight work finishes, the rest stays queued', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'stop-test' });
    let stopAt = 5;
    let e: ReturnType<typeof engine>;
    const stopped: Promise<unknown>[] = [];
    const mod = treeModule('stopping', () => {
      if (--stopAt === 0) stopped.push(e.stop());
    });
    e = engine({ queue, concurrency: 2 }).register(mod, collect());
    const summary = await e.run();
    expect(summary.reason).toBe('stopped');
    expect(summary.pending).toBeGreaterThan(0);
    // Nothing admitted is lost: each admitted URL was either parsed or is still on a topic.
    const left = { request: 0, response: 0 };
    left.request = (await queue.topic(TOPICS.request).consume({ max: 1000, waitMs: 0 })).length;
    left.response = (await queue.topic(TOPICS.response).consume({ max: 1000, waitMs: 0 })).length;
    const followUps = await queue.topic(TOPICS.followUp).stats();
    expect(summary.stages.parse.done + left.request + left.response).toBe(summary.frontier.admitted);
    expect(followUps.ready + summary.stages.parse.done).toBeGreaterThan(0);
    await queue.close();
  });

  test('run() twice and register() after run() fail with MOCRA_ERR_ENGINE_STATE', async () => {
    const e = engine().register({ name: 'x', nodes: [{ id: 'n', parse() {} }] }, collect());
    const run = e.run();
    expect(() => e.run()).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_ENGINE_STATE' }));
    expect(() => e.register({ name: 'y', nodes: [{ id: 'n', parse() {} }] }, collect())).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_ENGINE_STATE' }),
    );
    await run;
  });

  test('bad registrations and options fail with MOCRA_ERR_INVALID_ARGUMENT', () => {
    const bad = (fn: () => unknown) =>
      expect(fn).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }));
    bad(() => engine({ concurrency: 0 }));
    bad(() => engine({ stages: { parse: -1 } }));
    bad(() => engine().register({ name: '', nodes: [{ id: 'n', parse() {} }] }, collect()));
    // A module whose node graph cannot run is its own code (MOCRA_ERR_INVALID_MODULE).
    const badModule = (fn: () => unknown) =>
      expect(fn).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_INVALID_MODULE' }));
    badModule(() => engine().register({ name: 'm', nodes: [] }, collect()));
    badModule(() =>
      engine().register({ name: 'm', nodes: [{ id: 'n', parse() {} }], entry: ['zz'] }, collect()),
    );
    bad(() => engine().register({ name: 'm', nodes: [{ id: 'n', parse() {} }] }, {} as DataSink<unknown>));
    const e = engine().register({ name: 'm', nodes: [{ id: 'n', parse() {} }] }, collect());
    bad(() => e.register({ name: 'm', nodes: [{ id: 'n', parse() {} }] }, collect()));
  });

  test("a stage's former name is refused with the name that does its job now", async () => {
    // As a JavaScript caller (or an old config object) passes them: the type system would refuse them.
    const old = JSON.parse('{"parserTask": 3}') as Record<string, number>;
    for (const group of ['stages', 'topics', 'watchdog'] as const) {
      expect(() => engine({ [group]: group === 'topics' ? { parserTask: { capacity: 3 } } : old })).toThrow(
        expect.objectContaining({
          code: 'MOCRA_ERR_INVALID_ARGUMENT',
          message: `${group}.parserTask was renamed: use ${group}.followUp`,
        }),
      );
    }
    const e = engine({ stages: { followUp: 3 } });
    expect((await e.stats()).stages.followUp.concurrency).toBe(3);
    expect(() => e.setConcurrency('parserTask' as never, 5)).toThrow(
      expect.objectContaining({
        code: 'MOCRA_ERR_INVALID_ARGUMENT',
        message: "stage 'parserTask' was renamed: use 'followUp'",
      }),
    );
    e.setConcurrency('followUp', 5);
    expect((await e.stats()).stages.followUp.concurrency).toBe(5);
  });

  // Parsed where downloaded (the default), the response being parsed never enters the topic and
  // its download stays in flight (leased) until the parse is done: one more download in flight,
  // and the topic holds two responses instead of one beside the parse. Either way, once
  // everything is full no download starts although work is waiting.
  test.each([
    { parseWhereDownloaded: false, downloading: 4, held: 1 },
    { parseWhereDownloaded: true, downloading: 5, held: 2 },
  ])(
    'backpressure: a blocked sink stops downloads once the response topic is full (parseWhereDownloaded $parseWhereDownloaded)',
    async ({ parseWhereDownloaded, downloading, held }) => {
      let release!: () => void;
      const blocked = new Promise<void>((r) => {
        release = r;
      });
      const started: string[] = [];
      const listener = (msg: unknown) => started.push((msg as { request: Request }).request.url);
      diagnostics_channel.subscribe('mocra:downloader:request', listener);
      // Pages of depth 0–2 go through; the first leaf (depth 3) parsed blocks in the sink. The
      // request queue is FIFO, so by then every page of depth ≤ 2 has started, and each parsed
      // page of depth 2 discovered three leaves: more are discovered than can have started.
      const sink: DataSink<Page> = {
        write: (item) => (item.path.split('-').length >= 4 ? blocked : undefined),
      };
      const e = engine({
        concurrency: 4,
        stages: { parse: 1 },
        topics: { response: { capacity: 2 } },
        parseWhereDownloaded,
      }).register(treeModule('pressure'), sink);
      try {
        const running = e.run();
        // Steady state: parse holds one response (blocked in the sink), `held` more wait on the
        // topic, four downloads wait to publish theirs.
        for (;;) {
          const s = await e.stats();
          if (
            s.stages.download.inFlight === downloading &&
            s.stages.parse.inFlight === 1 &&
            started.length === s.stages.parse.done + 1 + held + 4
          )
            break;
          await new Promise((r) => setTimeout(r, 10));
        }
        const atSteadyState = started.length;
        await new Promise((r) => setTimeout(r, 150));
        const s = await e.stats();
        // Work is waiting, yet no download starts: each started one is parsed, held by parse,
        // waiting on the full response topic, or blocked publishing to it.
        expect(s.stages.download.queued).toBeGreaterThan(0);
        expect(started.length).toBe(atSteadyState);
        expect(atSteadyState).toBe(s.stages.parse.done + 1 + held + 4);
        release();
        const summary = await running;
        expect(summary).toMatchObject({ reason: 'idle', pages: TREE_PAGES, items: TREE_PAGES });
      } finally {
        diagnostics_channel.unsubscribe('mocra:downloader:request', listener);
        release();
      }
    },
  );
});

// Downloaders selected by name per spider, module and request (no database), the default
// replaced, health checks, close on shutdown, and the two downloader examples run as documented.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { type Downloader, defineSpider, Mocra, Request, Response } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

const root = path.resolve(import.meta.dirname, '../../..');

/** Answers every request with a page naming itself, and counts what it served. */
function labelled(name: string): Downloader & { served: string[]; closed: number } {
  const d = {
    name,
    served: [] as string[],
    closed: 0,
    async download(request: Request) {
      d.served.push(request.url);
      return new Response({
        url: request.url,
        status: 200,
        headers: { 'content-type': 'text/html; charset=utf-8' },
        body: Buffer.from(`<h1>${name}</h1>`),
        request,
      });
    },
    async close() {
      d.closed++;
    },
  };
  return d;
}

describe('selecting downloaders by name', () => {
  test('request choice beats the spider’s, which beats the default; each is closed once at the end', async () => {
    const alpha = labelled('alpha');
    const beta = labelled('beta');
    const seen: Record<string, string> = {};
    const spider = defineSpider<[string, string]>({
      name: 'mixed',
      downloader: 'alpha',
      start(seeds) {
        seeds.get(`${site.url}/a`); // the spider's: alpha
        seeds.get(`${site.url}/b`, { downloader: 'beta' }); // its own: beta
        seeds.get(`${site.url}/quotes/page/1`, { downloader: 'default' }); // the default: HTTP
      },
      parse(res, cx) {
        cx.emit([new URL(res.url).pathname, res.$('h1').first().text()]);
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, ([p, h]) => {
        seen[p] = h;
      })
      .downloader(alpha)
      .downloader(beta)
      .handleSignals(false)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 3 });
    expect(seen['/a']).toBe('alpha');
    expect(seen['/b']).toBe('beta');
    // The default HTTP downloader really fetched that one from the fixture site.
    expect(['alpha', 'beta']).not.toContain(seen['/quotes/page/1']);
    expect(site.stats().log.map((e) => e.url)).toContain('/quotes/page/1');
    expect(alpha.served).toEqual([`${site.url}/a`]);
    expect(beta.served).toEqual([`${site.url}/b`]);
    expect([alpha.closed, beta.closed]).toEqual([1, 1]);
  });

  test('.defaultDownloader replaces the HTTP downloader for every request that names none', async () => {
    const offline = labelled('offline');
    const seen: string[] = [];
    await Mocra.builder()
      .spider(
        defineSpider<string>({
          name: 'offline',
          startUrls: ['https://nowhere.example/x', 'https://nowhere.example/y'],
          parse: (res, cx) => cx.emit(res.$('h1').text()),
        }),
        (h) => void seen.push(h),
      )
      .defaultDownloader(offline)
      .handleSignals(false)
      .run();
    expect(seen).toEqual(['offline', 'offline']);
    expect(offline.closed).toBe(1);
  });

  test('an unknown name: at build time for a spider, a dead-lettered request for a request', async () => {
    expect(() =>
      Mocra.builder()
        .spider(
          defineSpider({ name: 'typo', downloader: 'browsr', startUrls: [`${site.url}/`], parse() {} }),
          () => {},
        )
        .build(),
    ).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_UNKNOWN_DOWNLOADER' }));

    const summary = await Mocra.builder()
      .spider(
        defineSpider({
          name: 'request-typo',
          start(seeds) {
            seeds.add(new Request(`${site.url}/`, { downloader: 'nope' }));
          },
          parse() {},
        }),
        () => {},
      )
      .handleSignals(false)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', deadLettered: 1, retries: 0 });
    expect(summary.errorsByCode).toEqual({ MOCRA_ERR_UNKNOWN_DOWNLOADER: 1 });
  });

  test('the engine reports every downloader’s health', async () => {
    const healthy = { ...labelled('healthy'), healthCheck: async () => undefined };
    const broken = {
      ...labelled('broken'),
      healthCheck: async () => {
        throw new Error('upstream API key expired');
      },
    };
    const engine = Mocra.builder()
      .spider(defineSpider({ name: 'h', startUrls: [`${site.url}/`], parse() {} }), () => {})
      .downloader(healthy)
      .downloader(broken)
      .handleSignals(false)
      .build();
    const health = await engine.downloaders.checkHealth();
    expect(health.map((h) => [h.name, h.healthy, h.checked])).toEqual([
      ['default', true, false],
      ['healthy', true, true],
      ['broken', false, true],
    ]);
    expect(health[2]?.error?.message).toBe('upstream API key expired');
    expect(engine.downloaders.stats().downloaders).toEqual(['default', 'http', 'healthy', 'broken']);
    await engine.run();
  });
});

describe('downloader examples', () => {
  const run = (file: string) =>
    spawnSync(
      process.execPath,
      ['--import', 'tsx', '--conditions=@mocra/source', path.join(root, 'examples', file)],
      {
        cwd: root,
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, MOCRA_DISABLE_LOGS: '1' },
      },
    );

  test('examples/custom-downloader.ts crawls its in-memory site, the same way every time', () => {
    const first = run('custom-downloader.ts');
    expect(first.status).toBe(0);
    expect(first.stdout).toBe(
      [
        'missing: https://shop.example/item/4',
        'memory downloader closed after serving 5 requests',
        'Kettle   24.00',
        'Mug      8.75',
        'Teapot   31.50',
        '5 pages, 3 items, 0 errors (idle)',
        '',
      ].join('\n'),
    );
    expect(run('custom-downloader.ts').stdout).toBe(first.stdout);
  });

  test('examples/browser-rendering.ts renders every JavaScript-only page', () => {
    const result = run('browser-rendering.ts');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^screenshot of page 1: .*mocra-quotes-page-1\.png \(\d+ bytes\)$/m);
    expect(result.stdout).toContain('10 pages rendered, 100 quotes by 20 authors');
  });
});

// `.dashboard()` on the facade: the API is up for the run and gone after it, and a port that
// cannot be bound ends start-up with ApiBindError before any work is taken — also in a separate
// process, which exits instead of running on headless (upstream's bind-failure bug).
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');

let site: FixtureSite;
let blocker: net.Server;
let busyPort: number;

beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 20, categories: 2, perPage: 10 } });
  blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  busyPort = (blocker.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  await site.close();
});

const books = () =>
  defineSpider<{ title: string }>({
    name: 'books',
    startUrls: [`${site.url}/books/page/1`],
    parse(res, cx) {
      for (const a of res.$('h3 a').toArray()) cx.emit({ title: res.$(a).attr('title') ?? '' });
    },
  });

test('the API serves during the run, reports its metrics, and closes when the run ends', async () => {
  let url = '';
  let metricsDuringRun = '';
  const items: unknown[] = [];
  const summary = await Mocra.builder()
    .spider(books(), async (item) => {
      items.push(item);
      if (items.length === 1) metricsDuringRun = await (await fetch(`${url}/metrics`)).text();
    })
    .handleSignals(false)
    .dashboard(0, {
      node: 'facade-test',
      onListen: (u) => {
        url = u;
      },
    })
    .run();
  expect(summary.reason).toBe('idle');
  expect(items).toHaveLength(10);
  expect(metricsDuringRun).toContain('mocra_node_up{node="facade-test"} 1');
  expect(metricsDuringRun).toContain('mocra_component_health{component="api",node="facade-test"} 1');
  // Once the run is over the port is free again.
  await expect(fetch(`${url}/health`)).rejects.toThrow();
});

test('a busy port fails run() with MOCRA_ERR_API_BIND and no request reaches the site', async () => {
  site.resetStats();
  const attempt = Mocra.builder()
    .spider(books(), () => {})
    .handleSignals(false)
    .dashboard(busyPort)
    .run();
  await expect(attempt).rejects.toMatchObject({
    name: 'ApiBindError',
    code: 'MOCRA_ERR_API_BIND',
    port: busyPort,
  });
  expect(site.stats().requests).toBe(0);
});

test('a process whose dashboard cannot bind exits with the typed error instead of running on', async () => {
  site.resetStats();
  const script = `
    import { defineSpider, Mocra } from 'mocra';
    const spider = defineSpider({ name: 'books', startUrls: [${JSON.stringify(`${site.url}/books/page/1`)}], parse() {} });
    try {
      await Mocra.builder().spider(spider, () => {}).dashboard(${busyPort}).run();
      console.log('ran');
    } catch (err) {
      console.error(err.code + ': ' + err.message);
      process.exitCode = 1;
    }
  `;
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', '--input-type=module', '-e', script],
    { cwd: path.join(root, 'packages/tests'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect(stdout).toBe('');
  expect(code).toBe(1);
  expect(stderr).toContain(`MOCRA_ERR_API_BIND: the control API cannot listen on 127.0.0.1:${busyPort}`);
  expect(stderr).toContain('already in use');
  expect(site.stats().requests).toBe(0);
}, 30_000);

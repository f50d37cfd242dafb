// Journey: one crawl spread over two `mocra crawl` processes on a shared queue, one of them
// killed with SIGKILL while it is busiest. The survivor takes over the dead worker's leases; the
// union of both output files must hold every page of the graph (a page twice is allowed — it
// is the price of at-least-once within the lease window — a page missing is not).
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { cleanup, NATS_URL, REDIS_URL } from '../distributed-harness.js';
import {
  assertBuilt,
  freePort,
  graphPagesIn,
  lineCount,
  type Started,
  startMocra,
  tempDir,
  waitFor,
} from './harness.js';

const GRAPH = { pages: 20_000, fanout: 10, bytes: 2048 };
/** Page numbers of the graph in one output file. */
const pagesOf = (file: string) => graphPagesIn(file, GRAPH);
/** A bound on one crawl of the graph by two workers, kill and reclaim included. */
const CRAWL_BOUND_MS = 240_000;

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('queue-kill');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Page numbers of the graph in an output file (a line cut short by the kill is skipped). */
interface KillOutcome {
  union: number;
  duplicates: number;
  missing: number[];
  killedAfter: number;
  /** From the kill to the end of the last survivor's run. */
  survivorMs: number;
  survivors: { code: number | null; stderr: string }[];
}

/**
 * One worker per entry of `envs` crawls the graph; the one that wrote most by then is killed
 * once they together wrote `killAt` pages (a few thousand pages in: every worker at full speed).
 */
async function crawlWithKill(
  label: string,
  envs: Record<string, string>[],
  killAt = 4_000,
): Promise<KillOutcome> {
  const start = site.graphUrl(GRAPH, 0);
  const outs = envs.map((_, i) => path.join(root, `${label}-${i}.jsonl`));
  const workers: Started[] = envs.map((env, i) =>
    startMocra(['crawl', start, '--out', outs[i]!, '--no-robots', '--no-progress'], {
      env: { MOCRA_LOG_LEVEL: 'warn', ...env },
      timeoutMs: CRAWL_BOUND_MS,
    }),
  );
  const written = () => outs.map(lineCount);
  try {
    const busy = await waitFor(
      () => written().reduce((a, b) => a + b, 0) >= killAt || workers.some((w) => w.child.exitCode !== null),
      CRAWL_BOUND_MS,
      20,
    );
    expect(busy, 'the crawl reached the kill point').toBe(true);
    for (const w of workers) expect(w.child.exitCode, w.stderr()).toBeNull();
    const counts = written();
    const victim = counts.indexOf(Math.max(...counts));
    workers[victim]!.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect((await workers[victim]!.done).signal).toBe('SIGKILL');
    const survivors = await Promise.all(workers.filter((_, i) => i !== victim).map((w) => w.done));
    const survivorMs = Date.now() - killedAt;
    const all = outs.flatMap(pagesOf);
    const distinct = new Set(all);
    const missing: number[] = [];
    for (let p = 0; p < graphPageCount(GRAPH); p++) if (!distinct.has(p)) missing.push(p);
    const outcome = {
      union: distinct.size,
      duplicates: all.length - distinct.size,
      missing,
      killedAfter: counts[victim]!,
      survivorMs,
      survivors: survivors.map(({ code, stderr }) => ({ code, stderr })),
    };
    console.log(
      `${label}: union ${outcome.union}/${graphPageCount(GRAPH)}, duplicates ${outcome.duplicates}, killed after its ${outcome.killedAfter} pages, survivors ended ${survivorMs} ms after the kill`,
    );
    return outcome;
  } finally {
    for (const w of workers) w.stopAll('SIGKILL');
  }
}

function expectNothingLost(outcome: KillOutcome): void {
  for (const s of outcome.survivors) expect(s.code, s.stderr).toBe(0);
  expect(outcome.missing.slice(0, 20), `${outcome.missing.length} pages lost`).toEqual([]);
  expect(outcome.union).toBe(graphPageCount(GRAPH));
}

const crawlName = () => `qk${randomBytes(4).toString('hex')}`;
const killAt = Number(process.env.QK_KILL_AT ?? 4_000);

test(
  'Redis queue: a worker SIGKILLed at full speed loses no page; the survivor finishes the crawl',
  async () => {
    const name = crawlName();
    try {
      const env = { MOCRA_QUEUE: REDIS_URL, MOCRA_NAME: name };
      expectNothingLost(await crawlWithKill('redis', [env, env], killAt));
    } finally {
      await cleanup(name);
    }
  },
  CRAWL_BOUND_MS + 30_000,
);

/**
 * A TCP relay to Redis for one worker that, once armed, passes on the first dedup call made under
 * a claim and then nothing more that the worker sends (replies still reach it): the worker has
 * marked a page's links seen and can never publish them — the crash window, hit for certain.
 */
async function freezingRelay(redisPort: number): Promise<{
  port: number;
  arm(): void;
  frozen(): boolean;
  close(): Promise<void>;
}> {
  let armed = false;
  let frozen = false;
  const sockets = new Set<Socket>();
  const claimed = /mocra:dedup:\{[^}]*\}:c:[^\r]/;
  const server: Server = createServer((client) => {
    const upstream = connect(redisPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    for (const s of [client, upstream]) s.on('error', () => s.destroy());
    client.on('data', (chunk: Buffer) => {
      if (frozen) return;
      upstream.write(chunk);
      if (armed && claimed.test(chunk.toString('latin1'))) frozen = true;
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    arm: () => {
      armed = true;
    },
    frozen: () => frozen,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test(
  'Redis queue: a worker killed after marking a page’s links seen and before publishing them loses none of them',
  async () => {
    const name = crawlName();
    const redisPort = Number(new URL(REDIS_URL).port || 6379);
    const relay = await freezingRelay(redisPort);
    const start = site.graphUrl(GRAPH, 0);
    const outs = [path.join(root, 'window-victim.jsonl'), path.join(root, 'window-survivor.jsonl')];
    const queues = [`redis://127.0.0.1:${relay.port}`, REDIS_URL];
    const workers = outs.map((out, i) =>
      startMocra(['crawl', start, '--out', out, '--no-robots', '--no-progress'], {
        env: { MOCRA_LOG_LEVEL: 'error', MOCRA_QUEUE: queues[i]!, MOCRA_NAME: name },
        timeoutMs: CRAWL_BOUND_MS,
      }),
    );
    try {
      // Armed two thousand pages in: well past the seed, both workers at full speed.
      const running = await waitFor(
        () =>
          lineCount(outs[0]!) + lineCount(outs[1]!) >= 2_000 ||
          workers.some((w) => w.child.exitCode !== null),
        CRAWL_BOUND_MS,
        20,
      );
      expect(running).toBe(true);
      for (const w of workers) expect(w.child.exitCode, w.stderr()).toBeNull();
      relay.arm();
      expect(await waitFor(relay.frozen, 30_000, 5)).toBe(true);
      await sleep(300); // the dedup call's reply is back: the links are marked, their publish held
      workers[0]!.child.kill('SIGKILL');
      expect((await workers[0]!.done).signal).toBe('SIGKILL');
      const survivor = await workers[1]!.done;
      expect(survivor.code, survivor.stderr).toBe(0);
      const distinct = new Set(outs.flatMap(pagesOf));
      const missing: number[] = [];
      for (let p = 0; p < graphPageCount(GRAPH); p++) if (!distinct.has(p)) missing.push(p);
      console.log(`redis crash window: union ${distinct.size}/${graphPageCount(GRAPH)}`);
      expect(missing.slice(0, 20), `${missing.length} pages lost`).toEqual([]);
    } finally {
      for (const w of workers) w.stopAll('SIGKILL');
      await relay.close();
      await cleanup(name);
    }
  },
  CRAWL_BOUND_MS + 30_000,
);

test(
  'NATS JetStream queue: a worker SIGKILLed at full speed loses no page',
  async () => {
    const name = crawlName();
    try {
      const env = { MOCRA_QUEUE: NATS_URL, MOCRA_COORDINATION: REDIS_URL, MOCRA_NAME: name };
      expectNothingLost(await crawlWithKill('nats', [env, env], killAt));
    } finally {
      await cleanup(name);
    }
  },
  CRAWL_BOUND_MS + 30_000,
);

/** A real Kafka broker, when one is given: none runs on the machines of this repository's CI. */
const KAFKA_BROKERS = process.env.MOCRA_TEST_KAFKA_BROKERS?.split(',').filter(Boolean) ?? [];

test.skipIf(KAFKA_BROKERS.length === 0)(
  'Kafka queue (MOCRA_TEST_KAFKA_BROKERS): a worker SIGKILLed at full speed loses no page',
  async () => {
    const name = crawlName();
    try {
      const env = {
        MOCRA_QUEUE: `kafka://${KAFKA_BROKERS.join(',')}`,
        MOCRA_COORDINATION: REDIS_URL,
        MOCRA_NAME: name,
      };
      expectNothingLost(await crawlWithKill('kafka', [env, env], killAt));
    } finally {
      await cleanup(name);
    }
  },
  CRAWL_BOUND_MS + 30_000,
);

test(
  'Raft control plane over a Redis queue: one of three nodes SIGKILLed at full speed loses no page',
  async () => {
    const name = crawlName();
    const dir = tempDir('queue-kill-raft');
    try {
      const addrs = await Promise.all([freePort(), freePort(), freePort()]).then((ports) =>
        ports.map((p) => `127.0.0.1:${p}`),
      );
      const envs = addrs.map((addr, i) => ({
        MOCRA_QUEUE: REDIS_URL,
        MOCRA_NAME: name,
        MOCRA_COORDINATION: `raft://${addr}?id=n${i}&dir=${path.join(dir, `n${i}`)}${i === 0 ? '' : `&join=${addrs[0]}`}`,
      }));
      expectNothingLost(await crawlWithKill('raft', envs, killAt));
    } finally {
      await cleanup(name);
      rmSync(dir, { recursive: true, force: true });
    }
  },
  CRAWL_BOUND_MS + 30_000,
);

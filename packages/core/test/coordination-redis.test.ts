// The Redis backend against the coordination conformance suite, on the real local Redis. Each
// client is its own connection; a test's clients share one namespace. Then a Redis of the test's
// own restarted under a client: with persistence nothing changes, without it the client refuses
// to go on.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, test } from 'vitest';
import { createRedisCoordination, type RedisCoordination } from '../src/coordination/redis-coordination.js';
import { CoordinationDataLostError, isMocraError } from '../src/errors.js';
import { type ConnectionEvent, connectionChannel } from '../src/queue/channels.js';
import { connectRedis, type RedisClient } from '../src/queue/redis-connection.js';
import { coordinationConformance } from './coordination-conformance.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const KEY_PREFIX = 'mocra-test:coord:';

let admin: RedisClient | undefined;
afterAll(async () => {
  await admin?.quit();
});

coordinationConformance({
  name: 'redis',
  async open(scope, nodeId, { memberTtlMs }) {
    return createRedisCoordination({
      url: REDIS_URL,
      namespace: scope,
      keyPrefix: KEY_PREFIX,
      nodeId,
      memberTtlMs,
    });
  },
  async crash(client) {
    await (client as RedisCoordination).close({ leave: false });
  },
  async cleanup(scope) {
    admin ??= await connectRedis({ url: REDIS_URL, feature: 'coordination-redis.test' });
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${KEY_PREFIX}${scope}:*`, 'COUNT', 500);
      if (keys.length > 0) await admin.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  },
});

/** A redis-server of this test's own (the shared one is never restarted), answering on `port`. */
async function startRedis(port: number, dir: string, persistent: boolean): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir];
  args.push('--appendonly', persistent ? 'yes' : 'no', '--appendfsync', 'always');
  const server = spawn('redis-server', args, { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    if (server.exitCode !== null) throw new Error(`redis-server exited with ${server.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return server;
    await sleep(25);
  }
  server.kill('SIGKILL');
  throw new Error(`redis-server on ${port} did not answer`);
}

async function stopRedis(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

for (const persistent of [false, true]) {
  test(`a coordination Redis restarted ${persistent ? 'with' : 'without'} persistence: ${persistent ? 'the run goes on' : 'every call fails with MOCRA_ERR_COORDINATION_DATA_LOST, and the connection channel says so'}`, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mocra-coord-restart-'));
    const port = await freePort();
    let server = await startRedis(port, dir, persistent);
    const events: ConnectionEvent[] = [];
    const onEvent = (e: unknown) => events.push(e as ConnectionEvent);
    connectionChannel.subscribe(onEvent);
    const c = await createRedisCoordination({ url: `redis://127.0.0.1:${port}`, namespace: 'restart' });
    try {
      await c.set('run:r1:seeded', 'node-a');
      await stopRedis(server);
      server = await startRedis(port, dir, persistent);
      // Commands wait for the reconnect; the marker is read once it is back.
      const expected = (o: unknown) =>
        persistent ? o === 'node-a' : isMocraError(o) && o.code === 'MOCRA_ERR_COORDINATION_DATA_LOST';
      let outcome: unknown;
      for (let i = 0; i < 200 && !expected(outcome); i++) {
        if (i > 0) await sleep(50);
        outcome = await c.get('run:r1:seeded').catch((err: unknown) => err);
      }
      if (persistent) {
        expect(outcome).toBe('node-a');
        await sleep(200); // the marker check after the reconnect has had its answer
        expect(await c.get('run:r1:seeded')).toBe('node-a');
        expect(events.filter((e) => e.state === 'emptied')).toEqual([]);
      } else {
        expect(outcome).toBeInstanceOf(CoordinationDataLostError);
        await expect(c.acquireLock('seed', { ttlMs: 1_000 })).rejects.toThrow(
          `the Redis coordination backend: redis://127.0.0.1:${port} came back without this crawl's coordination data`,
        );
        await expect(c.increment('epoch')).rejects.toThrow(CoordinationDataLostError);
        const emptied = events.filter((e) => e.state === 'emptied');
        expect(emptied).toHaveLength(1);
        expect(emptied[0]).toMatchObject({
          backend: 'the Redis coordination backend',
          server: `redis://127.0.0.1:${port}`,
        });
      }
    } finally {
      connectionChannel.unsubscribe(onEvent);
      await c.close();
      await stopRedis(server);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
}

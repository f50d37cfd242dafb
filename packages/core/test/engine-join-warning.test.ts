// A module with join nodes on an engine with shared coordination gets a warning at registration:
// join bookkeeping is per process (docs/deployment.md#joins-in-a-cluster).
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, expect, test } from 'vitest';
import { createRedisCoordination } from '../src/coordination/redis-coordination.js';
import { createEngine } from '../src/engine/engine.js';
import { Request } from '../src/model/request.js';
import { dag, defineModule } from '../src/module/index.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const coordination = await createRedisCoordination({
  url: REDIS_URL,
  namespace: `join-warning-${process.pid}-${Date.now()}`,
  nodeId: 'w1',
});
afterAll(() => coordination.close());

function capture(): { logger: pino.Logger; lines: { msg: string; level: number }[] } {
  const lines: { msg: string; level: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as { msg: string; level: number });
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, stream), lines };
}

const node = (id: string, join = false) => ({
  id,
  join,
  generate: () => [new Request(`http://127.0.0.1:1/${id}`)],
  parse() {},
});

test('registering a join module with shared coordination warns; without joins it does not', async () => {
  const { logger, lines } = capture();
  const engine = createEngine({ coordination, logger });
  const a = node('a');
  const b = node('b');
  const merge = node('merge', true);
  engine.register(defineModule({ name: 'fan-in', dag: dag().edge(a, merge).edge(b, merge).build() }), {
    write() {},
  });
  engine.register(defineModule({ name: 'chain', steps: [node('x'), node('y')] }), { write() {} });
  await new Promise((resolve) => setImmediate(resolve));
  const warnings = lines.filter((l) => l.level === 40);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]!.msg).toContain("module 'fan-in' has join nodes (merge)");
  expect(warnings[0]!.msg).toContain('joins-in-a-cluster');
});

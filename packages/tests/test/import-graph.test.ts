// `import 'mocra'` loads the kernel alone: none of the optional parts' dependencies (the control
// API's fastify and prom-client, the broker clients, LevelDB, the browser, zod) until a program
// uses them. Checked in a fresh node through the loader's own module graph.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';

const CHILD = path.resolve(import.meta.dirname, 'fixtures/import-graph-child.mjs');
const OPTIONAL = [
  'fastify',
  'prom-client',
  'ioredis',
  '@nats-io/transport-node',
  '@nats-io/jetstream',
  '@nats-io/kv',
  'kafkajs',
  'classic-level',
  'playwright-core',
  'zod',
];

interface Graph {
  imported: string[];
  taskConcurrency?: number;
  refused?: string;
  afterConfig?: string[];
}

async function graph(...args: string[]): Promise<Graph> {
  const { stdout } = await promisify(execFile)(process.execPath, [CHILD, ...args], {
    cwd: path.resolve(import.meta.dirname, '..'),
    timeout: 60_000,
  });
  return JSON.parse(stdout) as Graph;
}

test("importing mocra loads none of the optional parts' dependencies", async () => {
  const { imported } = await graph('mocra');
  // The inspection sees what the kernel does load: undici is its HTTP client.
  expect(imported).toContain('undici');
  expect(imported.filter((p) => OPTIONAL.includes(p))).toEqual([]);
}, 60_000);

test('a configuration read from TOML loads zod then, and is validated by it', async () => {
  const run = await graph('mocra', 'config');
  expect(run.imported).not.toContain('zod');
  expect(run.taskConcurrency).toBe(3);
  expect(run.refused).toBe('MOCRA_ERR_CONFIG_INVALID');
  expect(run.afterConfig).toContain('zod');
}, 60_000);

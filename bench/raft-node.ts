/**
 * One node of the Raft benchmark cluster (spawned by bench/raft-bench.ts). Reads the node's place
 * from MOCRA_NODE_ID / MOCRA_HTTP_ADDR / MOCRA_DATA_DIR / MOCRA_SEEDS, starts it with the real
 * LevelDB log (fsync on every write), and serves a control port:
 *
 *   GET  /status                          the node's ClusterStatus
 *   POST /load { ops, concurrency, valueBytes }
 *        `concurrency` clients inside this process each write in a loop through the node's API
 *        (as the engine does, embedded) until `ops` writes are acknowledged; returns latencies.
 *
 * Prints `ready <json>` once up.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { ClusterConfig, createClusterNode } from '@mocra/cluster';

const node = await createClusterNode(ClusterConfig.fromEnv(process.env), {
  tickMs: 50,
  electionTicks: 20,
  heartbeatTicks: 2,
});

async function load(ops: number, concurrency: number, valueBytes: number) {
  const value = 'x'.repeat(valueBytes);
  const latencies: number[] = [];
  let issued = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, client) => {
      while (issued < ops) {
        const i = issued++;
        const t0 = performance.now();
        try {
          await node.set(`bench/${client}/${i % 128}`, value);
          latencies.push(performance.now() - t0);
        } catch {
          errors++;
        }
      }
    }),
  );
  return { elapsedMs: performance.now() - started, latencies, errors };
}

const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => {
    body += c.toString();
  });
  req.on('end', async () => {
    const send = (v: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(v));
    };
    if (req.url === '/status') return send(node.status());
    if (req.url === '/load') {
      const a = JSON.parse(body) as { ops: number; concurrency: number; valueBytes: number };
      return send(await load(a.ops, a.concurrency, a.valueBytes));
    }
    res.writeHead(404).end();
  });
});
server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as AddressInfo).port;
  process.stdout.write(`ready ${JSON.stringify({ control: `127.0.0.1:${port}`, raftAddr: node.addr })}\n`);
});
process.on('SIGTERM', () => {
  node.close().finally(() => process.exit(0));
});

// Child of wasm-tier-up.test.ts: applies the setting given as argv[2] ('off', 'on' or none),
// then makes HTTP requests with undici to a local server — undici compiles its WebAssembly
// HTTP parser at the first connection, and V8 optimises it once it runs hot — and prints the
// most memory V8's compilers held at once. Bounded: a fixed number of requests.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import { Agent, request } from 'undici';
import { setWasmTierUp } from '../src/engine/wasm-tier-up.js';

const setting = process.argv[2];
if (setting === 'on' || setting === 'off') {
  process.stdout.write(`RESULT ${setWasmTierUp(setting === 'on')}\n`);
}
const body = Buffer.alloc(2048, 'a');
const server = http.createServer((_req, res) => res.end(body));
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
const agent = new Agent({ connections: 4 });
const before = v8.getHeapStatistics().peak_malloced_memory;
for (let i = 0; i < 3000; i++) {
  const res = await request(url, { dispatcher: agent });
  await res.body.arrayBuffer();
}
// The optimising compile runs on a background thread: give it up to 3 s to show (a loaded
// machine may start it late), and the baseline case the same time to prove it does not.
for (let waited = 0; waited < 3000; waited += 100) {
  if (v8.getHeapStatistics().peak_malloced_memory - before > 20 * 1024 * 1024) break;
  await new Promise((r) => setTimeout(r, 100));
}
process.stdout.write(`PEAK ${v8.getHeapStatistics().peak_malloced_memory} ${before}\n`);
await agent.close();
server.close();

// Measures how many requests per second the fixture site serves, so benchmarks can tell whether
// it could be their bottleneck. The site runs in its own process (the CLI, as benchmarks run it);
// this process drives it with an undici Pool. Bounded: each case stops after `seconds` seconds
// or `maxRequests` requests, whichever comes first.
//
//   node --import tsx --conditions=@mocra/source packages/testkit/scripts/throughput.ts [seconds]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const seconds = Number(process.argv[2] ?? 5);
const maxRequests = 500_000;
const connections = 32;
const here = import.meta.dirname;
const built = path.join(here, '../dist/cli.js');
const cli = spawn(process.execPath, [built, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise<string>((resolve, reject) => {
  createInterface({ input: cli.stdout! }).once('line', resolve);
  cli.once('exit', (code) => reject(new Error(`fixture site exited with ${code}`)));
});

/** CPU seconds the server process has used (user + system), from /proc; the machine may be shared. */
function serverCpuSeconds(): number {
  const fields = fs.readFileSync(`/proc/${cli.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function run(name: string, pathFor: (i: number) => string): Promise<void> {
  const pool = new Pool(url, { connections, pipelining: 1 });
  let done = 0;
  let bytes = 0;
  let next = 0;
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  const cpuStart = serverCpuSeconds();
  async function worker(): Promise<void> {
    while (performance.now() < deadline && next < maxRequests) {
      const i = next++;
      const res = await pool.request({ path: pathFor(i), method: 'GET' });
      for await (const chunk of res.body) bytes += (chunk as Buffer).length;
      if (res.statusCode !== 200) throw new Error(`${pathFor(i)} answered ${res.statusCode}`);
      done += 1;
    }
  }
  await Promise.all(Array.from({ length: connections }, worker));
  const elapsed = (performance.now() - start) / 1000;
  const cpu = serverCpuSeconds() - cpuStart;
  await pool.close();
  console.log(
    `${name.padEnd(32)} ${String(Math.round(done / elapsed)).padStart(7)} req/s wall  ${String(Math.round(done / cpu)).padStart(7)} req per server CPU-s  ${(bytes / elapsed / 1e6).toFixed(1).padStart(6)} MB/s  (${done} requests, ${elapsed.toFixed(1)} s, server CPU ${cpu.toFixed(2)} s)`,
  );
}

try {
  await run('graph page, 2 KB, fan-out 10', (i) => `/graph/1000000/10/2048/${i % 1_000_000}`);
  await run('graph page, 50 KB, fan-out 10', (i) => `/graph/1000000/10/51200/${i % 1_000_000}`);
  await run('catalog listing page (~8 KB)', (i) => `/books/page/${1 + (i % 50)}`);
  await run('book detail page (~1.3 KB)', (i) => `/book/${1 + (i % 1000)}`);
} finally {
  cli.kill('SIGTERM');
}

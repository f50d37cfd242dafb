/**
 * Memory of the frontier's two big sets, per million entries: the dedup set (a plain
 * `Set<string>` of fingerprints vs the TieredDeduplicator in its memory and disk phases) and
 * the request queue (the memory backend vs the memory + LevelDB backend) holding a million
 * queued requests.
 *
 *   node --import tsx --conditions=@mocra/source bench/memory-frontier.ts [--n 1000000]
 *
 * Every case runs in its own child process (`--case <name>`), so one case's garbage and
 * allocator state never shows in another's figures. Heap figures are measured after a forced
 * GC (`--expose-gc`); peak RSS is sampled every 50 ms. Bounded: 5 cases, one pass each.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createMemoryQueueBackend, fingerprintParts, type QueueBackend, Request } from '@mocra/core';
import { createLevelQueueBackend, TieredDeduplicator } from '@mocra/core/leveldb';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '1000000' }, case: { type: 'string' } },
});
const N = Math.min(Math.max(Number(values.n), 1000), 5_000_000);
const CASES = ['set', 'tiered-memory', 'tiered-disk', 'queue-memory', 'queue-leveldb'] as const;
type CaseName = (typeof CASES)[number];

interface Result {
  case: CaseName;
  n: number;
  seconds: number;
  /** Heap + array buffers held after GC, minus the baseline. */
  retainedMB: number;
  peakRssMB: number;
  note: string;
}

const MB = 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

function retained(): number {
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

async function runCase(name: CaseName): Promise<Result> {
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 50);
  const url = (i: number) => `http://127.0.0.1:8080/graph/1000000/50/2048/${i}`;
  const base = retained();
  const start = performance.now();
  let note = '';
  let hold: unknown;
  if (name === 'set' || name === 'tiered-memory' || name === 'tiered-disk') {
    const dedup =
      name === 'set'
        ? undefined
        : new TieredDeduplicator({ memoryEntries: name === 'tiered-memory' ? N * 2 : Math.floor(N / 10) });
    const set = new Set<string>();
    for (let i = 0; i < N; i += 1000) {
      const batch: string[] = [];
      for (let j = i; j < Math.min(N, i + 1000); j++) batch.push(fingerprintParts('GET', url(j), undefined));
      if (dedup) await dedup.markSeen(batch);
      else for (const fp of batch) set.add(fp);
    }
    hold = dedup ?? set;
    if (dedup) {
      const s = dedup.stats();
      note = `phase ${s.phase}, typed arrays ${(s.memoryBytes / MB).toFixed(1)} MB`;
    } else {
      note = `${set.size} strings`;
    }
  } else {
    const backend: QueueBackend =
      name === 'queue-memory' ? createMemoryQueueBackend() : await createLevelQueueBackend();
    const q = backend.topic<Request>('request', { capacity: Number.POSITIVE_INFINITY });
    for (let i = 0; i < N; i += 1000) {
      const batch = [];
      for (let j = i; j < Math.min(N, i + 1000); j++) {
        const r = new Request(url(j), { depth: 3 });
        r.fingerprint = fingerprintParts('GET', r.url, undefined);
        batch.push({ payload: r });
      }
      await q.publish(batch);
    }
    const s = await q.stats();
    note = `${s.ready} ready`;
    hold = backend;
  }
  const seconds = (performance.now() - start) / 1000;
  const after = retained();
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  if (hold && typeof (hold as { close?: unknown }).close === 'function')
    await (hold as { close(): Promise<void> }).close();
  return { case: name, n: N, seconds, retainedMB: (after - base) / MB, peakRssMB: peak / MB, note };
}

if (values.case) {
  const result = await runCase(values.case as CaseName);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  console.log(
    `node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model}, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  console.log(`n = ${N.toLocaleString('en')}\n`);
  console.log('| case | seconds | retained (heap + buffers) | peak RSS | note |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const name of CASES) {
    const child = spawnSync(
      process.execPath,
      ['--expose-gc', ...process.execArgv, process.argv[1]!, '--case', name, '--n', String(N)],
      { encoding: 'utf8', maxBuffer: 1 << 20, timeout: 600_000 },
    );
    const line = child.stdout.trim().split('\n').pop() ?? '';
    if (child.status !== 0 || !line.startsWith('{')) {
      console.log(`| ${name} | failed: ${child.stderr.trim().split('\n').slice(-3).join(' ')} | | | |`);
      continue;
    }
    const r = JSON.parse(line) as Result;
    console.log(
      `| ${r.case} | ${r.seconds.toFixed(1)} | ${r.retainedMB.toFixed(1)} MB | ${r.peakRssMB.toFixed(0)} MB | ${r.note} |`,
    );
  }
}

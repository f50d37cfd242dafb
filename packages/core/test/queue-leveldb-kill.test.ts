// A persistent LevelDB queue survives SIGKILL: a child process publishes, consumes, acks some
// messages, dead-letters some and holds the rest leased; it is killed with SIGKILL; the queue
// reopened on the same directory has every message not acked (the leased ones again, with
// their attempt counted), none of the acked ones, the DLQ, and the delayed messages' times.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { createLevelQueueBackend } from '../src/queue/leveldb-queue.js';

const root = await mkdtemp(path.join(tmpdir(), 'mocra-queue-kill-'));
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Report {
  total: number;
  acked: number[];
  dead: number[];
  inflight: { n: number; attempt: number }[];
}

function runChildUntilReady(dir: string): Promise<Report> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--conditions=@mocra/source',
      path.join(import.meta.dirname, 'queue-leveldb-kill-child.ts'),
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child never got ready: ${err}`));
    }, 60_000);
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (!out.includes('\nREADY\n')) return;
      clearTimeout(timer);
      const report = JSON.parse(out.slice(0, out.indexOf('\nREADY\n'))) as Report;
      child.once('exit', (_code, signal) => {
        expect(signal).toBe('SIGKILL');
        resolve(report);
      });
      child.kill('SIGKILL');
    });
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL') {
        clearTimeout(timer);
        reject(new Error(`child exited with ${code}: ${err}`));
      }
    });
  });
}

test('SIGKILL mid-work: everything not acked comes back, acked stays gone, DLQ and delays kept', async () => {
  const dir = path.join(root, 'q');
  const report = await runChildUntilReady(dir);
  expect(report.acked.length).toBeGreaterThan(100);
  expect(report.dead.length).toBeGreaterThan(5);
  expect(report.inflight.length).toBeGreaterThan(50);

  const backend = await createLevelQueueBackend({ dir, headSize: 50 });
  try {
    const q = backend.topic<{ n: number }>('jobs', { maxDeliveries: 3, leaseMs: 600_000, capacity: 100_000 });
    const delayed = Array.from({ length: report.total }, (_, n) => n).filter((n) => n % 50 === 25);
    const gone = new Set([...report.acked, ...report.dead]);
    const expectedReady = Array.from({ length: report.total }, (_, n) => n).filter(
      (n) => !gone.has(n) && n % 50 !== 25,
    );
    expect(await q.stats()).toEqual({
      ready: expectedReady.length,
      inflight: 0,
      delayed: delayed.length,
      deadLettered: report.dead.length,
    });

    const seen = new Map<number, number>();
    const attempts = new Map(report.inflight.map((i) => [i.n, i.attempt]));
    for (let i = 0; i < 100 && seen.size < expectedReady.length; i++) {
      for (const d of await q.consume({ max: 100, waitMs: 200 })) {
        expect(seen.has(d.payload.n), `message ${d.payload.n} delivered twice`).toBe(false);
        seen.set(d.payload.n, d.attempt);
        expect(d.headers).toMatchObject({ origin: 'child' });
        expect(d.key).toBe(`k${d.payload.n % 5}`);
        await d.ack();
      }
    }
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual(expectedReady);
    // In-flight deliveries died with the process: they come back, their attempt counted.
    for (const [n, attempt] of attempts) expect(seen.get(n), `attempt of ${n}`).toBe(attempt + 1);
    for (const n of expectedReady) if (!attempts.has(n)) expect(seen.get(n)).toBeGreaterThanOrEqual(1);

    const letters = await q.deadLetters.list({ limit: 1000 });
    expect(letters.map((l) => l.payload?.n).sort((a, b) => a! - b!)).toEqual(
      [...report.dead].sort((a, b) => a - b),
    );
    for (const l of letters) expect(l.reason).toBe(`poison ${l.payload!.n}`);
    expect(await q.stats()).toMatchObject({ ready: 0, inflight: 0, delayed: delayed.length });
  } finally {
    await backend.close();
  }
  // Reopened once more: the acks of the second process are durable too.
  const again = await createLevelQueueBackend({ dir, headSize: 50 });
  try {
    const q = again.topic<{ n: number }>('jobs');
    const s = await q.stats();
    expect(s.ready + s.inflight).toBe(0);
    expect(s.delayed).toBe(20);
  } finally {
    await again.close();
  }
}, 120_000);

test('a second process on the same directory gets StoreLockedError', async () => {
  const dir = path.join(root, 'locked');
  const first = await createLevelQueueBackend({ dir });
  try {
    await expect(createLevelQueueBackend({ dir })).rejects.toMatchObject({ code: 'MOCRA_ERR_STORE_LOCKED' });
  } finally {
    await first.close();
  }
});

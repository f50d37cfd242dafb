// Child process of queue-leveldb-kill.test.ts: works a persistent LevelDB queue, reports what it
// did on stdout, then hangs until the parent kills it with SIGKILL.
import { createLevelQueueBackend } from '../src/queue/leveldb-queue.js';

const dir = process.argv[2]!;
const backend = await createLevelQueueBackend({ dir, headSize: 50 });
const q = backend.topic<{ n: number }>('jobs', { maxDeliveries: 3, leaseMs: 600_000, capacity: 100_000 });
const N = 1000;
await q.publish(
  Array.from({ length: N }, (_, n) => ({
    payload: { n },
    priority: (n % 3) - 1,
    key: `k${n % 5}`,
    headers: { origin: 'child' },
    ...(n % 50 === 25 ? { delayMs: 600_000 } : {}),
  })),
);
const acked: number[] = [];
const dead: number[] = [];
const inflight: { n: number; attempt: number }[] = [];
// A few go round once: nack without delay, so their attempt is 2 when next delivered.
const first = await q.consume({ max: 10, waitMs: 1000 });
for (const d of first) await d.nack({ reason: 'once more' });
let got = 0;
while (got < 400) {
  const batch = await q.consume({ max: 50, waitMs: 1000 });
  if (batch.length === 0) break;
  for (const d of batch) {
    got++;
    const { n } = d.payload;
    if (n % 2 === 0) {
      await d.ack();
      acked.push(n);
    } else if (n % 7 === 0) {
      await d.deadLetter(`poison ${n}`);
      dead.push(n);
    } else {
      inflight.push({ n, attempt: d.attempt });
    }
  }
}
await backend.flush();
process.stdout.write(`${JSON.stringify({ total: N, acked, dead, inflight })}\nREADY\n`);
setInterval(() => {}, 1000);

// Child of young-generation.test.ts: applies the cap given as argv[2] (or none), then keeps a
// sliding window of objects alive across scavenges — what a crawl's in-flight pages do, and
// what makes V8 grow its young generation — and prints the largest size the young
// generation reached. Bounded: a fixed number of allocations.
import v8 from 'node:v8';
import { limitYoungGeneration } from '../src/engine/young-generation.js';

const cap = process.argv[2];
if (cap !== undefined && cap !== 'none') {
  process.stdout.write(`RESULT ${limitYoungGeneration(Number(cap))}\n`);
}
const youngBytes = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;
let largest = youngBytes();
let window: { n: number; s: string }[] = [];
// Batches of work separated by turns of the event loop, as a crawl works a page at a time:
// the GC observer steers between them.
for (let batch = 0; batch < 600; batch++) {
  for (let i = 0; i < 5_000; i++) {
    window.push({ n: i, s: `page ${batch}:${i}` });
    if (window.length > 60_000) window = window.slice(30_000);
  }
  largest = Math.max(largest, youngBytes());
  await new Promise((r) => setImmediate(r));
}
process.stdout.write(`LARGEST ${largest}\n`);

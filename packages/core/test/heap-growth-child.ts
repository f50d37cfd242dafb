// Child of heap-growth.test.ts: applies the heap growth given as argv[2] (or none), then
// churns through promoted garbage over a live set so that V8 runs full GCs and sets new
// limits (printed by --trace-gc-verbose). Bounded: a fixed number of allocations.
import { limitHeapGrowth } from '../src/engine/heap-growth.js';

const percent = process.argv[2];
if (percent !== undefined && percent !== 'none') {
  process.stdout.write(`RESULT ${limitHeapGrowth(Number(percent))}\n`);
}
let live: { n: number; s: string }[] = [];
for (let i = 0; i < 3_000_000; i++) {
  live.push({ n: i, s: `x${i}` });
  if (live.length > 400_000) live = live.slice(200_000);
}
process.stdout.write(`DONE ${live.length}\n`);

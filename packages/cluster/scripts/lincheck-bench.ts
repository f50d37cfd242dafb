/**
 * How long the linearizability checker takes on small histories full of unknown outcomes: for
 * each seed, a Jepsen-register-shaped history (73 operations, 25 without an answer, 5 processes,
 * values 0–4; test/sim/register-histories.ts) as generated, with its last read returning a value
 * nobody wrote (certainly not linearizable: the search must rule out every order), and with a
 * random read changed. Prints the hardest cases and whether any stayed undecided.
 *
 *   node --import tsx packages/cluster/scripts/lincheck-bench.ts [--seeds 40] [--max-steps 100000000]
 */
import { performance } from 'node:perf_hooks';
import { checkLinearizable, kvModel } from '../test/sim/lincheck.js';
import { corruptRead, registerHistory } from '../test/sim/register-histories.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const seeds = arg('--seeds', 40);
const maxSteps = arg('--max-steps', 100_000_000);

interface Row {
  seed: number;
  kind: string;
  result: string;
  steps: number;
  ms: number;
}
const rows: Row[] = [];
for (let seed = 1; seed <= seeds; seed++) {
  const h = registerHistory(seed);
  const variants = [
    ['as generated', h],
    ['never-written read', corruptRead(h, seed, 'never-written')],
    ['changed read', corruptRead(h, seed, 'other')],
  ] as const;
  for (const [kind, history] of variants) {
    const t0 = performance.now();
    const r = checkLinearizable(kvModel, history, { maxSteps });
    rows.push({ seed, kind, result: r.result, steps: r.steps, ms: performance.now() - t0 });
  }
}
rows.sort((a, b) => b.steps - a.steps);
console.log(`| seed | history | verdict | steps | ms |\n| --- | --- | --- | --- | --- |`);
for (const r of rows.slice(0, 8)) {
  console.log(
    `| ${r.seed} | ${r.kind} | ${r.result} | ${r.steps.toLocaleString('en')} | ${Math.round(r.ms)} |`,
  );
}
const undecided = rows.filter((r) => r.result === 'unknown').length;
const badOnes = rows.filter((r) => r.kind === 'never-written read');
console.log(
  `\n${rows.length} histories, ${undecided} undecided within ${maxSteps.toLocaleString('en')} steps; ` +
    `never-written reads refuted: ${badOnes.filter((r) => r.result === 'illegal').length}/${badOnes.length}; ` +
    `total ${Math.round(rows.reduce((t, r) => t + r.ms, 0))} ms (load average ${(await import('node:os')).loadavg()[0]!.toFixed(1)})`,
);
process.exit(undecided > 0 ? 1 : 0);

/**
 * What importing a crawler costs before it crawls: peak RSS and wall time of a fresh `node`
 * that imports one package and exits, beside a bare `node` that imports nothing, in the same
 * run. mocra's own HTTP client (undici) is the floor it is held to.
 *
 *   node --import tsx bench/import-cost.ts [--runs 9]
 *
 * Cases run interleaved (bare, undici, mocra, crawlee, bare, …) so that the machine's load
 * falls on all of them alike; each figure is the median of `runs` children. Time is measured
 * inside the child around `await import(…)` (node's own start-up is the bare case's RSS, not
 * its time); peak RSS is the child's `ru_maxrss` at exit. Imports resolve from this folder, so
 * `mocra` is the workspace's built package (run `pnpm build` first).
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '9' } } });
const RUNS = Math.min(Math.max(Number(values.runs) || 9, 1), 51);
const CASES = ['bare node', 'undici', 'mocra', 'crawlee'] as const;
type Case = (typeof CASES)[number];

const CHILD = `
const started = performance.now();
const specifier = process.argv[1];
if (specifier !== 'bare node') await import(specifier);
const ms = performance.now() - started;
process.stdout.write(JSON.stringify({ ms, rssMB: process.resourceUsage().maxRSS / 1024 }));
`;

function once(name: Case): { ms: number; rssMB: number } {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', CHILD, name], {
    cwd: path.dirname(new URL(import.meta.url).pathname),
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (child.status !== 0) throw new Error(`${name}: exit ${child.status}\n${child.stderr}`);
  return JSON.parse(child.stdout) as { ms: number; rssMB: number };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const samples = new Map<Case, { ms: number[]; rssMB: number[] }>(
  CASES.map((c) => [c, { ms: [], rssMB: [] }]),
);
for (let run = 0; run < RUNS; run++) {
  for (const name of CASES) {
    const r = once(name);
    samples.get(name)!.ms.push(r.ms);
    samples.get(name)!.rssMB.push(r.rssMB);
  }
}

console.log(
  `node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(2)}, ${RUNS} runs a case`,
);
console.log('| import | peak RSS MB (median) | time ms (median) | range RSS MB | range ms |');
console.log('| --- | --- | --- | --- | --- |');
for (const name of CASES) {
  const { ms, rssMB } = samples.get(name)!;
  console.log(
    `| ${name} | ${median(rssMB).toFixed(1)} | ${Math.round(median(ms))} | ${Math.min(...rssMB).toFixed(0)}–${Math.max(...rssMB).toFixed(0)} | ${Math.round(Math.min(...ms))}–${Math.round(Math.max(...ms))} |`,
  );
}
const undici = samples.get('undici')!;
const mocra = samples.get('mocra')!;
console.log(
  `mocra − undici: ${(median(mocra.rssMB) - median(undici.rssMB)).toFixed(1)} MB, ${Math.round(median(mocra.ms) - median(undici.ms))} ms`,
);

/**
 * Run the simulator for one seed (or a range) from the command line:
 *
 *   node --import tsx --conditions=@mocra/source packages/cluster/test/sim/run-seed.ts 1234 [--trace]
 *   node --import tsx --conditions=@mocra/source packages/cluster/test/sim/run-seed.ts 1..500
 *
 * `--first-failure` stops at the first failing seed (the mutation check uses it); `--failures`
 * prints only failing seeds and a summary line.
 */
import { configFromSeed, replayCommand, runSimulation } from './simulation.js';

const arg = process.argv[2] ?? '1';
const traceOn = process.argv.includes('--trace');
const stopEarly = process.argv.includes('--first-failure');
const onlyFailures = process.argv.includes('--failures');
const range = /^(\d+)\.\.(\d+)$/.exec(arg);
const [from, to] = range ? [Number(range[1]), Number(range[2])] : [Number(arg), Number(arg)];
if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from > to) {
  console.error('usage: run-seed.ts <seed> | <from>..<to> [--trace] [--first-failure] [--failures]');
  process.exit(2);
}
let failed = 0;
let ran = 0;
const startedAll = Date.now();
for (let seed = from; seed <= to; seed++) {
  const started = Date.now();
  const config = configFromSeed(seed, { trace: traceOn });
  const report = await runSimulation(config);
  ran++;
  if (traceOn) for (const line of report.trace) console.log(line);
  const ms = Date.now() - started;
  if (!report.ok || !onlyFailures) {
    console.log(
      `seed ${seed}: ${report.ok ? 'ok' : 'FAILED'} (${config.schedule}) — ${report.events} events, ${Math.round(report.virtualMs)} virtual ms, ${ms} ms, fingerprint ${report.fingerprint} ${JSON.stringify(report.stats)}`,
    );
  }
  if (!report.ok) {
    failed++;
    for (const v of report.violations) console.log(`  ✗ ${v}`);
    console.log(`  replay: ${replayCommand(seed)}`);
    if (stopEarly) break;
  }
}
console.log(`${ran} seeds, ${failed} failed, ${Date.now() - startedAll} ms`);
process.exit(failed > 0 ? 1 : 0);

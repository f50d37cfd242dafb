// Replays one simulator seed with a trace: MOCRA_SIM_SEED=<seed> (default 1). Also checks that
// the simulator is deterministic: two runs of the same seed produce the same fingerprint.
import { describe, expect, test } from 'vitest';
import { configFromSeed, runSimulation } from './sim/simulation.js';

const seed = Number(process.env.MOCRA_SIM_SEED ?? 1);

describe(`simulator replay of seed ${seed}`, () => {
  test('runs clean, and a second run is identical event for event', async () => {
    const a = await runSimulation(configFromSeed(seed, { trace: true }));
    if (process.env.MOCRA_SIM_SEED) console.log(a.trace.join('\n'));
    expect(a.ok, a.violations.join('\n')).toBe(true);
    const b = await runSimulation(configFromSeed(seed, { trace: true }));
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(b.trace).toEqual(a.trace);
  }, 120_000);
});

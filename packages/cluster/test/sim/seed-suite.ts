/**
 * Shared body of the simulator test files. The default run covers SEEDS_PER_FILE seeds in each of
 * the four files (vitest runs files in parallel); MOCRA_SIM_SEEDS=<n> runs n seeds per file
 * instead (a longer soak), MOCRA_SIM_FIRST=<seed> moves the window.
 */
import { expect, test } from 'vitest';
import { SEEDS_PER_FILE } from './ci-seeds.js';
import { configFromSeed, replayCommand, runSimulation } from './simulation.js';

export function defineSeedSuite(part: number): void {
  const perFile = Number(process.env.MOCRA_SIM_SEEDS ?? SEEDS_PER_FILE);
  const first = Number(process.env.MOCRA_SIM_FIRST ?? 1);
  const from = first + part * perFile;
  for (let seed = from; seed < from + perFile; seed++) {
    test(`seed ${seed}`, async () => {
      const report = await runSimulation(configFromSeed(seed));
      const message = `seed ${seed} broke:\n  ${report.violations.join('\n  ')}\n  replay: ${replayCommand(seed)}`;
      if (!report.ok) console.error(message);
      expect(report.ok, message).toBe(true);
      // The run did real work: a leader committed entries and clients were answered.
      expect(report.stats.maxCommitted).toBeGreaterThan(5);
      expect(report.stats.opsOk).toBeGreaterThan(0);
    }, 120_000);
  }
}

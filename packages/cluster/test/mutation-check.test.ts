// The mutation check at CI size: every classic Raft bug, put into a copy of the sources, must be
// caught by the simulator alone within the CI seed window (scripts/mutation-check.ts; it stops
// at a mutant's first failing seed, so a run takes well under a minute unless one survives).
import { expect, test } from 'vitest';
import { mutationCheck } from '../scripts/mutation-check.js';
import { FILES, SEEDS_PER_FILE } from './sim/ci-seeds.js';

test('the simulator alone kills every mutant of the Raft core', async () => {
  const lines: string[] = [];
  const r = await mutationCheck({ seeds: SEEDS_PER_FILE * FILES, first: 1, log: (l) => lines.push(l) });
  console.log(`${lines.join('\n')}\nmutation score ${r.score} in ${Math.round(r.ms / 1000)} s`);
  expect(r.outcomes.filter((o) => !o.killed).map((o) => o.id)).toEqual([]);
  expect(r.outcomes.length).toBeGreaterThanOrEqual(8);
}, 900_000);

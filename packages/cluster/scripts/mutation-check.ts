/**
 * The mutation check: does the simulator alone catch the classic Raft bugs?
 *
 * Each mutant below is one classic bug, written as exact text replacements in the sources. For
 * each, the package's `src/` and `test/sim/` are copied to a temporary directory, the bug is put
 * into the copy (the real files are never touched), and the simulator runs the CI seeds on the
 * copy until a seed fails. A mutant is killed when some seed reports a violation; it survives
 * when every seed passes. First the unmutated copy runs a few seeds, so a broken copy cannot
 * pass for a kill; a mutant whose text no longer matches the sources stops the check (update it).
 *
 *   node --import tsx packages/cluster/scripts/mutation-check.ts [--seeds N] [--first S] [--only id,id] [--count]
 *
 * Defaults: the CI seed window (`SEEDS_PER_FILE × FILES` seeds from 1), two mutants at a time.
 * `--count` runs every seed instead of stopping at the first failure and reports how many
 * failed (how robustly a mutant is caught). Prints one line per mutant and the mutation score;
 * exits 1 unless every mutant was killed.
 */
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FILES, SEEDS_PER_FILE } from '../test/sim/ci-seeds.js';

interface Mutant {
  readonly id: string;
  readonly bug: string;
  readonly file: string;
  readonly replace: ReadonlyArray<readonly [from: string, to: string]>;
}

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'commit-previous-term',
    bug: 'the leader commits an entry of a previous term by counting replicas (Figure 8)',
    file: 'src/raft/raft-core.ts',
    replace: [
      [
        'if (n <= this.#log.committed || this.#log.term(n) !== this.#term) return false;',
        'if (n <= this.#log.committed) return false;',
      ],
    ],
  },
  {
    id: 'vote-before-durable',
    bug: 'a vote is granted (sent) before currentTerm/votedFor are durable',
    file: 'src/raft/raft-core.ts',
    replace: [
      [
        "if (this.#role === 'leader' && this.#term === this.#durable.term && REPLICATION_TYPES.has(m.type)) {",
        "if ((this.#role === 'leader' && this.#term === this.#durable.term && REPLICATION_TYPES.has(m.type)) || m.type === 'vote-resp') {",
      ],
    ],
  },
  {
    id: 'vote-not-persisted',
    bug: 'votedFor is never persisted',
    file: 'src/storage/raft-storage.ts',
    replace: [['      vote: hs.vote,', '      vote: null,']],
  },
  {
    id: 'vote-without-up-to-date-check',
    bug: "a vote is granted without checking that the candidate's log is up to date",
    file: 'src/raft/raft-core.ts',
    replace: [['if (canVote && this.#log.isUpToDate(m.lastIndex, m.lastTerm)) {', 'if (canVote) {']],
  },
  {
    id: 'no-truncate-on-conflict',
    bug: 'a follower keeps its conflicting entries instead of truncating them',
    file: 'src/raft/raft-log.ts',
    replace: [['        this.truncateFrom(e.index);\n        break;', '        continue;']],
  },
  {
    id: 'fencing-token-from-clock',
    bug: "the fencing token is the leader's clock reading, not the Raft index",
    file: 'src/state/control-state.ts',
    replace: [
      ['const result = this.#execute(index, env.op);', 'const result = this.#execute(env.t, env.op);'],
    ],
  },
  {
    id: 'lease-on-wall-clock',
    bug: "lock and TTL time is the leaders' wall clocks (a new leader's skew frees leases early)",
    file: 'src/state/control-state.ts',
    replace: [
      [
        '  #advanceClock(term: number, env: CommandEnvelope): void {\n',
        '  #advanceClock(term: number, env: CommandEnvelope): void {\n    this.#now = Math.max(this.#now, env.t);\n    return;\n',
      ],
    ],
  },
  {
    id: 'read-index-without-quorum',
    bug: 'ReadIndex answers from the leader without a quorum round',
    file: 'src/raft/raft-core.ts',
    replace: [['if (voters.length === 1 && voters[0] === this.id) {', 'if (voters.length >= 1) {']],
  },
];

const packageDir = path.resolve(import.meta.dirname, '..');

interface Outcome {
  readonly id: string;
  readonly killed: boolean;
  readonly seedsRun: number;
  readonly seedsFailed: number;
  readonly killedBy: string | undefined;
  readonly violation: string | undefined;
  readonly ms: number;
}

function parseArgs(argv: readonly string[]): {
  seeds: number;
  first: number;
  only: Set<string> | undefined;
  count: boolean;
} {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const seeds = Number(value('--seeds') ?? SEEDS_PER_FILE * FILES);
  const first = Number(value('--first') ?? 1);
  const only = value('--only');
  if (!Number.isSafeInteger(seeds) || seeds <= 0 || !Number.isSafeInteger(first)) {
    throw new Error('usage: mutation-check.ts [--seeds N] [--first S] [--only id,id]');
  }
  return {
    seeds,
    first,
    only: only === undefined ? undefined : new Set(only.split(',')),
    count: argv.includes('--count'),
  };
}

/** A copy of the sources the simulator runs on, with `mutant` applied (none for the control). */
async function prepareCopy(mutant: Mutant | undefined): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `mocra-mutant-${mutant?.id ?? 'control'}-`));
  await cp(path.join(packageDir, 'src'), path.join(dir, 'src'), { recursive: true });
  await cp(path.join(packageDir, 'test', 'sim'), path.join(dir, 'test', 'sim'), { recursive: true });
  await writeFile(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  // The copy resolves the package's dependencies (classic-level, undici) from the real install.
  await symlink(path.join(packageDir, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  if (mutant) {
    const file = path.join(dir, mutant.file);
    let text = await readFile(file, 'utf8');
    for (const [from, to] of mutant.replace) {
      const count = text.split(from).length - 1;
      if (count !== 1) {
        throw new Error(
          `mutant ${mutant.id}: expected the text to mutate exactly once in ${mutant.file}, found it ${count} times — update the mutant`,
        );
      }
      text = text.replace(from, () => to);
    }
    await writeFile(file, text);
  }
  return dir;
}

/** Run seeds on a copy until one fails (or all of them, with `all`). */
function runSeeds(dir: string, first: number, seeds: number, all = false): Promise<Omit<Outcome, 'id'>> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(dir, 'test', 'sim', 'run-seed.ts'),
        `${first}..${first + seeds - 1}`,
        ...(all ? [] : ['--first-failure']),
        '--failures',
      ],
      // `--import tsx` resolves from the working directory: the package, inside the workspace.
      { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      err = (err + c.toString()).slice(-4000);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const summary = /^(\d+) seeds, (\d+) failed/m.exec(out);
      if (!summary) {
        reject(new Error(`the simulator did not finish (exit ${code}):\n${err || out.slice(-4000)}`));
        return;
      }
      const failedSeed = /^seed (\d+): FAILED \(([a-z0-9-]+)\)/m.exec(out);
      const violation = /^ {2}✗ (.*)$/m.exec(out)?.[1];
      resolve({
        killed: Number(summary[2]) > 0,
        seedsRun: Number(summary[1]),
        seedsFailed: Number(summary[2]),
        killedBy: failedSeed ? `seed ${failedSeed[1]} (${failedSeed[2]})` : undefined,
        violation,
        ms: Date.now() - started,
      });
    });
  });
}

async function checkMutant(mutant: Mutant, first: number, seeds: number, all: boolean): Promise<Outcome> {
  const dir = await prepareCopy(mutant);
  try {
    return { id: mutant.id, ...(await runSeeds(dir, first, seeds, all)) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function mutationCheck(options: {
  seeds: number;
  first: number;
  only?: Set<string> | undefined;
  count?: boolean;
  log?: (line: string) => void;
}): Promise<{ outcomes: Outcome[]; score: string; allKilled: boolean; ms: number }> {
  const log = options.log ?? console.log;
  const started = Date.now();
  const mutants = MUTANTS.filter((m) => !options.only || options.only.has(m.id));
  // Every mutant's text must still match before anything runs.
  for (const m of mutants) await rm(await prepareCopy(m), { recursive: true, force: true });
  const control = await prepareCopy(undefined);
  try {
    const c = await runSeeds(control, options.first, Math.min(8, options.seeds));
    if (c.killed) throw new Error(`the unmutated copy fails ${c.killedBy}: ${c.violation}`);
    log(`control: the unmutated copy passes ${c.seedsRun} seeds (${c.ms} ms)`);
  } finally {
    await rm(control, { recursive: true, force: true });
  }
  const outcomes: Outcome[] = [];
  let next = 0;
  // Two at a time: one per core.
  await Promise.all(
    [0, 1].map(async () => {
      while (next < mutants.length) {
        const mutant = mutants[next++]!;
        const o = await checkMutant(mutant, options.first, options.seeds, options.count ?? false);
        outcomes.push(o);
        const failing = options.count ? `, ${o.seedsFailed} of ${o.seedsRun} seeds fail` : '';
        log(
          o.killed
            ? `killed   ${o.id}: first by ${o.killedBy}${failing}, ${o.ms} ms — ${o.violation}`
            : `SURVIVED ${o.id}: ${o.seedsRun} seeds passed (${o.ms} ms) — ${mutant.bug}`,
        );
      }
    }),
  );
  outcomes.sort((a, b) => mutants.findIndex((m) => m.id === a.id) - mutants.findIndex((m) => m.id === b.id));
  const killed = outcomes.filter((o) => o.killed).length;
  const score = `${killed}/${outcomes.length}`;
  return { outcomes, score, allKilled: killed === outcomes.length, ms: Date.now() - started };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const args = parseArgs(process.argv.slice(2));
  const r = await mutationCheck(args);
  console.log(
    `mutation score ${r.score} (seeds ${args.first}..${args.first + args.seeds - 1}, ${Math.round(r.ms / 1000)} s)`,
  );
  process.exit(r.allKilled ? 0 : 1);
}

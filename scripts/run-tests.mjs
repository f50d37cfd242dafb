#!/usr/bin/env node
// Runs the whole test suite once and ends with the plain summary line CI reads:
//   N passed, N failed
// A test file that fails to load counts as one failure, so a broken import is never silent.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureServices } from './services.mjs';

const root = path.resolve(import.meta.dirname, '..');
const report = path.join(root, 'test-output', 'vitest.json');
fs.mkdirSync(path.dirname(report), { recursive: true });
fs.rmSync(report, { force: true });

await ensureServices({ quiet: true });

const args = [
  'exec',
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${report}`,
  ...process.argv.slice(2),
];
const child = spawnSync('pnpm', args, {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' },
});

let passed = 0;
let failed = 0;
let skipped = 0;
if (fs.existsSync(report)) {
  const json = JSON.parse(fs.readFileSync(report, 'utf8'));
  passed = json.numPassedTests ?? 0;
  failed = json.numFailedTests ?? 0;
  skipped = (json.numPendingTests ?? 0) + (json.numTodoTests ?? 0);
  for (const file of json.testResults ?? []) {
    if (file.status === 'failed' && (file.assertionResults ?? []).every((t) => t.status !== 'failed')) {
      console.log(
        `test file failed outside any test: ${path.relative(root, file.name)}\n${file.message ?? ''}`,
      );
      failed += 1;
    }
  }
} else {
  console.log('vitest wrote no report; counting the run as one failure');
  failed = 1;
}
if (skipped > 0) console.log(`${skipped} skipped`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || child.status !== 0 ? 1 : 0);

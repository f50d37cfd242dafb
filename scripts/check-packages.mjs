#!/usr/bin/env node
// Lints every public package the way npm users will receive it: publint on the packed
// package, and "are the types wrong" (ESM-only profile, as every package is ESM-only).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const dirs = fs
  .readdirSync(path.join(root, 'packages'))
  .map((d) => path.join(root, 'packages', d))
  .filter((d) => {
    const file = path.join(d, 'package.json');
    return fs.existsSync(file) && !JSON.parse(fs.readFileSync(file, 'utf8')).private;
  });

let failures = 0;
for (const dir of dirs) {
  const name = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name;
  for (const [tool, args] of [
    ['publint', ['exec', 'publint', '--strict', '--pack', 'pnpm', dir]],
    ['attw', ['exec', 'attw', '--pack', dir, '--profile', 'esm-only', '--format', 'ascii']],
  ]) {
    const r = spawnSync('pnpm', args, { cwd: root, encoding: 'utf8' });
    const out = `${r.stdout}${r.stderr}`.trim();
    if (r.status !== 0) {
      failures += 1;
      console.log(`✗ ${tool} ${name}\n${out}\n`);
    } else {
      console.log(`✓ ${tool} ${name}`);
    }
  }
}
if (failures > 0) {
  console.log(`check-packages: ${failures} failure(s)`);
  process.exit(1);
}
console.log(`check-packages: ${dirs.length} public packages pass publint and attw`);

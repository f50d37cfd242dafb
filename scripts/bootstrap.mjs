#!/usr/bin/env node
// One step from a fresh clone to a built workspace, with only Node 20 and npm on the machine:
// installs pnpm 12.4.2 when it is missing, installs dependencies from the lockfile, and builds
// every package (turbo skips what is already built). With --system-deps (`npm test`), first the
// system tools the tests drive (scripts/system-deps.mjs): installed when this machine can,
// otherwise the set-up stops with one line naming the command to run.
import { execSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { nativeBuildEnv } from './env.mjs';
import { ensureSystemTools } from './system-deps.mjs';

const PNPM_VERSION = '12.4.2';
const root = path.resolve(import.meta.dirname, '..');
const env = nativeBuildEnv();

function pnpmVersion() {
  const r = spawnSync('pnpm', ['--version'], { encoding: 'utf8', env });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

function run(cmd) {
  console.log(`$ ${cmd}`);
  execSync(cmd, { stdio: 'inherit', cwd: root, env });
}

if (process.argv.includes('--system-deps') && !ensureSystemTools()) process.exit(1);

if (pnpmVersion() !== PNPM_VERSION) {
  // corepack cannot fetch this version here; npm can.
  run(`npm install --global pnpm@${PNPM_VERSION}`);
}

const marker = path.join(root, 'node_modules', '.modules.yaml');
const lock = path.join(root, 'pnpm-lock.yaml');
const stale = !fs.existsSync(marker) || fs.statSync(lock).mtimeMs > fs.statSync(marker).mtimeMs;
if (stale) run(`pnpm install ${process.env.CI ? '--frozen-lockfile' : ''}`.trim());
if (!process.argv.includes('--no-build')) run('pnpm build');

#!/usr/bin/env node
// The system tools some tests drive for real, and their set-up: installed with apt-get when
// this machine can (root and apt-get), otherwise one line naming the command to run.
//   node scripts/system-deps.mjs                 missing tools: install, else exit 1 with the command
//   node scripts/system-deps.mjs --best-effort   the same, but exit 0 (CI: the tests that need a
//                                                missing tool fail with their own message)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** What the tests drive, the Debian package that has it, and for what. */
export const SYSTEM_TOOLS = [
  { command: 'chromium', pkg: 'chromium', why: 'the dashboard tests and the browser downloader' },
  { command: 'promtool', pkg: 'prometheus', why: 'the /metrics exposition and a real scrape' },
  { command: 'tinyproxy', pkg: 'tinyproxy', why: 'the proxy-pool tests: a second, independent HTTP proxy' },
];

/** `command` on this PATH (no shell: the lookup works with any PATH). */
function onPath(command, env = process.env) {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      // not here
    }
  }
  return false;
}

export function missingTools(env = process.env) {
  return SYSTEM_TOOLS.filter((tool) => !onPath(tool.command, env));
}

/** The command a person runs to install what is missing. */
export function installCommand(missing) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  return `${root ? '' : 'sudo '}apt-get install -y --no-install-recommends ${missing.map((t) => t.pkg).join(' ')}`;
}

/** Install what is missing when possible; true when every tool is there afterwards. */
export function ensureSystemTools({ quiet = false } = {}) {
  let missing = missingTools();
  if (missing.length === 0) return true;
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (root && onPath('apt-get')) {
    if (!quiet) console.log(`system-deps: installing ${missing.map((t) => t.pkg).join(' ')}`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env });
    spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing.map((t) => t.pkg)], {
      stdio: 'ignore',
      env,
    });
    missing = missingTools();
    if (missing.length === 0) return true;
  }
  console.log(
    `system-deps: the tests need ${missing.map((t) => `${t.command} (${t.why})`).join(', ')}; install with: ${installCommand(missing)}`,
  );
  return false;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const ok = ensureSystemTools();
  process.exit(ok || process.argv.includes('--best-effort') ? 0 : 1);
}

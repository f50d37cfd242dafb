// examples/dag-pipeline.ts and examples/login-session.ts run as documented against the fixture
// site: exit 0 and print the exact counts.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');

function runExample(file: string): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', path.join(root, file)],
    {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, MOCRA_LOG_LEVEL: 'error' },
    },
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

test('examples/dag-pipeline.ts: fan-out to api and stock, one join report, exact counts', () => {
  const { code, stdout, stderr } = runExample('examples/dag-pipeline.ts');
  expect(code, stderr).toBe(0);
  expect(stdout).toContain('report: 30 prices and 30 stock checks\n');
  expect(stdout).toContain('books 30, prices 30, stock 30, reports 1\n');
  // 3 listing + 30 book + 30 API + 30 stock pages + 1 report
  expect(stdout).toMatch(/91 items from 94 pages; joins 1\n$/);
});

test('examples/login-session.ts: logs in, logs in again once after the site ends the session', () => {
  const { code, stdout, stderr } = runExample('examples/login-session.ts');
  expect(code, stderr).toBe(0);
  expect(stdout.match(/logged in as alice/g)).toHaveLength(2);
  for (let page = 1; page <= 6; page++) expect(stdout).toContain(`page ${page}: alice\n`);
  expect(stdout).toMatch(/MOCRA_ERR_SESSION_EXPIRED: .* → retried\n/);
  expect(stdout).toMatch(/6 pages, 2 logins, 0 given up\n$/);
});

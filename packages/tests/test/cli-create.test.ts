// `mocra create <dir>` as a new user runs it: the built bin writes a project, `npm install`
// installs it (offline: an unreleased build links its own clone's built packages), and in the
// project `npm test`, `npm run typecheck` and `npx mocra run src/spider.ts` work as its README says.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { BIN } from './cli-bin.js';

const exec = promisify(execFile);
const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-cli-create-'));
const project = path.join(tmp, 'my-crawler');
const siteOptions = { catalog: { books: 60 } };
let site: FixtureSite;

beforeAll(async () => {
  site = await startFixtureSite(siteOptions);
});
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** A user's shell: none of the npm_* variables the test runner (pnpm) passes down. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key)) env[key] = value;
  }
  return { ...env, ...extra };
}

async function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<Ran> {
  const started = Date.now();
  try {
    const { stdout, stderr } = await exec(command, [...args], {
      cwd,
      env: userEnv(env),
      timeout: 120_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr, ms: Date.now() - started };
  } catch (err) {
    const failed = err as { code?: unknown; stdout?: string; stderr?: string };
    const code = typeof failed.code === 'number' ? failed.code : null;
    return {
      code,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? String(err),
      ms: Date.now() - started,
    };
  }
}

const mocra = (args: readonly string[], cwd = tmp) => run(process.execPath, [BIN, ...args], cwd);

test('create writes the project and says what to run next; a non-empty directory is refused', async () => {
  const created = await mocra(['create', 'my-crawler']);
  expect(created.stderr).toBe('');
  expect(created.code).toBe(0);
  expect(created.stdout).toContain('cd my-crawler');
  expect(created.stdout).toContain('npm test');
  for (const file of ['package.json', 'src/spider.ts', 'test/spider.test.ts', 'tsconfig.json', 'README.md']) {
    expect(existsSync(path.join(project, file)), file).toBe(true);
  }
  // An unreleased build links the packages of the clone it was built in: no registry needed.
  const manifest = JSON.parse(readFileSync(path.join(project, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  const clone = path.resolve(BIN, '../../../..');
  expect(manifest.dependencies.mocra).toBe(`file:${path.join(clone, 'packages/mocra')}`);
  expect(manifest.devDependencies['@mocra/testkit']).toBe(`file:${path.join(clone, 'packages/testkit')}`);

  const again = await mocra(['create', 'my-crawler']);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain('MOCRA_ERR_CREATE_NOT_EMPTY');
  expect(again.stderr).toContain('--force');

  const other = path.join(tmp, 'has-a-file');
  mkdirSync(other);
  writeFileSync(path.join(other, 'notes.txt'), 'mine');
  const forced = await mocra(['create', other, '--force']);
  expect(forced.code).toBe(0);
  expect(readFileSync(path.join(other, 'notes.txt'), 'utf8')).toBe('mine');
  expect(existsSync(path.join(other, 'src/spider.ts'))).toBe(true);

  const badLink = await mocra(['create', path.join(tmp, 'nowhere'), '--link', tmp]);
  expect(badLink.code).toBe(2);
  expect(badLink.stderr).toContain('MOCRA_ERR_CLI_USAGE');
}, 60_000);

test('in the new project: npm install, npm test, npm run typecheck, npx mocra run src/spider.ts', async () => {
  const install = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], project);
  expect(install.code, install.stderr).toBe(0);
  console.log(`npm install in the new project took ${install.ms} ms`);

  const tested = await run('npm', ['test'], project);
  expect(tested.code, tested.stdout + tested.stderr).toBe(0);
  expect(tested.stdout).toMatch(/^# pass 1$/m);
  expect(tested.stdout).toMatch(/^# fail 0$/m);

  const typed = await run('npm', ['run', 'typecheck'], project);
  expect(typed.code, typed.stdout + typed.stderr).toBe(0);

  const crawled = await run(
    'npx',
    ['mocra', 'run', 'src/spider.ts', '--out', 'books.jsonl', '--no-progress'],
    project,
    { START_URL: `${site.url}/books/page/1` },
  );
  expect(crawled.code, crawled.stderr).toBe(0);
  expect(crawled.stderr).toMatch(/spider books finished/);
  const books = readFileSync(path.join(project, 'books.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { title: string; url: string });
  expect(books.map((b) => b.title).sort()).toEqual(
    catalogBooks(siteOptions)
      .map((b) => b.title)
      .sort(),
  );
  expect(books.every((b) => b.url.startsWith(`${site.url}/book/`))).toBe(true);
}, 240_000);

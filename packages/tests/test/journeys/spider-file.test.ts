// Journey: a spider file written anywhere and run with `mocra run` — in a folder with no
// package.json, in one with "type": "module" and no mocra dependency, TypeScript or
// JavaScript — and what a user sees when their code throws: the first occurrence of each
// error with its message and a stack into their file (source-mapped for TypeScript), then a
// count of the repeats and the errors by code with an example URL. The same for a library user
// running `Mocra.builder()…run()` with the default log level.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, FIXTURES, mocra, REPO, readJsonl, startCommand, tempDir } from './harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('spider-file');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A first-page spider of the fixture catalog, in TypeScript (types and all). */
const TITLES_TS = (url: string) => `import { defineSpider } from 'mocra';

interface Title {
  title: string;
}

export default defineSpider<Title>({
  name: 'titles',
  startUrls: ['${url}/books/page/1'],
  parse(res, cx) {
    for (const a of res.$('article.product_pod h3 a').toArray()) cx.emit({ title: res.$(a).attr('title') ?? '' });
  },
});
`;

/** A new folder under the OS temp dir, with this package.json (or none). */
function folder(name: string, packageJson?: object): string {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  if (packageJson) writeFileSync(path.join(dir, 'package.json'), JSON.stringify(packageJson));
  return dir;
}

const firstPageTitles = () =>
  catalogBooks()
    .slice(0, 20)
    .map((b) => b.title);

describe('a spider file outside any project runs with the CLI’s own mocra', () => {
  test.each([
    { where: 'no package.json', manifest: undefined, file: 'titles.ts' },
    { where: '"type": "module", no mocra dependency', manifest: { type: 'module' }, file: 'titles.ts' },
    { where: 'no package.json, JavaScript', manifest: undefined, file: 'titles.mjs' },
  ])('$where ($file)', async ({ manifest, file }) => {
    const dir = folder(`project-${file}-${manifest ? 'typed' : 'bare'}`, manifest);
    const source = TITLES_TS(site.url);
    writeFileSync(
      path.join(dir, file),
      file.endsWith('.ts')
        ? source
        : source.replace(/interface Title \{[^}]*\}\n\n/, '').replace('<Title>', ''),
    );
    const r = await mocra(['run', file, '--out', 'titles.jsonl', '--no-progress'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(readJsonl<{ title: string }>(path.join(dir, 'titles.jsonl')).map((t) => t.title)).toEqual(
      firstPageTitles(),
    );
  });
});

describe('errors in user code reach the screen', () => {
  test('mocra run: the first TypeError of a parse that throws on every page, with a stack into the .ts file, then the counts', async () => {
    const dir = folder('throwing');
    const file = path.join(dir, 'broken.ts');
    writeFileSync(
      file,
      `import { defineSpider } from 'mocra';

interface Row {
  title: string;
}

export default defineSpider<Row>({
  name: 'broken',
  startUrls: [1, 2, 3].map((n) => '${site.url}/books/page/' + n),
  parse(res, cx) {
    const missing: { title: string } | undefined = res.status === 999 ? { title: '' } : undefined;
    cx.emit({ title: missing!.title });
  },
});
`,
    );
    const r = await mocra(['run', file, '--no-progress'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    // Shown once, with the message and the line that threw (line 12 of the .ts source, not of compiled code).
    expect(
      r.stderr.match(/TypeError: Cannot read properties of undefined \(reading 'title'\)/g),
    ).toHaveLength(1);
    expect(r.stderr).toMatch(
      /^mocra: parse of broken\/spider \(http:\/\/127\.0\.0\.1:\d+\/books\/page\/\d\) threw: .*\(MOCRA_ERR_PARSE_FAILED\)$/m,
    );
    expect(r.stderr).toContain(`at Object.parse (${file}:12:`);
    expect(r.stderr).toMatch(/repeats are counted in the summary/);
    // The summary: by code, with the count and an example URL.
    expect(r.stderr).toMatch(/errors {4}3 \(0 retried, 3 given up\)/);
    expect(r.stderr).toMatch(
      /MOCRA_ERR_PARSE_FAILED {2}3, e\.g\. http:\/\/127\.0\.0\.1:\d+\/books\/page\/\d/,
    );
  });

  test('a start() that throws says so (not "cannot reach :" with no URL) and shows where', async () => {
    const dir = folder('start-throws');
    const file = path.join(dir, 'starts.ts');
    writeFileSync(
      file,
      `import { defineSpider } from 'mocra';

export default defineSpider({
  name: 'starts',
  start() {
    throw new Error('no seeds today');
  },
  parse() {},
});
`,
    );
    const r = await mocra(['run', file, '--no-progress'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/cannot reach :/);
    expect(r.stderr).toContain(`at Object.start (${file}:6:`);
    expect(r.stderr).toMatch(/^mocra: nothing was fetched: .*no seeds today \(MOCRA_ERR_GENERATE_FAILED\)$/m);
  });

  test('a failed login says so and shows where (not "cannot reach :")', async () => {
    const dir = folder('login-fails');
    const file = path.join(dir, 'members.ts');
    writeFileSync(
      file,
      `import { defineSpider } from 'mocra';

export default defineSpider({
  name: 'members',
  startUrls: ['${site.url}/quotes/account'],
  shouldLogin: true,
  async login() {
    throw new Error('wrong password for alice');
  },
  parse() {},
});
`,
    );
    const r = await mocra(['run', file, '--no-progress'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/cannot reach :/);
    expect(r.stderr).toContain(`at Object.login (${file}:8:`);
    expect(r.stderr).toMatch(
      /^mocra: nothing was fetched: login of default@default failed after \d+ attempts: wrong password for alice \(MOCRA_ERR_LOGIN_FAILED\)$/m,
    );
  });

  test('a library user at the default log level: the first error with its stack, the count at the end, errors by code in the summary', async () => {
    const script = path.join(FIXTURES, 'journey-library-errors.ts');
    const line =
      readFileSync(script, 'utf8')
        .split('\n')
        .findIndex((l) => l.includes('JOURNEY-THROWS-HERE')) + 1;
    const r = await startCommand([process.execPath, '--import', 'tsx', script], {
      cwd: path.join(REPO, 'packages/tests'),
      env: { JOURNEY_SITE: site.url },
    }).done;
    expect(r.code, r.stderr).toBe(0);
    const records = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map(
        (l) =>
          JSON.parse(l) as { level: number; msg: string; err?: { stack: string }; errorsByCode?: object },
      );
    const firsts = records.filter((rec) => rec.err !== undefined);
    expect(firsts, r.stderr).toHaveLength(1);
    expect(firsts[0]!.level).toBe(40); // warn: shown by default
    expect(firsts[0]!.err!.stack).toContain(`${script}:${line}:`);
    expect(firsts[0]!.msg).toMatch(/the first of its kind; repeats are counted in the run summary/);
    const ended = records.find((rec) => rec.msg === 'run ended with 3 errors');
    expect(ended?.errorsByCode).toEqual({ MOCRA_ERR_PARSE_FAILED: 3 });
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      errorExamples: Record<string, { count: number; url: string }>;
    };
    expect(summary.errorExamples.MOCRA_ERR_PARSE_FAILED).toMatchObject({
      count: 3,
      url: expect.stringMatching(/\/books\/page\/\d$/),
    });
  });
});

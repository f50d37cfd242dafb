// The TypeScript blocks of README.md and docs/*.md: each one typechecks as a module of its own
// against the workspace's packages, unless the line before it marks it as a fragment (a few
// lines cut from a larger program, which would not compile alone):
//
//   <!-- snippet: fragment -->     not checked
//   <!-- snippet: run -->          typechecked, then run with tsx against the fixture site
//                                  (http://127.0.0.1:8080, the site's address in the docs, is
//                                  replaced by the test's own site): it must exit 0
//
// A block with no mark is typechecked. So a snippet a reader copies either compiles or says
// that it is a part of something.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { REPO, startCommand } from './journeys/harness.js';

type Mark = 'check' | 'fragment' | 'run';

interface Snippet {
  /** `docs/cli.md:42` (the line of the opening fence). */
  where: string;
  mark: Mark;
  code: string;
  /** Line of the first code line in the doc (1-based). */
  firstLine: number;
}

const DOCS = ['README.md', ...readdirSync(path.join(REPO, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);

function snippetsOf(file: string): Snippet[] {
  const lines = readFileSync(path.join(REPO, file), 'utf8').split('\n');
  const out: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```ts') continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`${file}:${i + 1}: a \`\`\`ts block that never ends`);
    const before = (lines[i - 1] ?? '').trim();
    const marked = /^<!-- snippet: (fragment|run) -->$/.exec(before);
    out.push({
      where: `${file}:${i + 1}`,
      mark: (marked?.[1] as Mark | undefined) ?? 'check',
      code: lines.slice(i + 1, end).join('\n'),
      firstLine: i + 2,
    });
    i = end;
  }
  return out;
}

const snippets = DOCS.flatMap(snippetsOf);
const checked = snippets.filter((s) => s.mark !== 'fragment');
/** Inside packages/tests/node_modules: resolves the workspace packages, outside any tsconfig and git. */
const dir = path.join(REPO, 'packages/tests/node_modules/.doc-snippets');
const fileOf = (s: Snippet) => path.join(dir, `${s.where.replace(/[/:.]/g, '_')}.mts`);

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // `export {}` makes even a block with no import a module (own scope, top-level await).
  for (const s of checked) writeFileSync(fileOf(s), `${s.code}\nexport {};\n`);
});
afterAll(async () => {
  await site?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the blocks are found: every doc, every fence', () => {
  expect(snippets.length).toBeGreaterThan(40);
  expect(new Set(snippets.map((s) => s.where.split(':')[0])).size).toBeGreaterThan(10);
  console.info(
    `${snippets.length} TypeScript blocks: ${checked.length} checked, ${snippets.length - checked.length} fragments`,
  );
});

test('every unmarked block typechecks as a module of its own', () => {
  const base = ts.readConfigFile(path.join(REPO, 'tsconfig.base.json'), ts.sys.readFile).config as {
    compilerOptions: object;
  };
  // The settings a reader's project would have (strict TypeScript on Node 20), not this
  // repository's stricter extras such as exactOptionalPropertyTypes.
  const { options } = ts.convertCompilerOptionsFromJson(
    {
      ...base.compilerOptions,
      noUncheckedIndexedAccess: false,
      exactOptionalPropertyTypes: false,
      noEmit: true,
      declaration: false,
      sourceMap: false,
    },
    REPO,
  );
  const program = ts.createProgram(checked.map(fileOf), options);
  const problems: string[] = [];
  for (const s of checked) {
    const source = program.getSourceFile(fileOf(s))!;
    for (const d of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const { line } = source.getLineAndCharacterOfPosition(d.start ?? 0);
      const file = s.where.slice(0, s.where.lastIndexOf(':'));
      problems.push(`${file}:${s.firstLine + line}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    }
  }
  expect(
    problems,
    'fix the block, or mark it <!-- snippet: fragment --> if it is a part of a program',
  ).toEqual([]);
}, 120_000);

describe('blocks marked to run', () => {
  const runs = snippets.filter((s) => s.mark === 'run');
  test('there are some (getting-started.md among them)', () => {
    expect(runs.some((s) => s.where.startsWith('docs/getting-started.md'))).toBe(true);
  });
  test.each(runs.map((s) => [s.where, s] as const))(
    '%s runs to its end',
    async (_where, s) => {
      const file = fileOf(s).replace(/\.mts$/, '.run.mts');
      writeFileSync(file, `${s.code.replaceAll('http://127.0.0.1:8080', site.url)}\nexport {};\n`);
      const r = await startCommand([process.execPath, '--import', 'tsx', file], {
        cwd: path.join(REPO, 'packages/tests'),
        timeoutMs: 60_000,
      }).done;
      expect(r.code, `${s.where}\n${r.stdout}\n${r.stderr}`).toBe(0);
    },
    90_000,
  );
});

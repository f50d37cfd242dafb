/**
 * Keeps README.md honest: every ```ts block is type-checked (strict, as this repo compiles) and
 * run, and every `console.log(...); // expected` line must print exactly what its comment says.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';
import ts from 'typescript';
import { afterAll, describe, expect, test } from 'vitest';

const pkgDir = path.resolve(import.meta.dirname, '..');
const entry = path.join(pkgDir, 'src/index.ts');
const readme = fs.readFileSync(path.join(pkgDir, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-dag-readme-'));
// The examples are ES modules (top-level await, imports), as in any `"type": "module"` project.
fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');

/** Each block as a module that imports the package from its sources. */
const files = blocks.map((code, i) => {
  const file = path.join(dir, `block-${i}.ts`);
  fs.writeFileSync(file, code.replaceAll("from '@mocra/dag'", `from '${entry}'`));
  return file;
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('README.md', () => {
  test('has examples', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(10);
  });

  test('every example type-checks', () => {
    const program = ts.createProgram(files, {
      target: ts.ScriptTarget.ES2023,
      lib: ['lib.es2023.d.ts'],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      customConditions: ['@mocra/source'],
      types: ['node'],
      typeRoots: [path.resolve(pkgDir, '../../node_modules/@types')],
      strict: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      verbatimModuleSyntax: true,
      allowImportingTsExtensions: true,
      noEmit: true,
      skipLibCheck: true,
    });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file === undefined || files.includes(path.resolve(d.file.fileName)))
      .map((d) => {
        const where =
          d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
        const block = d.file ? files.indexOf(path.resolve(d.file.fileName)) : -1;
        return `block ${block} line ${(where?.line ?? 0) + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
    expect(diagnostics).toEqual([]);
  }, 60_000);

  test.each(blocks.map((code, i) => [i, code] as const))(
    'example %i runs and prints what it says',
    async (i, code) => {
      const lines = code.split('\n');
      // Tag every console.log with its line so output can be matched to the comment on that line.
      const tagged = lines.map((line, n) => line.replace(/console\.log\(/g, `__readmeLog(${n}, `)).join('\n');
      const file = path.join(dir, `run-${i}.ts`);
      fs.writeFileSync(file, tagged.replaceAll("from '@mocra/dag'", `from '${entry}'`));
      const printed = new Map<number, string[]>();
      (globalThis as Record<string, unknown>).__readmeLog = (n: number, ...args: unknown[]) => {
        printed.set(n, [...(printed.get(n) ?? []), format(...args)]);
      };
      try {
        await import(pathToFileURL(file).href);
      } finally {
        delete (globalThis as Record<string, unknown>).__readmeLog;
      }
      lines.forEach((line, n) => {
        const expected = /console\.log\(.*\);\s*\/\/ (.*)$/.exec(line)?.[1];
        if (expected === undefined) return;
        // util.inspect wraps long arrays over lines; the comment shows them on one.
        const got = printed.get(n)?.[0]?.replace(/\s+/g, ' ');
        expect(got, `block ${i}, line ${n + 1}: ${line.trim()}`).toBe(expected.replace(/\s+/g, ' '));
      });
    },
  );
});

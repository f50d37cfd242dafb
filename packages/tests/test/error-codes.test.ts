// docs/errors.md and the code tables exported by every package must list the same codes.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');
const doc = fs.readFileSync(path.join(root, 'docs/errors.md'), 'utf8');

/** Codes listed in the docs, per `## <package>` section. */
function documented(): Map<string, Set<string>> {
  const sections = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  for (const line of doc.split('\n')) {
    const heading = /^## (\S+)/.exec(line);
    if (heading) {
      current = new Set();
      sections.set(heading[1]!, current);
      continue;
    }
    const row = /^\|\s*`(MOCRA_ERR_[A-Z0-9_]+)`\s*\|/.exec(line);
    if (row && current) current.add(row[1]!);
  }
  return sections;
}

const PACKAGES = [
  '@mocra/core',
  '@mocra/dag',
  '@mocra/cluster',
  '@mocra/proxy',
  '@mocra/store',
  '@mocra/testkit',
  'mocra',
];

describe('docs/errors.md', () => {
  const docs = documented();
  for (const name of PACKAGES) {
    test(`${name}: every exported code is documented and every documented code exists`, async () => {
      const mod = (await import(name)) as Record<string, unknown>;
      const tables = Object.entries(mod).filter(([key]) => key.endsWith('_ERROR_CODES'));
      const exported = new Set(tables.flatMap(([, table]) => Object.keys(table as object)));
      const listed = docs.get(name) ?? new Set<string>();
      expect([...listed].filter((c) => !exported.has(c)).sort(), 'documented but not exported').toEqual([]);
      expect([...exported].filter((c) => !listed.has(c)).sort(), 'exported but not documented').toEqual([]);
    });
  }
});

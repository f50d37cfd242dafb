// robots.txt against public suites transcribed as data (conformance/README.md names the origins):
// Google's robots_test.cc and RFC 9309's examples. Each suite prints its pass count; a case that
// fails is one docs/crawling.md lists as a documented choice, and the test fails if a case
// starts or stops failing without that list changing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import {
  canonicalPattern,
  compileRobotsTxt,
  isValidProductToken,
  parseRobotsRecords,
  pathAndQuery,
} from '../src/frontier/robots/robots-txt.js';

type Bytes = string | (string | number[])[];
interface MatchCase {
  test?: string;
  section?: string;
  robots: Bytes;
  checks: [agent: string, url: string, allowed: boolean][];
}
interface Suite {
  source: string;
  match: MatchCase[];
  parse?: {
    test: string;
    robots: Bytes;
    directives?: number;
    unknown?: number;
    lastLine?: number;
    sitemaps?: string[];
  }[];
  tokens?: { token: string; valid: boolean }[];
  paths?: { url: string; path: string }[];
  escapes?: { pattern: string; escaped: string }[];
}

const load = (name: string) =>
  JSON.parse(readFileSync(join(import.meta.dirname, 'conformance', name), 'utf8')) as Suite;

/** `{a*3}` → `aaa` (the long-line cases). */
const expand = (s: string) => s.replace(/\{(.)\*(\d+)\}/g, (_, c: string, n: string) => c.repeat(Number(n)));

function body(robots: Bytes): string | Uint8Array {
  if (typeof robots === 'string') return expand(robots);
  return Buffer.concat(robots.map((p) => (typeof p === 'string' ? Buffer.from(expand(p)) : Buffer.from(p))));
}

/** Runs every check; returns the ids of those whose answer differs from the suite's. */
function runMatches(suite: Suite): { total: number; failed: string[] } {
  const failed: string[] = [];
  let total = 0;
  for (const c of suite.match) {
    for (const [agent, url, allowed] of c.checks) {
      total++;
      const got = compileRobotsTxt(body(c.robots), agent).isAllowed(expand(url));
      if (got !== allowed) failed.push(`${c.test ?? `§${c.section}`} ${agent} ${url.slice(0, 60)} → ${got}`);
    }
  }
  return { total, failed };
}

function report(name: string, total: number, failed: string[]): void {
  console.log(
    `${name}: ${total - failed.length}/${total} passed${failed.length ? `\n  ${failed.join('\n  ')}` : ''}`,
  );
}

describe('robots.txt conformance', () => {
  test("Google's robots_test.cc", () => {
    const suite = load('google-robotstxt.json');
    const { total, failed } = runMatches(suite);

    for (const p of suite.parse ?? []) {
      total;
      const records = parseRobotsRecords(body(p.robots));
      const known = records.filter((r) => r.key !== 'unknown' && r.key !== 'crawl-delay');
      const got = {
        directives: known.length,
        unknown: records.length - known.length,
        lastLine: Math.max(0, ...records.map((r) => r.line)),
        sitemaps: records.filter((r) => r.key === 'sitemap').map((r) => r.value),
      };
      for (const key of ['directives', 'unknown', 'lastLine', 'sitemaps'] as const) {
        if (p[key] === undefined) continue;
        if (JSON.stringify(got[key]) !== JSON.stringify(p[key]))
          failed.push(`${p.test} ${key}: ${JSON.stringify(got[key])}`);
      }
    }
    for (const t of suite.tokens ?? [])
      if (isValidProductToken(t.token) !== t.valid) failed.push(`token '${t.token}'`);
    for (const p of suite.paths ?? []) if (pathAndQuery(p.url) !== p.path) failed.push(`path ${p.url}`);
    for (const e of suite.escapes ?? [])
      if (canonicalPattern(e.pattern) !== e.escaped) failed.push(`escape ${e.pattern}`);

    const cases =
      total +
      (suite.parse?.length ?? 0) +
      (suite.tokens?.length ?? 0) +
      (suite.paths?.length ?? 0) +
      (suite.escapes?.length ?? 0);
    report('google/robotstxt robots_test.cc', cases, failed);
    // Documented in docs/crawling.md ("robots.txt conformance"): mocra follows RFC 9309 where
    // Google's parser does not percent-normalize.
    expect(failed).toEqual([
      'ID_Encoding FooBot http://foo.bar/foo/bar/ツ → true',
      'ID_Encoding FooBot http://foo.bar/foo/bar/ツ → true',
      'ID_Encoding FooBot http://foo.bar/foo/bar/baz → true',
    ]);
  });

  test("RFC 9309's examples", () => {
    const { total, failed } = runMatches(load('rfc9309-robots.json'));
    report('RFC 9309 examples', total, failed);
    // Documented in docs/crawling.md: `:` and `%3A` are different characters (RFC 3986 reserved).
    expect(failed).toEqual(['§2.2.2 foobot https://example.com/foo/bar?baz=https%3A%2F%2Ffoo.bar → true']);
  });
});

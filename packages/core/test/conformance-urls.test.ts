// Link resolution against WPT's urltestdata (the cases resolved against an http(s) base, as a
// link on a page is), transcribed as data (conformance/README.md). Each href goes through
// extractLinks as an <a href> of a page at the base URL; a link's `url` must be the browser's
// href without its fragment, and an href the parser rejects or that is not http(s) gives no link.
// A failing case is a documented choice in docs/crawling.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { extractLinks } from '../src/frontier/links/extract-links.js';

interface UrlCase {
  input: string;
  base: string;
  href?: string;
  failure?: true;
}

const suite = JSON.parse(
  readFileSync(join(import.meta.dirname, 'conformance', 'wpt-urltestdata.json'), 'utf8'),
) as { tests: UrlCase[] };

const attribute = (s: string) => s.replaceAll('&', '&amp;').replaceAll('"', '&quot;');

test('WPT urltestdata: links resolved against an http(s) page', () => {
  const failed: string[] = [];
  for (const c of suite.tests) {
    const page = extractLinks(`<a href="${attribute(c.input)}">x</a>`, { pageUrl: c.base });
    const got = page.links[0]?.url;
    const crawlable = c.href !== undefined && /^https?:\/\//.test(c.href);
    const expected = crawlable ? c.href!.split('#')[0] : undefined;
    if (got !== expected)
      failed.push(`${JSON.stringify(c.input)} on ${c.base}: ${got}, expected ${expected}`);
  }
  const total = suite.tests.length;
  console.log(
    `WPT urltestdata (http(s) base): ${total - failed.length}/${total} passed${failed.length ? `\n  ${failed.join('\n  ')}` : ''}`,
  );
  // Documented in docs/crawling.md: an empty href or one that is only a fragment points into the
  // page itself, and is not a link to follow.
  expect(failed.map((f) => f.slice(0, f.indexOf(' on ')))).toEqual([
    '""',
    '"  \\t"',
    '"#"',
    '"#/"',
    '"#\\\\"',
    '"#;?"',
    '"#β"',
    '""',
    '"#link"',
  ]);
});

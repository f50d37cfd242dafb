// Encoding sniffing against html5lib-tests' encoding/ data, transcribed as data
// (conformance/README.md). Prints the pass count; a failing case is a documented choice in
// docs/crawling.md, and the test fails if a case starts or stops failing without that list changing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { detectCharset, normalizeCharset } from '../src/model/charset.js';

interface EncodingCase {
  file: string;
  index: number;
  data: string;
  encoding: string;
}

const suite = JSON.parse(
  readFileSync(join(import.meta.dirname, 'conformance', 'html5lib-encoding.json'), 'utf8'),
) as { tests: EncodingCase[] };

test('html5lib-tests encoding/', () => {
  const failed: string[] = [];
  for (const c of suite.tests) {
    // A text/html response without a charset parameter, as the suite assumes.
    const got = detectCharset(Buffer.from(c.data, 'latin1'), 'text/html').charset;
    if (got !== normalizeCharset(c.encoding))
      failed.push(`${c.file} #${c.index}: ${got}, expected ${c.encoding}`);
  }
  const total = suite.tests.length;
  console.log(
    `html5lib-tests encoding/: ${total - failed.length}/${total} passed${failed.length ? `\n  ${failed.join('\n  ')}` : ''}`,
  );
  // Documented in docs/crawling.md: mocra runs no scripts.
  expect(failed).toEqual(['scripted/tests1.dat #0: windows-1252, expected iso-8859-2']);
});

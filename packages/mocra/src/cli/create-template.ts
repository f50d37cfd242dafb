/**
 * The files `mocra create` writes: a spider for the fixture site's book catalog, a test that
 * runs it against `@mocra/testkit`'s offline site, and the package.json, tsconfig and README
 * around them. `deps` are the version specifiers (registry ranges, or `file:` links to a clone
 * of the repository) chosen by create-command.ts.
 */

export interface TemplateDeps {
  mocra: string;
  '@mocra/testkit': string;
  tsx: string;
  typescript: string;
  '@types/node': string;
}

export interface TemplateFile {
  path: string;
  text: string;
}

export function projectFiles(name: string, deps: TemplateDeps): TemplateFile[] {
  const manifest = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    scripts: {
      test: 'node --import tsx --test test/*.test.ts',
      typecheck: 'tsc --noEmit -p .',
      site: 'mocra-fixture-site --port 8080',
      crawl: 'mocra run src/spider.ts --out books.jsonl',
    },
    dependencies: { mocra: deps.mocra },
    devDependencies: {
      '@mocra/testkit': deps['@mocra/testkit'],
      '@types/node': deps['@types/node'],
      tsx: deps.tsx,
      typescript: deps.typescript,
    },
  };
  return [
    { path: 'package.json', text: `${JSON.stringify(manifest, null, 2)}\n` },
    { path: 'src/spider.ts', text: SPIDER },
    { path: 'test/spider.test.ts', text: TEST },
    { path: 'tsconfig.json', text: `${JSON.stringify(TSCONFIG, null, 2)}\n` },
    { path: '.gitignore', text: 'node_modules/\n*.jsonl\n' },
    { path: 'README.md', text: readme(name) },
  ];
}

const SPIDER = `import { defineSpider } from 'mocra';

export interface Book {
  title: string;
  price: string;
  url: string;
}

/** Where \`mocra run\` starts: $START_URL, else the fixture site of \`npm run site\`. */
export const START_URL = process.env.START_URL ?? 'http://127.0.0.1:8080/books/page/1';

/** Every book of a catalog: the listing pages one after another, a book per product card. */
export function booksSpider(startUrl: string) {
  return defineSpider<Book>({
    name: 'books',
    startUrls: [startUrl],
    parse(res, cx) {
      const $ = res.$;
      for (const card of $('article.product_pod').toArray()) {
        const link = $(card).find('h3 a');
        cx.emit({
          title: link.attr('title') ?? link.text(),
          price: $(card).find('.price_color').text(),
          url: new URL(link.attr('href') ?? '', res.url).href,
        });
      }
      const next = $('li.next a').attr('href');
      if (next) cx.follow(next);
    },
  });
}

// \`mocra run src/spider.ts\` runs the default export.
export default booksSpider(START_URL);
`;

const TEST = `import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { Mocra } from 'mocra';
import { type Book, booksSpider } from '../src/spider.js';

// The fixture site serves a book catalog on 127.0.0.1 that is the same on every run: the test
// knows every book the spider must find, and needs no internet.
const options = { catalog: { books: 45 } };
let site: FixtureSite;
before(async () => {
  site = await startFixtureSite(options);
});
after(() => site.close());

test('the spider finds every book of the catalog, once', async () => {
  const books: Book[] = [];
  const summary = await Mocra.builder()
    .spider(booksSpider(\`\${site.url}/books/page/1\`), (book) => {
      books.push(book);
    })
    .run();
  const expected = catalogBooks(options).map((book) => book.title);
  assert.deepEqual(books.map((book) => book.title).sort(), expected.sort());
  assert.equal(summary.pages, 3); // 45 books, 20 a page
  assert.ok(books.every((book) => book.price.startsWith('£')));
});
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noUncheckedIndexedAccess: true,
    verbatimModuleSyntax: true,
    skipLibCheck: true,
    types: ['node'],
    noEmit: true,
  },
  include: ['src', 'test'],
};

function readme(name: string): string {
  return `# ${name}

A [mocra](https://github.com/mocra-ts/mocra) crawler: \`src/spider.ts\` collects the books of a
catalog, \`test/spider.test.ts\` checks it against an offline fixture site.

\`\`\`sh
npm install
npm test              # runs the spider against @mocra/testkit's fixture site (no internet)
npm run typecheck
\`\`\`

Run the spider with the \`mocra\` command, against the fixture site or a site of your own:

\`\`\`sh
npm run site          # serves the fixture site on http://127.0.0.1:8080 (Ctrl-C stops it)
npx mocra run src/spider.ts --out books.jsonl
START_URL=https://example.com/books/ npx mocra run src/spider.ts --out books.jsonl
\`\`\`

\`npx mocra run --help\` lists the runtime flags (concurrency, delay, \`--persist\` to resume,
\`--cache\` for development), and \`npx mocra shell <url>\` opens a page in a REPL to try
selectors on it.
`;
}

// Journey: what `mocra` says when something is wrong, as a user reads it — each message that
// used to mislead, checked through the built bin: a redirect loop's chain, a host that cannot be
// reached (its robots.txt neither), one error code per line, a start URL that is no URL, the
// version, a glob that cannot be right, where records go without --out, and a progress bar
// that never swallows the next message on a terminal.
import { readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, BIN, mocra, REPO, readJsonl, screenLines, startCommand, tempDir } from './harness.js';

let site: FixtureSite;
let root: string;
/** A port on 127.0.0.1 nobody listens on. */
let closedPort: number;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('messages');
  closedPort = await new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Run a command line under a pseudo-terminal (util-linux `script`): stdout and stderr are a TTY. */
function underTerminal(args: string[], timeoutMs = 60_000) {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return startCommand(['script', '-qefc', quoted, '/dev/null'], { timeoutMs }).done;
}

describe('messages that used to mislead', () => {
  test('a redirect loop shows its whole chain', async () => {
    const start = `${site.url}/redirect-loop/3/0`;
    const r = await mocra(['crawl', start, '--no-robots', '--retries', '0', '--no-progress']);
    expect(r.code).toBe(1);
    const chain = [0, 1, 2, 0].map((i) => `${site.url}/redirect-loop/3/${i}`).join(' → ');
    expect(r.stderr).toContain(
      `cannot reach ${start}: redirect loop: ${chain} (MOCRA_ERR_START_UNREACHABLE)`,
    );
    expect(r.stderr).not.toMatch(/→ h…/);
  });

  test('a host whose robots.txt cannot be fetched is unreachable, not "dropped by robots.txt"', async () => {
    const start = `http://127.0.0.1:${closedPort}/`;
    const r = await mocra(['crawl', start, '--retries', '0', '--no-progress']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/0 dropped by robots\.txt, 1 not fetched \(robots\.txt unreachable\)/);
    expect(r.stderr).toContain(
      `mocra: cannot reach ${start}: connect ECONNREFUSED 127.0.0.1:${closedPort} (fetching its robots.txt) (MOCRA_ERR_START_UNREACHABLE)`,
    );
  });

  test('an unreachable start URL: its reason once and one code', async () => {
    const start = `http://127.0.0.1:${closedPort}/`;
    const r = await mocra(['crawl', start, '--retries', '0', '--no-robots', '--no-progress']);
    expect(r.code).toBe(1);
    const line = r.stderr.split('\n').find((l) => l.startsWith('mocra: cannot reach'));
    expect(line).toBe(
      `mocra: cannot reach ${start}: connect ECONNREFUSED 127.0.0.1:${closedPort} (MOCRA_ERR_START_UNREACHABLE)`,
    );
  });

  test.each(['http://a..b/', 'http://-x-/', 'http://exa mple.com/'])(
    'a start URL that is no URL (%s) is a usage error: exit 2, nothing fetched',
    async (url) => {
      site.resetStats();
      const r = await mocra(['crawl', url, '--no-progress']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/MOCRA_ERR_CLI_USAGE/);
      expect(r.stderr).not.toMatch(/cannot reach/);
    },
  );

  test('--version prints the version of the mocra package', async () => {
    const { version } = JSON.parse(readFileSync(path.join(REPO, 'packages/mocra/package.json'), 'utf8')) as {
      version: string;
    };
    const r = await mocra(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split(' ')[0]).toBe(version);
    if (version === '0.0.0') expect(r.stdout).toMatch(/unreleased/);
  });

  test("--include '[' is refused (exit 2) and says why", async () => {
    const r = await mocra(['crawl', `${site.url}/`, '--include', '[']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /--include <pattern>' argument '\[' is invalid\. invalid glob '\[': '\[' is not closed/,
    );
  });
});

describe('where records go without --out', () => {
  test('to standard output when it is a pipe', async () => {
    const r = await mocra([
      'crawl',
      `${site.url}/books/page/1`,
      '--max-pages',
      '3',
      '--no-robots',
      '--no-progress',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const records = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { url: string });
    expect(records).toHaveLength(3);
    expect(r.stderr).toMatch(/out {7}standard output: 3 records/);
  });

  test('on a terminal: not kept, and the CLI says so at the start and in the summary', async () => {
    const r = await underTerminal(['crawl', `${site.url}/books/page/1`, '--max-pages', '2', '--no-robots']);
    expect(r.code, r.stdout).toBe(0);
    const screen = screenLines(r.stdout);
    expect(screen).toContain(
      'mocra: no --out: records are not kept (give --out pages.jsonl, or pipe standard output)',
    );
    expect(screen.some((l) => l.startsWith('  out       none: records were not kept'))).toBe(true);
    expect(screen.some((l) => l.startsWith('{"url"'))).toBe(false);
  });
});

test('on a terminal the progress bar never swallows the next message', async () => {
  // The dashboard's URL is printed while the bar is up; a slow site keeps the bar drawn.
  site.setLatency(20, 0);
  try {
    const out = path.join(root, 'bar.jsonl');
    const r = await underTerminal([
      'crawl',
      `${site.url}/books/page/1`,
      '--max-pages',
      '30',
      '--concurrency',
      '2',
      '--dashboard',
      '0',
      '--out',
      out,
    ]);
    expect(r.code, r.stdout).toBe(0);
    const screen = screenLines(r.stdout);
    const dashboard = screen.filter((l) => l.includes('mocra: dashboard at'));
    expect(dashboard, r.stdout).toHaveLength(1);
    expect(dashboard[0]).toMatch(/^mocra: dashboard at http:\/\/127\.0\.0\.1:\d+/);
    // The bar ends with the final figures on a line of its own, and the summary follows.
    expect(
      screen.some((l) => /^█+░* 30 pages \| 0 queued \| [\d.]+\/s \| 0 errors \| \d\d:\d\d$/.test(l)),
    ).toBe(true);
    expect(screen.some((l) => l.startsWith('mocra: crawl of'))).toBe(true);
    expect(readJsonl(out)).toHaveLength(30);
  } finally {
    site.setLatency(0, 0);
  }
}, 90_000);

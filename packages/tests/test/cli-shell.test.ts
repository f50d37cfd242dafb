// `mocra shell <url>` as a user meets it: the built bin in a terminal (a pseudo-terminal from
// util-linux `script`), with tab completion, and with commands piped to its standard input.
// Against the fixture site: res.status, $('title'), fetch('/…') moving res and $, Ctrl-C ending a
// slow fetch, the download flags (-H, --user-agent) on what is sent, view(), and typed errors
// that do not end the REPL.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { stripVTControlCharacters } from 'node:util';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BIN } from './cli-bin.js';

const hasScript = spawnSync('script', ['--version']).status === 0;

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

/** Output without terminal escapes (colours, cursor moves) and carriage returns. */
const plain = (s: string) => stripVTControlCharacters(s).replace(/\r/g, '');

interface Session {
  child: ChildProcess;
  exited: Promise<number | null>;
  output(): string;
  /** Waits (bounded) for `re` in the output written after `from`; throws with the output otherwise. */
  waitFor(re: RegExp, from: number, timeoutMs?: number): Promise<RegExpExecArray>;
}

function session(command: string, args: readonly string[]): Session {
  const child = spawn(command, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, TERM: 'xterm' },
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => {
    out += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    output: () => plain(out),
    async waitFor(re, from, timeoutMs = 20_000) {
      for (let waited = 0; waited < timeoutMs; waited += 50) {
        const m = re.exec(plain(out).slice(from));
        if (m) return m;
        if (child.exitCode !== null) break;
        await sleep(50);
      }
      throw new Error(`no output matching ${re} after offset ${from}; output:\n${plain(out)}`);
    },
  };
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describe.skipIf(!hasScript)('in a terminal', () => {
  test('res, $, fetch, tab completion of re<TAB>, Ctrl-C ending a fetch, an error that does not end the REPL', async () => {
    const command = [process.execPath, BIN, 'shell', `${site.url}/books/page/1`].map(quote).join(' ');
    const s = session('script', ['-qfec', command, '/dev/null']);
    const type = async (line: string) => {
      const from = s.output().length;
      s.child.stdin!.write(`${line}\r`);
      return from;
    };
    try {
      await s.waitFor(/mocra> /, 0);
      let from = await type('res.status');
      await s.waitFor(/^200$/m, from);
      from = await type("$('title').text()");
      await s.waitFor(/'All books \| Page 1 of \d+ \| Fixture Books'/, from);
      from = await type("fetch('/books/page/2')");
      await s.waitFor(/\[mocra\] 200 http:\/\/127\.0\.0\.1:\d+\/books\/page\/2 /, from);
      from = await type('res.url');
      await s.waitFor(/'http:\/\/127\.0\.0\.1:\d+\/books\/page\/2'/, from);

      // Keys one by one, as typed: readline completes only keys that do not arrive as a paste.
      from = s.output().length;
      for (const key of ['r', 'e', '\t', '\t']) {
        s.child.stdin!.write(key);
        await sleep(150);
      }
      await s.waitFor(/^res$[\s\S]*mocra> re/m, from);
      expect(s.output().slice(from)).toMatch(/^require$/m); // the REPL's own names are listed beside ours
      s.child.stdin!.write('\x15'); // Ctrl-U: clear the line

      // Ctrl-C ends a fetch in flight; res stays the page before.
      from = await type("fetch('/delay/30000')");
      for (let i = 0; i < 200 && (site.stats().paths['/delay/30000'] ?? 0) === 0; i++) await sleep(50);
      s.child.stdin!.write('\x03');
      await s.waitFor(/AbortedError: download of \S+\/delay\/30000 aborted/, from);
      from = await type('res.url');
      await s.waitFor(/'http:\/\/127\.0\.0\.1:\d+\/books\/page\/2'/, from);

      from = await type('nope.x');
      await s.waitFor(/ReferenceError: nope is not defined/, from);
      from = await type('6 * 7');
      await s.waitFor(/^42$/m, from);
      await type('.exit');
      expect(await s.exited).toBe(0);
    } finally {
      s.child.kill('SIGKILL');
    }
  }, 60_000);
});

test('commands piped to standard input run one after another, with the download flags applied', async () => {
  const s = session(process.execPath, [
    BIN,
    'shell',
    `${site.url}/books/page/1`,
    '-H',
    'x-demo: from the shell',
    '--user-agent',
    'shell-test/1.0',
  ]);
  s.child.stdin!.end(
    [
      'res.status',
      "$('title').text()",
      "fetch('/books/page/2')",
      'res.url',
      "$('h3 a').first().attr('title')",
      'nope.x',
      "fetch('/echo')",
      "res.json().headers['x-demo']",
      "res.json().headers['user-agent']",
      'view()',
      '',
    ].join('\n'),
  );
  expect(await s.exited).toBe(0);
  const out = s.output();
  expect(out).toMatch(/^mocra> 200$/m);
  expect(out).toMatch(/^mocra> 'All books \| Page 1 of \d+ \| Fixture Books'$/m);
  expect(out).toMatch(/^mocra> \[mocra\] 200 http:\/\/127\.0\.0\.1:\d+\/books\/page\/2 /m);
  expect(out).toContain(`mocra> '${site.url}/books/page/2'`);
  // The first book of the second listing page: res and $ followed fetch().
  expect(out).toContain(`mocra> '${catalogBooks()[20]!.title}'`);
  expect(out).toContain('ReferenceError: nope is not defined');
  expect(out).toContain("mocra> 'from the shell'");
  expect(out).toContain("mocra> 'shell-test/1.0'");
  const viewed = /mocra> '([^']+page-1\.json)'/.exec(out);
  expect(viewed, out).not.toBeNull();
  expect(existsSync(viewed![1]!)).toBe(true);
  expect(JSON.parse(readFileSync(viewed![1]!, 'utf8'))).toMatchObject({ method: 'GET', url: '/echo' });
}, 60_000);

test('a start URL that is not http(s) is a usage error (exit 2)', async () => {
  const s = session(process.execPath, [BIN, 'shell', 'ftp://example.com/']);
  s.child.stdin!.end();
  expect(await s.exited).toBe(2);
  expect(s.output()).toContain('MOCRA_ERR_CLI_USAGE');
}, 30_000);

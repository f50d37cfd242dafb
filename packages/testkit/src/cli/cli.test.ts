import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, test } from 'vitest';
import { get } from '../__fixtures__/http.js';
import { parseCliArgs } from './args.js';

describe('mocra-fixture-site flags', () => {
  test('map to FixtureSiteOptions', () => {
    expect(parseCliArgs([])).toEqual({ options: {}, json: false, help: false });
    expect(
      parseCliArgs([
        '--port',
        '8080',
        '--hosts',
        '3',
        '--seed',
        '7',
        '--books',
        '200',
        '--categories',
        '5',
        '--quotes',
        '30',
        '--latency',
        '5',
        '--jitter',
        '2',
        '--crawl-delay',
        '1.5',
        '--log-size',
        '100',
        '--json',
      ]),
    ).toEqual({
      options: {
        port: 8080,
        hosts: 3,
        seed: 7,
        latencyMs: 5,
        latencyJitterMs: 2,
        requestLogSize: 100,
        catalog: { books: 200, categories: 5 },
        quotes: { count: 30 },
        robots: { crawlDelay: 1.5 },
      },
      json: true,
      help: false,
    });
    expect(parseCliArgs(['-h']).help).toBe(true);
  });

  test.each([[['--port', 'x']], [['--bogus']], [['--crawl-delay', '-1']], [['extra']]])(
    '%j is refused',
    (argv) => {
      expect(() => parseCliArgs(argv)).toThrowError(
        expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION' }),
      );
    },
  );
});

describe('mocra-fixture-site process', () => {
  const cli = path.resolve(import.meta.dirname, '../cli.ts');
  const run = (args: string[]) =>
    spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', cli, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  test('prints its URLs, serves, and exits 0 on SIGTERM', async () => {
    const child = run(['--hosts', '2', '--json']);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error('exited before printing its URL')));
      });
      const printed = JSON.parse(line) as { url: string; urls: string[]; port: number };
      expect(printed.urls).toHaveLength(2);
      expect(printed.url).toBe(`http://127.0.0.1:${printed.port}`);
      expect((await get(`${printed.urls[1]}/books/page/1`)).status).toBe(200);
      const stats = JSON.parse((await get(`${printed.url}/__fixture/stats`)).text);
      expect(stats.requests).toBe(1);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  test('exits 2 with the usage on a bad flag', async () => {
    const child = run(['--hosts', 'many']);
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('--hosts: expected a non-negative integer');
    expect(stderr).toContain('Usage: mocra-fixture-site');
  });
});

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type ConfigIssue, ConfigReadError, ConfigSyntaxError, ConfigValidationError } from '../errors.js';
import { loadConfig, resolveConfig } from './load.js';

function issuesOf(run: () => unknown): ConfigIssue[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigValidationError);
    expect((err as ConfigValidationError).code).toBe('MOCRA_ERR_CONFIG_INVALID');
    return [...(err as ConfigValidationError).issues];
  }
  throw new Error('expected a ConfigValidationError');
}

const fromToml = (toml: string) => () => resolveConfig({ toml, file: 'mocra.toml', env: false });

describe('resolveConfig: defaults and precedence', () => {
  test('no sources at all gives the documented defaults', () => {
    const config = resolveConfig({ env: false });
    expect(config.name).toBe('mocra');
    expect(config.crawler.task_concurrency).toBe(32);
    expect(config.crawler.auto_seed).toBe(true);
    expect(config.download.max_response_size).toBe(10 * 1024 * 1024);
    // [retry] has no defaults of its own: unset keys keep the per-kind policy (docs/error-handling.md).
    expect(config.retry).toEqual({});
    expect(config.policy.overrides).toEqual([]);
    expect(config.scheduler.misfire_tolerance_ms).toBe(300_000);
    expect(config.logger.level).toBeUndefined();
    expect(config.modules).toEqual({});
  });

  test('env > code > file > defaults, tables merged key by key', () => {
    const config = resolveConfig({
      toml: '[crawler]\ntask_concurrency = 8\nparser_concurrency = 3\n[download]\nheaders = { a = "file" }\n',
      values: { crawler: { task_concurrency: 16 }, download: { max_redirects: 2 } },
      env: { MOCRA_CRAWLER__TASK_CONCURRENCY: '64', MOCRA_DOWNLOAD__DECOMPRESS: 'no' },
    });
    expect(config.crawler.task_concurrency).toBe(64);
    expect(config.crawler.parser_concurrency).toBe(3);
    expect(config.download.max_redirects).toBe(2);
    expect(config.download.decompress).toBe(false);
    expect(config.download.headers).toEqual({ a: 'file' });
    expect(config.crawler.generate_concurrency).toBe(4);
  });

  test('a file does not switch auto-seeding off; only the key does', () => {
    expect(resolveConfig({ toml: 'name = "x"', env: false }).crawler.auto_seed).toBe(true);
    expect(resolveConfig({ toml: '[crawler]\nauto_seed = false', env: false }).crawler.auto_seed).toBe(false);
  });

  test('TOML dates become ISO strings in free-form module config', () => {
    const config = resolveConfig({ toml: '[modules.a]\nsince = 2024-01-02T03:04:05Z\n', env: false });
    expect(config.modules.a?.since).toBe('2024-01-02T03:04:05.000Z');
  });
});

describe('resolveConfig: every error names the key and where it was set', () => {
  test('TOML syntax error: ConfigSyntaxError with line and column', () => {
    let error: unknown;
    try {
      fromToml('[crawler]\ntask_concurrency = = 3\n')();
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigSyntaxError);
    expect(error).toMatchObject({ code: 'MOCRA_ERR_CONFIG_SYNTAX', file: 'mocra.toml', line: 2 });
    expect((error as ConfigSyntaxError).column).toBeGreaterThan(1);
    expect((error as Error).message).toMatch(/^mocra\.toml:2:\d+: invalid TOML/);
  });

  test('unknown key, with its position and a suggestion for a typo', () => {
    const issues = issuesOf(fromToml('name = "a"\n\n[crawler]\n  task_concurency = 3\n'));
    expect(issues).toEqual([
      {
        kind: 'unknown-key',
        key: 'crawler.task_concurency',
        message: "unknown key (did you mean 'task_concurrency'?)",
        source: { kind: 'file', file: 'mocra.toml', line: 4, column: 3 },
      },
    ]);
  });

  test('a renamed key is refused, naming its new key, in the file and in the environment', () => {
    const issues = issuesOf(fromToml('[crawler]\nparser_task_concurrency = 3\n'));
    expect(issues).toEqual([
      {
        kind: 'unknown-key',
        key: 'crawler.parser_task_concurrency',
        message: "renamed: use 'crawler.follow_up_concurrency'",
        source: { kind: 'file', file: 'mocra.toml', line: 2, column: 1 },
      },
    ]);
    const fromEnv = issuesOf(() => resolveConfig({ env: { MOCRA_CRAWLER__PARSER_TASK_CONCURRENCY: '3' } }));
    expect(fromEnv).toEqual([
      {
        kind: 'unknown-key',
        key: 'crawler.parser_task_concurrency',
        message: "renamed: use 'crawler.follow_up_concurrency'",
        source: { kind: 'env', variable: 'MOCRA_CRAWLER__PARSER_TASK_CONCURRENCY' },
      },
    ]);
    expect(
      resolveConfig({ toml: '[crawler]\nfollow_up_concurrency = 3\n', env: false }).crawler,
    ).toMatchObject({
      follow_up_concurrency: 3,
    });
  });

  test('unknown table at the top level', () => {
    const issues = issuesOf(fromToml('[sync]\nkafka = "x"\n'));
    expect(issues).toMatchObject([{ kind: 'unknown-key', key: 'sync', source: { line: 1, column: 2 } }]);
  });

  test('wrong type: says what was expected and what was found', () => {
    const issues = issuesOf(fromToml('[download]\nmax_redirects = "ten"\ndecompress = 1\n'));
    expect(issues).toEqual([
      {
        kind: 'type',
        key: 'download.max_redirects',
        message: 'expected a number, got the string "ten"',
        source: { kind: 'file', file: 'mocra.toml', line: 2, column: 1 },
      },
      {
        kind: 'type',
        key: 'download.decompress',
        message: 'expected a boolean, got the integer 1',
        source: { kind: 'file', file: 'mocra.toml', line: 3, column: 1 },
      },
    ]);
  });

  test('a table where a value belongs, and a value where a table belongs', () => {
    const issues = issuesOf(fromToml('crawler = 5\n[name]\nx = 1\n'));
    expect(issues.map((i) => [i.key, i.kind, i.message])).toEqual([
      ['name', 'type', 'expected a string, got a table'],
      ['crawler', 'type', 'expected a table, got the integer 5'],
    ]);
  });

  test('bad values: range, non-integer, enum, pattern, array element, record key', () => {
    const issues = issuesOf(
      fromToml(
        [
          'name = "has space"',
          '[crawler]',
          'task_concurrency = 0',
          'parser_concurrency = 1.5',
          '[logger]',
          'level = "loud"',
          '[retry]',
          'retry_statuses = [429, 99]',
          '[download]',
          'headers = { "bad header" = "x" }',
        ].join('\n'),
      ),
    );
    expect(issues.map((i) => [i.key, i.kind, i.message, i.source])).toEqual([
      [
        'name',
        'value',
        'letters, digits, `_`, `.`, `:` and `-` only',
        { kind: 'file', file: 'mocra.toml', line: 1, column: 1 },
      ],
      [
        'crawler.task_concurrency',
        'value',
        'must be ≥ 1',
        { kind: 'file', file: 'mocra.toml', line: 3, column: 1 },
      ],
      [
        'crawler.parser_concurrency',
        'type',
        'expected an integer, got the number 1.5',
        expect.objectContaining({ line: 4 }),
      ],
      [
        'download.headers["bad header"]',
        'value',
        'invalid key name: not a valid HTTP header name',
        expect.objectContaining({ line: 10, column: 13 }),
      ],
      ['retry.retry_statuses[1]', 'value', 'must be ≥ 100', expect.objectContaining({ line: 8, column: 24 })],
      [
        'logger.level',
        'value',
        'must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent"',
        expect.objectContaining({ line: 6 }),
      ],
    ]);
  });

  test('typed module-config keys are checked in every layer table; other keys are free JSON', () => {
    const issues = issuesOf(
      fromToml(
        '[module_defaults]\nlogin_max_attempts = 0\n[platforms.shop]\ndownloader = 3\nmine = { any = [1, "x"] }\n',
      ),
    );
    expect(issues.map((i) => [i.key, i.kind, i.source])).toEqual([
      ['module_defaults.login_max_attempts', 'value', expect.objectContaining({ line: 2 })],
      ['platforms.shop.downloader', 'type', expect.objectContaining({ line: 4 })],
    ]);
  });

  test('a check across keys blames the source that set the key', () => {
    const issues = issuesOf(() =>
      resolveConfig({
        toml: '[retry]\nbase_delay_ms = 1000\n',
        values: { retry: { max_delay_ms: 10 } },
        env: false,
      }),
    );
    expect(issues).toEqual([
      {
        kind: 'value',
        key: 'retry.max_delay_ms',
        message: 'must be at least base_delay_ms (1000)',
        source: { kind: 'code' },
      },
    ]);
  });

  test('config in code: same schema, errors say "code"', () => {
    const issues = issuesOf(() =>
      resolveConfig({ values: { crawler: { task_concurrency: -1, bogus: true } as never }, env: false }),
    );
    expect(issues).toEqual([
      { kind: 'value', key: 'crawler.task_concurrency', message: 'must be ≥ 1', source: { kind: 'code' } },
      { kind: 'unknown-key', key: 'crawler.bogus', message: 'unknown key', source: { kind: 'code' } },
    ]);
    expect(() => resolveConfig({ values: { crawler: { task_concurrency: -1 } }, env: false })).toThrowError(
      /^invalid config: code crawler\.task_concurrency: must be ≥ 1$/,
    );
  });

  test('environment: bad number, bad boolean, bad JSON, schema violation, unknown key — each names the variable', () => {
    const issues = issuesOf(() =>
      resolveConfig({
        env: {
          MOCRA_CRAWLER__TASK_CONCURRENCY: 'lots',
          MOCRA_DOWNLOAD__DECOMPRESS: 'maybe',
          MOCRA_DOWNLOAD__HEADERS: '{nope',
          MOCRA_RETRY__MAX_RETRIES: '-2',
          MOCRA_CRAWLER__TASK_CONCURENCY: '3',
          MOCRA_LOG_LEVEL: 'debug', // belongs to the logger, not a config key: ignored
          MOCRA_NODE_ID: '7', // belongs to the cluster: ignored
        },
      }),
    );
    expect(issues.map((i) => [i.key, i.kind, i.source])).toEqual([
      // sorted by variable name
      ['crawler.task_concurency', 'unknown-key', { kind: 'env', variable: 'MOCRA_CRAWLER__TASK_CONCURENCY' }],
      ['crawler.task_concurrency', 'type', { kind: 'env', variable: 'MOCRA_CRAWLER__TASK_CONCURRENCY' }],
      ['download.decompress', 'type', { kind: 'env', variable: 'MOCRA_DOWNLOAD__DECOMPRESS' }],
      ['download.headers', 'type', { kind: 'env', variable: 'MOCRA_DOWNLOAD__HEADERS' }],
      ['retry.max_retries', 'value', { kind: 'env', variable: 'MOCRA_RETRY__MAX_RETRIES' }],
    ]);
    expect(issues[0]!.message).toBe("unknown key (did you mean 'task_concurrency'?)");
    expect(issues[1]!.message).toBe("expected an integer, got 'lots'");
  });

  test('environment arrays: JSON or a comma list; tables: JSON', () => {
    const config = resolveConfig({
      env: {
        MOCRA_RETRY__RETRY_STATUSES: '429, 503',
        MOCRA_MODULE_DEFAULTS: '{"login_statuses":[401,403]}',
        MOCRA_MODULES: '{"a":{"downloader":"browser"}}',
      },
    });
    expect(config.retry.retry_statuses).toEqual([429, 503]);
    expect(config.module_defaults.login_statuses).toEqual([401, 403]);
    expect(config.modules.a?.downloader).toBe('browser');
    expect(resolveConfig({ env: { MOCRA_RETRY__RETRY_STATUSES: '[500]' } }).retry.retry_statuses).toEqual([
      500,
    ]);
  });

  test('issues from every source are reported together', () => {
    const issues = issuesOf(() =>
      resolveConfig({
        toml: '[crawler]\ntask_concurrency = 0\n',
        file: 'f.toml',
        values: { frontier: { max_pages: 0 } },
        env: { MOCRA_SCHEDULER__ENABLED: 'sometimes' },
      }),
    );
    expect(issues.map((i) => i.source.kind).sort()).toEqual(['code', 'env', 'file']);
  });
});

describe('loadConfig', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mocra-config-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('reads a file; errors carry its path', async () => {
    const file = join(dir, 'ok.toml');
    await writeFile(file, '[crawler]\ntask_concurrency = 5\n');
    expect((await loadConfig({ file, env: false })).crawler.task_concurrency).toBe(5);
    const bad = join(dir, 'bad.toml');
    await writeFile(bad, '[crawler]\ntask_concurrency = "x"\n');
    await expect(loadConfig({ file: bad, env: false })).rejects.toThrowError(
      new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2:1 crawler\\.task_concurrency`),
    );
  });

  test('a missing file or a directory is ConfigReadError', async () => {
    await expect(loadConfig({ file: join(dir, 'missing.toml') })).rejects.toBeInstanceOf(ConfigReadError);
    await expect(loadConfig({ file: dir })).rejects.toMatchObject({
      code: 'MOCRA_ERR_CONFIG_READ',
      file: dir,
    });
  });
});

// Configuration through the builder: `.fromToml()` (which keeps auto-seeding on), `.config()`
// and `MOCRA_*` with their precedence, module-config layers without a database (and the
// downloader they select by name), every config error path with the key and where it was set,
// and hot reload of a running engine.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigReadError,
  type ConfigReloadErrorEvent,
  type ConfigReloadEvent,
  ConfigSyntaxError,
  ConfigValidationError,
  createHttpDownloader,
  type Downloader,
} from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineModule, defineSpider, Mocra, type ModuleSettings, Request } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';

let site: FixtureSite;
let dir: string;
const savedEnv = { ...process.env };
beforeAll(async () => {
  site = await startFixtureSite();
  dir = await mkdtemp(join(tmpdir(), 'mocra-config-e2e-'));
});
afterAll(async () => {
  await site?.close();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const key of Object.keys(process.env))
    if (key.startsWith('MOCRA_') && !(key in savedEnv)) delete process.env[key];
});

let fileCount = 0;
async function toml(text: string): Promise<string> {
  const file = join(dir, `config-${++fileCount}.toml`);
  await writeFile(file, text);
  return file;
}

const echoSpider = (name = 'echo') =>
  defineSpider<Record<string, string>>({
    name,
    startUrls: [`${site.url}/echo?spider=${name}`],
    parse: (res, cx) => cx.emit(res.json<{ headers: Record<string, string> }>().headers),
  });

/** A named downloader: a real HTTP downloader that identifies itself in the User-Agent. */
function named(name: string): Downloader {
  const inner = createHttpDownloader({ userAgent: `ua-${name}` });
  return { name, download: (r, s) => inner.download(r, s), close: () => inner.close() };
}

describe('sources and precedence', () => {
  test('a TOML file does not switch auto-seeding off (an upstream gap)', async () => {
    const file = await toml('name = "from-file"\n[crawler]\ntask_concurrency = 4\n');
    const items: unknown[] = [];
    const summary = await Mocra.builder()
      .fromToml(file, { watch: false })
      .spider(echoSpider(), (i) => void items.push(i))
      .handleSignals(false)
      .run();
    expect(items).toHaveLength(1);
    expect(summary.pages).toBe(1);
  });

  test('environment > code > file > defaults; typed builder methods win over config', async () => {
    const file = await toml(
      '[crawler]\ntask_concurrency = 4\nparser_concurrency = 3\ngenerate_concurrency = 2\n',
    );
    process.env.MOCRA_CRAWLER__PARSER_CONCURRENCY = '9';
    const engine = Mocra.builder()
      .fromToml(file, { watch: false })
      .config({ crawler: { task_concurrency: 5, parser_concurrency: 7, error_task_concurrency: 6 } })
      .spider(echoSpider(), () => {})
      .stages({ error: 2 })
      .build();
    const { stages } = await engine.stats();
    expect(stages.download.concurrency).toBe(5); // code over file
    expect(stages.parse.concurrency).toBe(9); // env over code
    expect(stages.task.concurrency).toBe(2); // file over default
    expect(stages.followUp.concurrency).toBe(8); // built-in default
    expect(stages.error.concurrency).toBe(2); // the typed builder method over .config()
  });
});

describe('module config without a database', () => {
  test('[modules] > module code config > [module_defaults] > built-in; account and platform layers in code', async () => {
    const file = await toml(
      [
        '[module_defaults]',
        'login_max_attempts = 7',
        'timeout_ms = 1111',
        'headers = { "x-from" = "defaults" }',
        '[modules.layered]',
        'timeout_ms = 2222',
        'mine = "toml"',
      ].join('\n'),
    );
    const seen: { settings: ModuleSettings; mine: string | undefined; region: string | undefined }[] = [];
    const mod = defineModule<Record<string, string>>({
      name: 'layered',
      config: { timeout_ms: 3333, mine: 'code', headers: { 'x-from': 'code' } },
      nodes: [
        {
          id: 'n',
          generate(ctx) {
            seen.push({
              settings: ctx.settings!,
              mine: ctx.config?.getString('mine'),
              region: ctx.config?.getString('region'),
            });
            return [new Request(`${site.url}/echo?layered=${ctx.account}`)];
          },
          parse: (res, cx) => cx.emit(res.json<{ headers: Record<string, string> }>().headers),
        },
      ],
    });
    const headers: Record<string, string>[] = [];
    const engine = Mocra.builder()
      .fromToml(file, { watch: false })
      .moduleConfig({ accounts: { eu: { region: 'eu-west' } }, platforms: { shop: { mine: 'platform' } } })
      .module(mod, (h) => void headers.push(h))
      .engineOptions({ autoSeed: false })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await engine.submit({ module: 'layered', account: 'eu', platform: 'shop' });
    await run;
    expect(seen).toHaveLength(1);
    const { settings, mine, region } = seen[0]!;
    expect(settings.timeoutMs).toBe(2222); // [modules.layered] over the module's code config
    expect(mine).toBe('toml'); // the module layer beats the platform layer
    expect(region).toBe('eu-west'); // account layer, from code
    expect(settings.loginMaxAttempts).toBe(7); // [module_defaults] over built-in
    expect(settings.loginStatuses).toEqual([401]); // built-in
    expect(headers[0]!['x-from']).toBe('code'); // module code config over [module_defaults]
  });

  test('a downloader selected by name per module (config.toml) and per request, no database', async () => {
    const file = await toml('[modules.by-name]\ndownloader = "tagged"\n');
    const uas: string[] = [];
    const mod = defineModule<string>({
      name: 'by-name',
      nodes: [
        {
          id: 'n',
          generate: () => [
            new Request(`${site.url}/echo?dl=module`),
            new Request(`${site.url}/echo?dl=request`, { downloader: 'other' }),
            new Request(`${site.url}/echo?dl=default`, { downloader: 'default' }),
          ],
          parse: (res, cx) =>
            cx.emit(
              `${new URL(res.url).searchParams.get('dl')}=${res.json<{ headers: Record<string, string> }>().headers['user-agent']}`,
            ),
        },
      ],
    });
    await Mocra.builder()
      .fromToml(file, { watch: false })
      .downloader(named('tagged'))
      .downloader(named('other'))
      .module(mod, (ua) => void uas.push(ua))
      .handleSignals(false)
      .run();
    expect(uas.sort()).toEqual([
      expect.stringMatching(/^default=mocra\//),
      'module=ua-tagged',
      'request=ua-other',
    ]);
  });
});

describe('every config error path names the key and where it was set', () => {
  const build = (configure: (b: ReturnType<typeof Mocra.builder>) => unknown) => () => {
    const builder = Mocra.builder().spider(echoSpider(), () => {});
    configure(builder);
    return builder.build();
  };
  const issuesOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigValidationError);
      return (err as ConfigValidationError).issues;
    }
    throw new Error('expected ConfigValidationError');
  };

  test('unknown key, wrong type, bad value in the file: file:line:column', async () => {
    const file = await toml(
      '[crawler]\ntask_concurency = 3\n[download]\nmax_redirects = "ten"\n[retry]\nmax_retries = -1\n',
    );
    const issues = issuesOf(build((b) => b.fromToml(file, { watch: false })));
    expect(issues).toEqual([
      {
        kind: 'unknown-key',
        key: 'crawler.task_concurency',
        message: "unknown key (did you mean 'task_concurrency'?)",
        source: { kind: 'file', file, line: 2, column: 1 },
      },
      {
        kind: 'type',
        key: 'download.max_redirects',
        message: 'expected a number, got the string "ten"',
        source: { kind: 'file', file, line: 4, column: 1 },
      },
      {
        kind: 'value',
        key: 'retry.max_retries',
        message: 'must be ≥ 0',
        source: { kind: 'file', file, line: 6, column: 1 },
      },
    ]);
  });

  test('TOML syntax and an unreadable file', async () => {
    const file = await toml('[crawler\n');
    expect(build((b) => b.fromToml(file, { watch: false }))).toThrowError(ConfigSyntaxError);
    expect(build((b) => b.fromToml(file, { watch: false }))).toThrowError(
      new RegExp(`^${file}:1:\\d+: invalid TOML`),
    );
    expect(build((b) => b.fromToml(join(dir, 'nope.toml')))).toThrowError(ConfigReadError);
  });

  test('environment and code', () => {
    process.env.MOCRA_SCHEDULER__ENABLED = 'sometimes';
    process.env.MOCRA_RETRY__MAX_RETRIES = '-3';
    const issues = issuesOf(build((b) => b.config({ frontier: { max_pages: 0 } })));
    expect(issues.map((i) => [i.key, i.kind, i.source])).toEqual([
      ['scheduler.enabled', 'type', { kind: 'env', variable: 'MOCRA_SCHEDULER__ENABLED' }],
      ['frontier.max_pages', 'value', { kind: 'code' }],
      ['retry.max_retries', 'value', { kind: 'env', variable: 'MOCRA_RETRY__MAX_RETRIES' }],
    ]);
  });

  test('module-config layers: in the file, and in code, name the layer', async () => {
    const file = await toml('[platforms.shop]\nlogin_statuses = [401, "x"]\n');
    expect(issuesOf(build((b) => b.fromToml(file, { watch: false })))[0]).toMatchObject({
      key: 'platforms.shop.login_statuses[1]',
      source: { kind: 'file', file, line: 2 },
    });
    const layerError = await Mocra.builder()
      .spider(echoSpider(), () => {})
      .moduleConfig({ modules: { echo: { downloader: 5 as never } } })
      .handleSignals(false)
      .run()
      .catch((e: unknown) => e);
    expect(layerError).toBeInstanceOf(ConfigValidationError);
    expect((layerError as ConfigValidationError).issues).toEqual([
      {
        kind: 'type',
        key: 'downloader',
        message: 'expected a string, got the integer 5',
        source: { kind: 'layer', layer: 'module' },
      },
    ]);
  });

  test('names a config layer selects must exist: an unknown middleware or downloader fails at start', async () => {
    const mw = await toml('[modules.echo]\ndata_middleware = ["clean-up"]\n');
    await expect(
      Mocra.builder()
        .fromToml(mw, { watch: false })
        .spider(echoSpider(), () => {})
        .handleSignals(false)
        .run(),
    ).rejects.toMatchObject({ code: 'MOCRA_ERR_UNKNOWN_MIDDLEWARE', middleware: 'clean-up' });
    const dl = await toml('[modules.echo]\ndownloader = "browsr"\n');
    await expect(
      Mocra.builder()
        .fromToml(dl, { watch: false })
        .spider(echoSpider(), () => {})
        .handleSignals(false)
        .run(),
    ).rejects.toMatchObject({ code: 'MOCRA_ERR_UNKNOWN_DOWNLOADER', downloader: 'browsr' });
  });
});

describe('hot reload through the builder', () => {
  test('live keys apply to the running engine; restart-only keys are reported; a broken edit keeps the last good config', async () => {
    const file = await toml('[crawler]\ntask_concurrency = 4\nshutdown_timeout_ms = 1000\n');
    const changes: ConfigReloadEvent[] = [];
    const errors: ConfigReloadErrorEvent[] = [];
    const stop = new AbortController();
    const builder = Mocra.builder()
      .fromToml(file)
      .spider(echoSpider(), () => {})
      .engineOptions({ endWhenIdle: false })
      .signal(stop.signal)
      .onConfigChange((e) => void changes.push(e))
      .onConfigError((e) => void errors.push(e))
      .handleSignals(false);
    const running = builder.run();
    await writeFile(
      file,
      '[crawler]\ntask_concurrency = 12\nshutdown_timeout_ms = 2000\n[logger]\nlevel = "fatal"\n',
    );
    await vi.waitFor(() => expect(changes).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(changes[0]!.applied.map((c) => c.key)).toEqual(['crawler.task_concurrency', 'logger.level']);
    expect(changes[0]!.restartRequired.map((c) => c.key)).toEqual(['crawler.shutdown_timeout_ms']);
    await writeFile(file, '[crawler]\ntask_concurrency = "many"\n');
    await vi.waitFor(() => expect(errors).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(errors[0]!.error.code).toBe('MOCRA_ERR_CONFIG_INVALID');
    expect(errors[0]!.error.message).toContain(`${file}:2:1 crawler.task_concurrency`);
    stop.abort();
    const summary = await running;
    expect(summary.reason).toBe('aborted');
  });

  test('a reload resizes the stage of a running engine (engine.setConcurrency)', async () => {
    const file = await toml('[crawler]\ntask_concurrency = 3\n');
    const stop = new AbortController();
    let resolveChanged!: () => void;
    const changed = new Promise<void>((resolve) => (resolveChanged = resolve));
    const builder = Mocra.builder()
      .fromToml(file)
      .spider(echoSpider('resize'), () => {})
      .engineOptions({ endWhenIdle: false })
      .signal(stop.signal)
      .onConfigChange(() => resolveChanged())
      .handleSignals(false);
    const run = builder.run();
    await writeFile(file, '[crawler]\ntask_concurrency = 11\n');
    await changed;
    stop.abort();
    const summary = await run;
    expect(summary.stages.download.concurrency).toBe(11);
  });
});

// `mocra config migrate` as a user coming from Rust mocra runs it: the built bin on a copy of a
// config.toml of that project (fixtures/rust-config: every key its config documents), then
// mocra's own loader on what it wrote. Each key of the input must be either carried over (and
// have the right value) or reported with a reason — none silently lost.
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig, parseToml, REFUSED_UPSTREAM_MODULE_KEYS, resolveConfig } from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, FIXTURES, mocra, tempDir } from './journeys/harness.js';

const RUST = path.join(FIXTURES, 'rust-config');
let dir: string;

beforeAll(() => {
  assertBuilt();
  dir = tempDir('config-migrate');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fixture copied to `<dir>/<sub>/config.toml`, as a user's file. */
function userFile(fixture: string, sub: string): string {
  const target = path.join(dir, sub);
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  const file = path.join(target, 'config.toml');
  copyFileSync(path.join(RUST, fixture), file);
  return file;
}

/** Every leaf key of a TOML file, dotted as the report writes them (`proxy.tunnel[0].name`). */
function leafKeys(text: string): string[] {
  const out: string[] = [];
  const walk = (v: unknown, key: string) => {
    if (Array.isArray(v) && v.some((x) => typeof x === 'object' && x !== null)) {
      for (const [i, x] of v.entries()) walk(x, `${key}[${i}]`);
    } else if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v)) walk(x, key === '' ? k : `${key}.${k}`);
    } else out.push(key);
  };
  walk(parseToml(text).values, '');
  return out;
}

interface Report {
  carried: Map<string, string>;
  dropped: Map<string, string>;
}

/** The command's report: `  key → to (note)` under "carried over:", `  key: reason` under "not carried over:". */
function readReport(text: string): Report {
  const carried = new Map<string, string>();
  const dropped = new Map<string, string>();
  let section: 'carried' | 'dropped' | undefined;
  for (const line of text.split('\n')) {
    if (line === 'carried over:') section = 'carried';
    else if (line === 'not carried over:') section = 'dropped';
    else if (line.startsWith('  ') && section === 'carried') {
      const m = /^ {2}(\S+) → (.+)$/.exec(line);
      expect(m, line).not.toBeNull();
      carried.set(m![1]!, m![2]!);
    } else if (line.startsWith('  ') && section === 'dropped') {
      const m = /^ {2}(\S+): (.+)$/.exec(line);
      expect(m, line).not.toBeNull();
      dropped.set(m![1]!, m![2]!);
    }
  }
  return { carried, dropped };
}

/** The report entry that covers a leaf key: its own, or one of an enclosing table or list item. */
function coveredBy(report: Report, leaf: string): string | undefined {
  for (let key = leaf; key !== ''; key = key.replace(/(\.[^.[\]]+|\[\d+\])$/, '')) {
    if (report.carried.has(key) || report.dropped.has(key)) return key;
    if (!/(\.[^.[\]]+|\[\d+\])$/.test(key)) break;
  }
  return undefined;
}

describe('mocra config migrate: a config.toml with every documented key', () => {
  let file: string;
  let report: Report;
  let written: string;

  beforeAll(async () => {
    file = userFile('full.toml', 'full');
    const ran = await mocra(['config', 'migrate', file], { cwd: dir });
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    written = path.join(path.dirname(file), 'mocra.toml');
    expect(ran.stdout).toMatch(
      new RegExp(
        `^wrote ${written.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: \\d+ keys carried over, \\d+ not\\n`,
      ),
    );
    report = readReport(ran.stdout);
  });

  test('the written mocra.toml loads with mocra’s own loader, and the carried keys have their values', async () => {
    const config = await loadConfig({ file: written, env: false });
    expect(config.name).toBe('shop-crawler');
    expect(config.db).toMatchObject({
      url: 'postgres://crawler:secret@127.0.0.1:5432/crawl?sslmode=require',
      schema: 'base',
      pool_size: 20,
      cron_refresh_ms: 45_000,
    });
    expect(config.module_defaults).toMatchObject({ timeout_ms: 25_000, enable_session: true });
    expect(config.download).toMatchObject({ pool_size: 150, max_response_size: 5_242_880 });
    expect(config.retry.max_retries).toBe(4);
    expect(config.crawler).toMatchObject({
      task_max_errors: 120,
      module_max_errors: 60,
      task_concurrency: 48,
      parser_concurrency: 12,
      follow_up_concurrency: 12,
      error_task_concurrency: 6,
    });
    expect(config.scheduler.misfire_tolerance_ms).toBe(120_000);
    expect(config.channel_config).toMatchObject({
      queue: 'nats://127.0.0.1:4222',
      queue_codec: 'json',
      compression_threshold: 8192,
      max_deliveries: 4,
    });
    expect(config.api).toMatchObject({ enabled: true, port: 8906, api_key: 'change-me', rate_limit: 20 });
    expect(config.logger.level).toBe('debug');
    expect(config.policy.overrides).toEqual([
      {
        stage: 'download',
        retryable: true,
        max_retries: 7,
        backoff: 'exponential',
        backoff_ms: 1000,
        max_backoff_ms: 60_000,
        dlq: 'on-exhaustion',
      },
      { stage: 'parse', retryable: false, dlq: 'always' },
    ]);
    expect(config.proxy).toEqual({
      min_size: 5,
      max_size: 40,
      max_errors: 4,
      refill_threshold: 0.25,
      tunnels: [
        {
          name: 'residential',
          endpoint: 'http://gw.vendor.example:7000',
          username: 'customer-1',
          password: 'pw',
          rate_limit: 20,
          expires_at: '2027-06-30T00:00:00Z',
        },
      ],
      proxies: [
        { url: 'http://10.0.0.5:3128', provider: 'dc', rate_limit: 10, expires_at: '2027-01-01T00:00:00Z' },
      ],
      providers: [
        {
          name: 'vendor-list',
          url: 'https://vendor.example/list.txt?key=abc',
          timeout: '10s',
          rate_limit: 5,
          proxy_ttl: '300s',
          expires_at: '2027-03-01T00:00:00Z',
        },
      ],
    });
  });

  test('every key of the input is carried over or reported with a reason', () => {
    const leaves = leafKeys(readFileSync(file, 'utf8'));
    expect(leaves.length).toBeGreaterThan(100);
    const uncovered = leaves.filter((leaf) => coveredBy(report, leaf) === undefined);
    expect(uncovered).toEqual([]);
    for (const [key, reason] of report.dropped) expect(reason.length, key).toBeGreaterThan(20);
  });

  test('the keys with no place in mocra are reported, each with why and what does its job', () => {
    const expected: Record<string, RegExp> = {
      'download_config.downloader_expire': /no per-module downloader/,
      'download_config.rate_limit': /politeness.*delayMs: 250/,
      'download_config.enable_locker': /politeness\(\{ maxConcurrency: 1 \}\)/,
      'download_config.enable_rate_limit': /politeness/,
      'download_config.cache_ttl': /--cache/,
      'download_config.wss_timeout': /idleTimeoutMs: 45000/,
      'download_config.proxy_client_cache_capacity': /dispatcher per proxy/,
      'cache.ttl': /cache/,
      'cache.compression_threshold': /cache/,
      'cache.enable_l1': /cache/,
      'cache.l1_ttl_secs': /cache/,
      'cache.l1_max_entries': /cache/,
      'crawler.module_locker_ttl': /not locked to one node/,
      'crawler.node_id': /MOCRA_NODE_ID/,
      'crawler.publish_concurrency': /not a separate worker pool/,
      'crawler.backpressure_retry_delay_ms': /backpressure/,
      'crawler.dedup_ttl_secs': /frontier\.dedup/,
      'crawler.idle_stop_secs': /no work is left/,
      'scheduler.concurrency': /cron firings/,
      'scheduler.max_staleness_secs': /db\.cron_refresh_ms/,
      'channel_config.minid_time': /snowflakes/,
      'channel_config.capacity': /createMemoryQueueBackend/,
      'channel_config.batch_concurrency': /not a separate worker pool/,
      'channel_config.nack_backoff_ms': /backoff/,
      'channel_config.blob_storage': /max_payload_bytes/,
      'channel_config.nats.username': /connectionOptions/,
      'channel_config.nats.password': /connectionOptions/,
      'channel_config.nats.token': /connectionOptions/,
      'sync.kafka': /sync service/,
      'sync.allow_rollback': /sync service/,
      'sync.envelope_enabled': /sync service/,
      'event_bus.capacity': /diagnostics_channel/,
      'event_bus.concurrency': /diagnostics_channel/,
      'logger.format': /pino/,
      'logger.include': /logger\.level/,
      'logger.buffer': /stderr/,
      'logger.flush_interval_ms': /stderr/,
      'logger.outputs[1]': /file/,
      'logger.outputs[2]': /queue/,
      'logger.prometheus.port': /\/metrics/,
      'policy.overrides[2]': /CacheService/,
      'proxy.ip_provider[0].retry_codes': /retried/,
      'proxy.ip_provider[0].weight': /tier/,
      'proxy.pool_config.health_check_interval_secs': /health_check = \{ url, interval \}/,
    };
    for (const [key, reason] of Object.entries(expected)) {
      expect(report.dropped.get(key), key).toMatch(reason);
    }
    expect([...report.dropped.keys()].sort()).toEqual(Object.keys(expected).sort());
  });

  test('what changed on the way is said: units, the table that does the job, matchers not kept', () => {
    expect(report.carried.get('download_config.timeout')).toMatch(
      /^module_defaults\.timeout_ms \(seconds → ms/,
    );
    expect(report.carried.get('crawler.parser_concurrency')).toMatch(
      /^crawler\.parser_concurrency, crawler\.follow_up_concurrency/,
    );
    expect(report.carried.get('channel_config.nats.url')).toMatch(/channel_config\.coordination/);
    expect(report.carried.get('policy.overrides[0]')).toMatch(
      /kind Download → stage download; domain, event_type, phase not kept.*alert is not kept/,
    );
    expect(report.carried.get('db.tls')).toMatch(/sslmode=require/);
    // The file itself says where it came from and lists what was left behind.
    const text = readFileSync(written, 'utf8');
    expect(text).toMatch(/^# mocra\.toml, migrated from config\.toml/);
    expect(text).toContain('#   crawler.idle_stop_secs: a run ends exactly when no work is left');
  });

  test('an existing mocra.toml is not overwritten without --force; with it, it is', async () => {
    writeFileSync(written, '# mine\n');
    const refused = await mocra(['config', 'migrate', file], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('(MOCRA_ERR_OUTPUT_EXISTS)');
    expect(refused.stderr).toContain('--force');
    expect(readFileSync(written, 'utf8')).toBe('# mine\n');
    const forced = await mocra(['config', 'migrate', file, '--force'], { cwd: dir });
    expect(forced.code).toBe(0);
    expect(readFileSync(written, 'utf8')).toMatch(/^# mocra\.toml, migrated/);
  });
});

describe('a single-node Rust config, migrated, runs a crawl', () => {
  let site: FixtureSite;
  beforeAll(async () => {
    site = await startFixtureSite();
  });
  afterAll(() => site?.close());

  test('its 1 s timeout and zero retries hold in `mocra run --config mocra.toml`', async () => {
    const file = userFile('standalone.toml', 'standalone');
    const migrated = await mocra(['config', 'migrate', file], { cwd: dir });
    expect(migrated.code).toBe(0);
    const toml = path.join(path.dirname(file), 'mocra.toml');
    const out = path.join(path.dirname(file), 'items.jsonl');
    const ran = await mocra(
      ['run', path.join(FIXTURES, 'cli-slow-spider.ts'), '--config', toml, '--out', out, '--no-progress'],
      { cwd: dir, env: { MOCRA_TEST_SITE: site.url } },
    );
    expect(ran.code, ran.stderr).toBe(0);
    expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(20);
    // The 3 s route was given up after one attempt: download_config.timeout = 1 became
    // module_defaults.timeout_ms = 1000 and request_max_retries = 0 became retry.max_retries = 0.
    expect(ran.stderr).toContain('MOCRA_ERR_TIMEOUT');
    expect(site.stats().paths['/delay/3000']).toBe(1);
  }, 60_000);
});

describe('mocra config migrate: module keys, values mocra refuses, -o -', () => {
  test('a Kafka deployment with a module layer: Rust module keys mapped or refused with what does their job', async () => {
    const file = userFile('kafka.toml', 'kafka');
    const ran = await mocra(['config', 'migrate', file, '-o', '-'], { cwd: dir });
    expect(ran.code).toBe(0);
    // The TOML on stdout, the report on stderr; nothing is written beside the input.
    expect(statSync(path.join(path.dirname(file), 'mocra.toml'), { throwIfNoEntry: false })).toBeUndefined();
    const config = resolveConfig({ toml: ran.stdout, file: 'stdout', env: false });
    expect(config.name).toBe('prices');
    expect(config.channel_config.queue).toBe('kafka://k1:9092,k2:9092');
    expect(config.logger.level).toBe('silent');
    expect(config.module_defaults).toMatchObject({ timeout_ms: 30_000, enable_session: false });
    expect(config.modules.catalog).toEqual({ timeout_ms: 12_000, use_proxy: false, page_size: 50 });
    expect(config.policy.overrides).toEqual([
      { stage: 'store', backoff: 'linear', backoff_ms: 200, max_backoff_ms: 5000, max_retries: 5 },
    ]);
    // A value mocra refuses is not written; the loader's message says why.
    expect(config.crawler.task_concurrency).toBe(32);
    expect(config.db.url).toBeUndefined();

    const report = readReport(ran.stderr);
    for (const name of [
      'module_locker',
      'module_locker_ttl',
      'enable_locker',
      'rate_limit',
      'limit_id',
      'cache_ttl',
      'wss_timeout',
    ]) {
      expect(report.dropped.get(`modules.catalog.${name}`), name).toContain(
        REFUSED_UPSTREAM_MODULE_KEYS[name]!,
      );
    }
    expect(report.dropped.get('modules.catalog.rate_limit')).toContain('delayMs: 400');
    expect(report.carried.get('modules.catalog.default_timeout')).toBe(
      'modules.catalog.timeout_ms (seconds → ms)',
    );
    expect(report.carried.get('modules.catalog.enable_proxy')).toBe('modules.catalog.use_proxy');
    expect(report.dropped.get('crawler.task_concurrency')).toBe(
      'mocra does not accept the value for crawler.task_concurrency: must be ≥ 1',
    );
    expect(report.dropped.get('db.url')).toMatch(/postgres:\/\/… or sqlite:<path>/);
    expect(report.dropped.get('channel_config.kafka.password')).toMatch(/kafkajs client/);
    expect(report.dropped.get('policy.overrides[1]')).toMatch(/nothing left to change/);
    expect(report.dropped.get('unknown_section')).toMatch(/not a key of Rust mocra/);
    const uncovered = leafKeys(readFileSync(file, 'utf8')).filter(
      (leaf) => coveredBy(report, leaf) === undefined,
    );
    expect(uncovered).toEqual([]);
  });

  test('an unreadable or broken input fails with a typed code and exit 1; nothing is written', async () => {
    const missing = await mocra(['config', 'migrate', path.join(dir, 'nope', 'config.toml')], { cwd: dir });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read config file .*nope.*\(MOCRA_ERR_CONFIG_READ\)/);

    const broken = path.join(dir, 'broken.toml');
    writeFileSync(broken, '[crawler\ntask_concurrency = 4\n');
    const syntax = await mocra(['config', 'migrate', broken, '-o', path.join(dir, 'broken-out.toml')], {
      cwd: dir,
    });
    expect(syntax.code).toBe(1);
    expect(syntax.stderr).toMatch(/broken\.toml:1:\d+: invalid TOML.*\(MOCRA_ERR_CONFIG_SYNTAX\)/);
    expect(statSync(path.join(dir, 'broken-out.toml'), { throwIfNoEntry: false })).toBeUndefined();

    const self = await mocra(['config', 'migrate', broken, '-o', broken], { cwd: dir });
    expect(self.code).toBe(2);
    expect(self.stderr).toContain('is the input itself');
  });
});

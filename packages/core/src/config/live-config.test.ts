import diagnostics_channel from 'node:diagnostics_channel';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  CONFIG_CHANNEL_NAMES,
  type ConfigReloadErrorEvent,
  type ConfigReloadEvent,
  type LiveConfig,
  openLiveConfig,
} from './live-config.js';

let dir: string;
let file: string;
let live: LiveConfig | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mocra-live-'));
  file = join(dir, 'mocra.toml');
});
afterEach(async () => {
  live?.close();
  live = undefined;
  await rm(dir, { recursive: true, force: true });
});

const nextChange = (l: LiveConfig) =>
  new Promise<ConfigReloadEvent>((resolve) => {
    const off = l.onChange((event) => {
      off();
      resolve(event);
    });
  });
const nextError = (l: LiveConfig) =>
  new Promise<ConfigReloadErrorEvent>((resolve) => {
    const off = l.onError((event) => {
      off();
      resolve(event);
    });
  });

describe('LiveConfig.reload (no watcher)', () => {
  test('live keys are applied, restart-only keys are reported and kept at their running value', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 8\nshutdown_timeout_ms = 100\n');
    live = await openLiveConfig({ file, watch: false, env: false });
    expect(live.config.crawler.task_concurrency).toBe(8);

    await writeFile(
      file,
      '[crawler]\ntask_concurrency = 12\nshutdown_timeout_ms = 200\n[logger]\nlevel = "debug"\n[modules.a]\ndownloader = "x"\n',
    );
    const event = await live.reload();
    expect(event?.applied.map((c) => [c.key, c.from, c.to])).toEqual([
      ['crawler.task_concurrency', 8, 12],
      ['logger.level', undefined, 'debug'],
      ['modules', {}, { a: { downloader: 'x' } }],
    ]);
    expect(event?.restartRequired).toEqual([
      { key: 'crawler.shutdown_timeout_ms', from: 100, to: 200, live: false },
    ]);
    expect(live.config.crawler.task_concurrency).toBe(12);
    expect(live.config.logger.level).toBe('debug');
    expect(live.config.crawler.shutdown_timeout_ms).toBe(100);
    expect(live.pendingRestart.map((c) => c.key)).toEqual(['crawler.shutdown_timeout_ms']);

    // A later reload that changes something else does not report the pending restart key again…
    await writeFile(file, '[crawler]\ntask_concurrency = 13\nshutdown_timeout_ms = 200\n');
    const again = await live.reload();
    expect(again?.restartRequired).toEqual([]);
    expect(live.pendingRestart.map((c) => c.key)).toEqual(['crawler.shutdown_timeout_ms']);
    // …and reverting the file clears it.
    await writeFile(file, '[crawler]\ntask_concurrency = 13\nshutdown_timeout_ms = 100\n');
    await live.reload();
    expect(live.pendingRestart).toEqual([]);
  });

  test('a broken edit keeps the last good config and reports a typed error with the position', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 8\n');
    live = await openLiveConfig({ file, watch: false, env: false });
    const errors: ConfigReloadErrorEvent[] = [];
    live.onError((e) => errors.push(e));
    const published: unknown[] = [];
    const onPublish = (message: unknown) => published.push(message);
    diagnostics_channel.subscribe(CONFIG_CHANNEL_NAMES.error, onPublish);
    try {
      await writeFile(file, '[crawler]\ntask_concurrency = 0\n');
      expect(await live.reload()).toBeUndefined();
      await writeFile(file, '[crawler\n');
      expect(await live.reload()).toBeUndefined();
      await rm(file);
      expect(await live.reload()).toBeUndefined();
    } finally {
      diagnostics_channel.unsubscribe(CONFIG_CHANNEL_NAMES.error, onPublish);
    }
    expect(errors.map((e) => e.error.code)).toEqual([
      'MOCRA_ERR_CONFIG_INVALID',
      'MOCRA_ERR_CONFIG_SYNTAX',
      'MOCRA_ERR_CONFIG_READ',
    ]);
    expect(errors[0]!.error.message).toContain(`${file}:2:1 crawler.task_concurrency: must be ≥ 1`);
    expect(published).toHaveLength(3);
    expect(live.config.crawler.task_concurrency).toBe(8);
  });

  test('an empty or comment-only file and an absurd live value are refused; the running config stays', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 8\n[logger]\nlevel = "debug"\n');
    live = await openLiveConfig({ file, watch: false, env: false, debounceMs: 10 });
    const errors: ConfigReloadErrorEvent[] = [];
    live.onError((e) => errors.push(e));
    await writeFile(file, '');
    expect(await live.reload()).toBeUndefined();
    await writeFile(file, '\n  # everything commented out\n\n');
    expect(await live.reload()).toBeUndefined();
    await writeFile(file, '[crawler]\ntask_concurrency = 1000000\n');
    expect(await live.reload()).toBeUndefined();
    expect(errors.map((e) => e.error.code)).toEqual([
      'MOCRA_ERR_CONFIG_EMPTY',
      'MOCRA_ERR_CONFIG_EMPTY',
      'MOCRA_ERR_CONFIG_INVALID',
    ]);
    expect(errors[2]!.error.message).toContain('crawler.task_concurrency: must be ≤ 10000');
    expect(live.config.crawler.task_concurrency).toBe(8);
    expect(live.config.logger.level).toBe('debug');
    // A sane value still applies.
    await writeFile(file, '[crawler]\ntask_concurrency = 9\n[logger]\nlevel = "debug"\n');
    expect((await live.reload())?.applied.map((c) => [c.key, c.to])).toEqual([
      ['crawler.task_concurrency', 9],
    ]);
  });

  test('a file still being written is read again until it settles; its half-written state is never applied', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 8\n');
    live = await openLiveConfig({ file, watch: false, env: false, debounceMs: 150 });
    // The writer truncates (a valid file that drops a key), then writes the rest 50 ms later.
    await writeFile(file, '[crawler]\n');
    const reloaded = live.reload();
    await new Promise((r) => setTimeout(r, 50));
    await writeFile(file, '[crawler]\ntask_concurrency = 12\n');
    const event = await reloaded;
    expect(event?.applied.map((c) => [c.key, c.from, c.to])).toEqual([['crawler.task_concurrency', 8, 12]]);
  });

  test('a reload that changes nothing emits no change event', async () => {
    await writeFile(file, 'name = "a"\n');
    live = await openLiveConfig({ file, watch: false, env: false });
    let changes = 0;
    live.onChange(() => changes++);
    await writeFile(file, '# just a comment\nname = "a"\n');
    const event = await live.reload();
    expect(event?.applied).toEqual([]);
    expect(changes).toBe(0);
  });

  test('env overrides keep winning over the file on reload', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 8\n');
    live = await openLiveConfig({ file, watch: false, env: { MOCRA_CRAWLER__TASK_CONCURRENCY: '50' } });
    await writeFile(file, '[crawler]\ntask_concurrency = 9\n');
    const event = await live.reload();
    expect(event?.applied).toEqual([]);
    expect(live.config.crawler.task_concurrency).toBe(50);
  });
});

describe('LiveConfig watching the file', () => {
  test('an edit in place and an atomic rename-over both reload, once per burst of writes', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 1\n');
    live = await openLiveConfig({ file, env: false, debounceMs: 30 });
    const events: ConfigReloadEvent[] = [];
    live.onChange((e) => events.push(e));

    let change = nextChange(live);
    await writeFile(file, '[crawler]\ntask_concurrency = 2\n');
    await writeFile(file, '[crawler]\ntask_concurrency = 3\n');
    expect((await change).config.crawler.task_concurrency).toBe(3);

    change = nextChange(live);
    const temp = join(dir, '.mocra.toml.tmp');
    await writeFile(temp, '[crawler]\ntask_concurrency = 4\n');
    await rename(temp, file);
    expect((await change).applied).toEqual([{ key: 'crawler.task_concurrency', from: 3, to: 4, live: true }]);
    expect(events.at(-1)?.config.crawler.task_concurrency).toBe(4);
  });

  test('a broken save is reported and the next good save applies', async () => {
    await writeFile(file, '[crawler]\ntask_concurrency = 1\n');
    live = await openLiveConfig({ file, env: false, debounceMs: 30 });
    const error = nextError(live);
    await writeFile(file, '[crawler]\ntask_concurrency = "x"\n');
    expect((await error).error.code).toBe('MOCRA_ERR_CONFIG_INVALID');
    expect(live.config.crawler.task_concurrency).toBe(1);
    const change = nextChange(live);
    await writeFile(file, '[crawler]\ntask_concurrency = 6\n');
    expect((await change).config.crawler.task_concurrency).toBe(6);
  });

  test('opening a broken file throws', async () => {
    await writeFile(file, 'nope = 1\n');
    await expect(openLiveConfig({ file, env: false })).rejects.toMatchObject({
      code: 'MOCRA_ERR_CONFIG_INVALID',
      issues: [{ key: 'nope', source: { kind: 'file', file, line: 1, column: 1 } }],
    });
  });
});

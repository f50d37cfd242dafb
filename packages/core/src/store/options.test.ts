import { expect, test } from 'vitest';
import { resolveEngineStoreOptions } from './options.js';

test('a URL is the whole option; defaults fill the rest', () => {
  expect(resolveEngineStoreOptions('sqlite:./x.db')).toMatchObject({
    store: undefined,
    open: { url: 'sqlite:./x.db', applicationName: 'mocra' },
    migrate: false,
    moduleConfig: true,
    configCacheMs: 1000,
    seed: true,
    cron: { refreshMs: 30_000, partition: true },
    taskResults: { heartbeatMs: 15_000, staleAfterMs: 120_000, sweepEveryMs: 60_000 },
    logs: { level: 'warn', batchSize: 100, flushMs: 1000, maxBuffered: 10_000 },
    items: false,
  });
  expect(
    resolveEngineStoreOptions({ url: 'sqlite:x', cron: false, taskResults: false, logs: false, items: true }),
  ).toMatchObject({ cron: false, taskResults: false, logs: false, items: {} });
});

test('bad options are MOCRA_ERR_INVALID_ARGUMENT naming the option', () => {
  const bad: [unknown, RegExp][] = [
    [{}, /give a url/],
    [{ url: '' }, /give a url/],
    [{ url: 'sqlite:x', store: {} }, /either a url or an open store/],
    [{ url: 'sqlite:x', configCacheMs: -1 }, /configCacheMs must be an integer ≥ 0/],
    [{ url: 'sqlite:x', cron: { refreshMs: 0 } }, /cron\.refreshMs/],
    [
      { url: 'sqlite:x', taskResults: { heartbeatMs: 1000, staleAfterMs: 1000 } },
      /must be longer than heartbeatMs/,
    ],
    [{ url: 'sqlite:x', logs: { level: 'loud' } }, /logs\.level must be one of/],
    [{ url: 'sqlite:x', logs: { batchSize: 1.5 } }, /logs\.batchSize/],
  ];
  for (const [input, message] of bad) {
    expect(() => resolveEngineStoreOptions(input as never)).toThrowError(
      expect.objectContaining({
        code: 'MOCRA_ERR_INVALID_ARGUMENT',
        message: expect.stringMatching(message),
      }),
    );
  }
});

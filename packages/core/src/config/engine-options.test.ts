import { describe, expect, test } from 'vitest';
import { engineOptionsFromConfig } from './engine-options.js';
import { resolveConfig } from './load.js';

describe('engineOptionsFromConfig: failure policy', () => {
  test('an empty [retry] passes no retry options, so the per-kind defaults stay in force', () => {
    const options = engineOptionsFromConfig(resolveConfig({ env: false }));
    expect(options.retry).toEqual({});
    expect(options.recovery).toEqual({ overrides: [], thresholds: {} });
  });

  test('only the [retry] keys that are set become options', () => {
    const options = engineOptionsFromConfig(
      resolveConfig({ env: false, values: { retry: { max_retries: 7, retry_statuses: [503] } } }),
    );
    expect(options.retry).toEqual({ maxRetries: 7, retryStatuses: [503] });
  });

  test('[[policy.overrides]] and the [crawler] error limits reach the recovery policy', () => {
    const config = resolveConfig({
      env: false,
      values: {
        policy: { overrides: [{ kind: 'http-5xx', retryable: false }] },
        crawler: { task_max_errors: 20, module_max_errors: 0 },
      },
    });
    const options = engineOptionsFromConfig(config);
    expect(options.recovery?.overrides).toEqual([
      expect.objectContaining({ kind: 'http-5xx', retryable: false }),
    ]);
    expect(options.recovery?.thresholds).toEqual({ maxTaskErrors: 20, maxModuleErrors: 0 });
  });

  test('a bad override is a config error naming the key', () => {
    expect(() =>
      resolveConfig({
        env: false,
        // Untrusted input, as it comes from a file: the type system does not vouch for it.
        values: JSON.parse('{"policy":{"overrides":[{"kind":"no-such-kind"}]}}') as object,
      }),
    ).toThrow(/policy\.overrides\[0\]\.kind/);
  });
});

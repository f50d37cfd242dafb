import { describe, expect, test } from 'vitest';
import { createLogger, resolveLogLevel } from './logger.js';

describe('log level', () => {
  test('MOCRA_DISABLE_LOGS silences everything, whatever else is set', () => {
    expect(resolveLogLevel('debug', { MOCRA_DISABLE_LOGS: '1' })).toBe('silent');
    expect(resolveLogLevel(undefined, { MOCRA_DISABLE_LOGS: 'true', MOCRA_LOG_LEVEL: 'info' })).toBe(
      'silent',
    );
    expect(resolveLogLevel('info', { MOCRA_DISABLE_LOGS: '0' })).toBe('info');
  });

  test('option, then MOCRA_LOG_LEVEL, then silent under a test runner, then warn', () => {
    expect(resolveLogLevel('error', { MOCRA_LOG_LEVEL: 'debug' })).toBe('error');
    expect(resolveLogLevel(undefined, { MOCRA_LOG_LEVEL: 'DEBUG' })).toBe('debug');
    expect(resolveLogLevel(undefined, { MOCRA_LOG_LEVEL: 'nonsense' })).toBe('warn');
    expect(resolveLogLevel(undefined, { VITEST: 'true' })).toBe('silent');
    expect(resolveLogLevel(undefined, { NODE_ENV: 'test' })).toBe('silent');
    expect(resolveLogLevel(undefined, {})).toBe('warn');
  });

  test('a given pino logger is used as is', () => {
    const own = createLogger({ level: 'silent' });
    expect(createLogger({ logger: own })).toBe(own);
    expect(createLogger().level).toBe('silent'); // under vitest
  });
});

import { describe, expect, test } from 'vitest';
import { OTHER_ENV_VARIABLES, unknownEnvVariables } from './env.js';

describe('unknownEnvVariables: a MOCRA_* variable nothing reads', () => {
  test('is reported with the closest known name', () => {
    const found = unknownEnvVariables({
      MOCRA_CRAWLR__TASK_CONCURRENCY: '8',
      MOCRA_LOG_LEVL: 'info',
      MOCRA_ZZZ: '1',
      PATH: '/usr/bin',
    });
    expect(found).toEqual([
      {
        variable: 'MOCRA_CRAWLR__TASK_CONCURRENCY',
        suggestion: 'MOCRA_CRAWLER__TASK_CONCURRENCY',
        message:
          'MOCRA_CRAWLR__TASK_CONCURRENCY is not a mocra variable and is ignored (did you mean MOCRA_CRAWLER__TASK_CONCURRENCY?)',
      },
      {
        variable: 'MOCRA_LOG_LEVL',
        suggestion: 'MOCRA_LOG_LEVEL',
        message: 'MOCRA_LOG_LEVL is not a mocra variable and is ignored (did you mean MOCRA_LOG_LEVEL?)',
      },
      { variable: 'MOCRA_ZZZ', message: 'MOCRA_ZZZ is not a mocra variable and is ignored' },
    ]);
  });

  test('config keys, the variables of other components and MOCRA_TEST_* are not reported', () => {
    const env: Record<string, string> = {
      MOCRA_CRAWLER__TASK_CONCURRENCY: '8',
      MOCRA_NAME: 'x',
      MOCRA_TEST_SITE: 'y',
    };
    for (const variable of OTHER_ENV_VARIABLES) env[variable] = '1';
    expect(unknownEnvVariables(env)).toEqual([]);
  });

  test('a misspelt key of a known table is left to readEnvOverrides (which refuses it)', () => {
    expect(unknownEnvVariables({ MOCRA_CRAWLER__TASK_CONCURENCY: '8' })).toEqual([]);
  });
});

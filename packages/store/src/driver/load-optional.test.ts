import { describe, expect, test } from 'vitest';
import { DriverMissingError } from '../errors.js';
import { importOptional } from './load-optional.js';

describe('importOptional', () => {
  test('a missing package is a typed error that names it', async () => {
    const err = await importOptional('mocra-no-such-driver-pkg', 'postgres').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DriverMissingError);
    expect(err).toMatchObject({
      code: 'MOCRA_ERR_STORE_DRIVER_MISSING',
      packageName: 'mocra-no-such-driver-pkg',
      retryable: false,
    });
    expect((err as Error).message).toContain('pnpm add mocra-no-such-driver-pkg');
  });

  test('an installed package loads', async () => {
    const mod = await importOptional<{ parse: unknown }>('smol-toml', 'seed');
    expect(typeof mod.parse).toBe('function');
  });
});

import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { projectDeps } from './create-command.js';
import { ownPackage } from './own-package.js';

const clone = path.resolve(import.meta.dirname, '../../../..');

describe('the dependencies mocra create writes', () => {
  test('a release depends on the registry ranges of its own version', () => {
    const released = { dir: '/opt/node_modules/mocra', version: '1.4.2', dependencies: { tsx: '^4.23.15' } };
    const { clone: linked, deps } = projectDeps(released, undefined);
    expect(linked).toBeUndefined();
    expect(deps).toEqual({
      mocra: '^1.4.2',
      '@mocra/testkit': '^1.4.2',
      tsx: '^4.23.15',
      typescript: '^5.9.3',
      '@types/node': '^20.19.0',
    });
  });

  test('a release given --link, and an unreleased build in its clone, link the clone', () => {
    const released = { dir: '/opt/node_modules/mocra', version: '1.4.2', dependencies: {} };
    for (const { clone: linked, deps } of [
      projectDeps(released, clone),
      projectDeps(ownPackage(), undefined),
    ]) {
      expect(linked).toBe(clone);
      expect(deps.mocra).toBe(`file:${path.join(clone, 'packages/mocra')}`);
      expect(deps['@mocra/testkit']).toBe(`file:${path.join(clone, 'packages/testkit')}`);
      expect(deps.tsx).toMatch(/^file:\/.*\/tsx$/);
    }
  });

  test('--link to a directory that is no built clone is a usage error', () => {
    const released = { dir: '/opt/node_modules/mocra', version: '1.4.2', dependencies: {} };
    expect(() => projectDeps(released, import.meta.dirname)).toThrow(
      /MOCRA_ERR_CLI_USAGE|no packages\/mocra/,
    );
  });
});

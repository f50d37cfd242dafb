import path from 'node:path';
import { defineConfig } from 'vitest/config';

// Tests resolve sibling packages to their TypeScript sources through the `@mocra/source`
// export condition, so `pnpm test` never runs against a stale dist.
const conditions = ['@mocra/source', 'node', 'import', 'module', 'default'];

const packages = ['mocra', 'core', 'dag', 'cluster', 'proxy', 'store', 'testkit', 'tests'];

export default defineConfig({
  resolve: { conditions },
  // Vitest hands ssr.resolve.conditions to the Node workers as --conditions, where they apply to
  // require() too: with 'import' in the list, CommonJS `pg` would require() pg-pool's ESM build and
  // crash. Vite adds 'import'/'require' per import kind by itself, so only ours goes here.
  ssr: { resolve: { conditions: ['@mocra/source', 'node'], externalConditions: ['@mocra/source'] } },
  test: {
    projects: packages.map((name) => ({
      extends: true,
      test: {
        name,
        root: path.join(import.meta.dirname, 'packages', name),
        include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
        environment: 'node',
      },
    })),
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two cores on CI: keep parallel files modest so timing-sensitive network tests stay calm.
    maxWorkers: 2,
  },
});

import { defineConfig } from 'tsup';

export default defineConfig({
  // The library, and the `mocra` bin (package.json "bin").
  entry: { index: 'src/index.ts', cli: 'src/cli/main.ts' },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: false,
});

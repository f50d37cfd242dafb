import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts', 'src/graph-entry.ts'],
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  // One copy of each module for both entries: an error thrown by analyzeGraph is the same class
  // whichever entry imported it.
  splitting: true,
});

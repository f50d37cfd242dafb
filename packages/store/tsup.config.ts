import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts', 'src/config-entry.ts'],
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: true,
});

import { defineConfig } from 'tsup';

export default defineConfig({
  // The library, the `mocra` bin (package.json "bin") and the program it loads after setting V8 up.
  entry: { index: 'src/index.ts', cli: 'src/cli/main.ts', program: 'src/cli/program.ts' },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: false,
});

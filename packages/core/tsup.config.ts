import { defineConfig } from 'tsup';

export default defineConfig({
  // The kernel, and the data tools behind subpaths (`@mocra/core/dataframe` …) so that importing
  // the kernel loads none of them. Shared modules become chunks (splitting), not copies.
  entry: {
    index: 'src/index.ts',
    dataframe: 'src/data/dataframe/index.ts',
    excel: 'src/data/excel/index.ts',
    sandbox: 'src/data/sandbox/index.ts',
    text: 'src/data/text/index.ts',
  },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: true,
});

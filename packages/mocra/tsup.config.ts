import { defineConfig } from 'tsup';

export default defineConfig({
  // The library, the `mocra` bin (package.json "bin"), and the module hooks `mocra run` registers for a spider file (node:module loads them by URL).
  // The data tools are subpaths (`mocra/dataframe`, `mocra/excel`, `mocra/sandbox`) so that
  // `import 'mocra'` loads none of them.
  entry: {
    index: 'src/index.ts',
    cli: 'src/cli/main.ts',
    'spider-hooks': 'src/cli/spider-hooks.ts',
    dataframe: 'src/data/dataframe.ts',
    excel: 'src/data/excel.ts',
    sandbox: 'src/data/sandbox.ts',
  },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: false,
});

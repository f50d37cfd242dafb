import { defineConfig } from 'tsup';

export default defineConfig({
  // The kernel, and the optional parts behind subpaths (`@mocra/core/api`, `/redis`, `/browser`,
  // `/cluster`, `/dataframe` …) so that importing the kernel loads none of them. Shared modules become chunks (splitting), not copies.
  entry: {
    index: 'src/index.ts',
    api: 'src/api/index.ts',
    browser: 'src/downloader/browser/index.ts',
    cluster: 'src/entries/cluster.ts',
    dataframe: 'src/data/dataframe/index.ts',
    excel: 'src/data/excel/index.ts',
    kafka: 'src/entries/kafka.ts',
    leveldb: 'src/entries/leveldb.ts',
    nats: 'src/entries/nats.ts',
    redis: 'src/entries/redis.ts',
    sandbox: 'src/data/sandbox/index.ts',
    store: 'src/store/index.ts',
    text: 'src/data/text/index.ts',
    websocket: 'src/downloader/websocket/index.ts',
  },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: true,
  tsconfig: 'tsconfig.build.json',
  sourcemap: true,
  clean: true,
  splitting: true,
  // No whitespace or comments in the bundle (names are kept, and the source maps map back):
  // V8 holds a module's whole source text for as long as the module lives, and the kernel's
  // comments were a third of it.
  esbuildOptions(options) {
    options.minifyWhitespace = true;
  },
});

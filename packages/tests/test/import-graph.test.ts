// `import 'mocra'` loads the kernel alone: none of the optional parts' dependencies (the control
// API's fastify and prom-client, the broker clients, LevelDB, the browser, zod) until a program
// uses them. Checked in a fresh node through the loader's own module graph.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { expect, test } from 'vitest';

const CHILD = path.resolve(import.meta.dirname, 'fixtures/import-graph-child.mjs');
const OPTIONAL = [
  'fastify',
  'prom-client',
  'ioredis',
  '@nats-io/transport-node',
  '@nats-io/jetstream',
  '@nats-io/kv',
  'kafkajs',
  'classic-level',
  'playwright-core',
  'zod',
];
/** Kernel dependencies that only some runs use: a config file, a schedule, a glob in a link scope. */
const ON_USE = ['smol-toml', 'croner', 'picomatch'];

interface Graph {
  imported: string[];
  taskConcurrency?: number;
  refused?: string;
  afterConfig?: string[];
  crawled?: number;
  afterCrawl?: string[];
  sources?: string[];
  workspace?: string[];
}

async function graph(...args: string[]): Promise<Graph> {
  return run([], args);
}

/** The same on the TypeScript sources: every module of the core is a URL of its own there. */
async function sourceGraph(...args: string[]): Promise<Graph> {
  return run(['--import', 'tsx', '--conditions=@mocra/source'], [...args, 'sources']);
}

async function run(nodeFlags: string[], args: string[]): Promise<Graph> {
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeFlags, CHILD, ...args], {
    cwd: path.resolve(import.meta.dirname, '..'),
    // No MOCRA_* variable of the caller's: a set one is read, and reading one loads the key table.
    env: Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('MOCRA_'))),
    timeout: 60_000,
  });
  return JSON.parse(stdout) as Graph;
}

test("importing mocra loads none of the optional parts' dependencies", async () => {
  const { imported } = await graph('mocra');
  // The inspection sees what the kernel does load: undici is its HTTP client.
  expect(imported).toContain('undici');
  expect(imported.filter((p) => OPTIONAL.includes(p))).toEqual([]);
  expect(imported.filter((p) => ON_USE.includes(p))).toEqual([]);
}, 60_000);

test('a configuration read from TOML loads zod then, and is validated by it', async () => {
  const run = await graph('mocra', 'config');
  expect(run.imported).not.toContain('zod');
  expect(run.taskConcurrency).toBe(3);
  expect(run.refused).toBe('MOCRA_ERR_CONFIG_INVALID');
  expect(run.afterConfig).toContain('zod');
  expect(run.afterConfig).toContain('smol-toml');
}, 60_000);

test('a crawl with no configuration loads no schema library', async () => {
  const run = await graph('mocra', 'crawl');
  expect(run.crawled).toBe(2);
  // The retry options are checked by hand; an empty module layer and an environment without
  // MOCRA_* variables need no schema either.
  expect(run.afterCrawl).not.toContain('zod');
  expect(run.afterCrawl?.filter((p) => ON_USE.includes(p))).toEqual([]);
}, 60_000);

// The root of @mocra/core is the kernel; each optional part is a subpath, so that a program loads
// only what it imports. What moved: the root must not name it, and its subpath must. Checked on
// the whole exported surface, types included, as the TypeScript compiler sees each entry file.
const SUBPATHS: Record<string, { values: string[]; types: string[] }> = {
  redis: {
    values: [
      'createRedisQueueBackend',
      'createRedisCoordination',
      'createRedisDeduplicator',
      'RedisDeduplicator',
      'dedupKeyBytes',
      'createRedisHostBudget',
      'RedisHostBudget',
    ],
    types: [
      'RedisQueueBackend',
      'RedisQueueBackendOptions',
      'RedisTopicKeys',
      'RedisCoordination',
      'RedisCoordinationOptions',
      'RedisDeduplicatorOptions',
      'RedisHostBudgetOptions',
    ],
  },
  nats: {
    values: ['createNatsQueueBackend', 'createNatsDeduplicator', 'NatsDeduplicator', 'natsDedupBucket'],
    types: ['NatsQueueBackend', 'NatsQueueBackendOptions', 'NatsTopicNames', 'NatsDeduplicatorOptions'],
  },
  kafka: {
    values: ['createKafkaQueueBackend'],
    types: ['KafkaLike', 'KafkaQueueBackend', 'KafkaQueueBackendOptions', 'KafkaTopicNames'],
  },
  leveldb: {
    values: [
      'createLevelQueueBackend',
      'LevelQueueBackend',
      'createTieredDeduplicator',
      'TieredDeduplicator',
    ],
    types: ['LevelQueueBackendOptions', 'TieredDeduplicatorOptions', 'TieredDeduplicatorStats'],
  },
  browser: {
    values: [
      'BROWSER_META_KEY',
      'BrowserDownloader',
      'BrowserPagePool',
      'BrowserResponse',
      'chromiumPath',
      'createBrowserDownloader',
      'createBrowserPagePool',
      'DEFAULT_BLOCKED_RESOURCES',
      'DEFAULT_CHROMIUM_FLAGS',
      'DEFAULT_CHROMIUM_PATH',
      'launchChromium',
      'parseRenderOptions',
    ],
    types: [
      'BlockableResource',
      'BrowserContextSettings',
      'BrowserDownloaderOptions',
      'BrowserPagePoolOptions',
      'BrowserPagePoolStats',
      'ChromiumLaunchOptions',
      'PlaywrightPackage',
      'RenderOptions',
      'RenderRequest',
      'RenderResult',
      'ScreenshotOptions',
      'ScrollOptions',
      'WaitUntil',
    ],
  },
  websocket: {
    values: [
      'backoffDelay',
      'createWebSocketDownloader',
      'createWebSocketManager',
      'defaultShouldReconnect',
      'parseWebSocketRequestOptions',
      'resolveBackoff',
      'WEBSOCKET_CHANNEL_NAMES',
      'WEBSOCKET_META_KEY',
      'WebSocketConnection',
      'WebSocketDownloader',
      'WebSocketManager',
      'websocketChannels',
      'websocketRequest',
    ],
    types: [
      'BackoffOptions',
      'WebSocketCloseCause',
      'WebSocketCloseInfo',
      'WebSocketCloseMessage',
      'WebSocketConnectionOptions',
      'WebSocketConnectionStats',
      'WebSocketConnectOptions',
      'WebSocketDownloaderOptions',
      'WebSocketManagerOptions',
      'WebSocketMessage',
      'WebSocketOpenMessage',
      'WebSocketReconnectMessage',
      'WebSocketReconnectOptions',
      'WebSocketRequestOptions',
      'WebSocketState',
    ],
  },
  store: {
    values: [
      'createItemStoreMiddleware',
      'DB_CHANNEL_NAMES',
      'EngineStore',
      'resolveEngineStoreOptions',
      'STORE_CRON_PREFIX',
      'StoreModuleConfigProvider',
      'storeOptionsFromConfig',
    ],
    types: [
      'DbErrorMessage',
      'EngineStoreOptions',
      'ItemStoreMiddleware',
      'ItemStoreMiddlewareOptions',
      'ItemStoreMiddlewareSettings',
      'ItemStoreMiddlewareStats',
      'ModuleSkippedMessage',
      'ResolvedEngineStoreOptions',
      'StoreCronOptions',
      'StoreCronRefresh',
      'StoreLogOptions',
      'StoreLogWriterStats',
      'StoreMiddlewareSelection',
      'StoreModuleConfigProviderOptions',
      'TaskResultOptions',
      'TaskRunKey',
    ],
  },
  cluster: {
    values: [
      'clusterInfoOf',
      'createCoordinationFencingStore',
      'createCoordinationIdempotencyStore',
      'createCoordinationRunGuard',
      'createCoordinationRunStateStore',
      'createCronOwnership',
      'createDagJobs',
      'createDagWorker',
      'createQueueDagDispatcher',
      'createRaftClusterInfo',
      'DAG_REPLY_TOPIC_PREFIX',
      'DAG_TASK_TOPIC_PREFIX',
      'DagJobs',
      'DagWorker',
      'dagTaskTopic',
      'QueueDagDispatcher',
      'accountPartitionKey',
      'ClusterRun',
      'connectDistributed',
      'createClusterRun',
      'DistributedRuntime',
      'forwardChannel',
      'hostPartitionKey',
      'PartitionRouter',
      'createRaftCoordination',
      'RaftCoordinationClient',
      'raftConfigFromUrl',
    ],
    types: [
      'CoordinationFencingStore',
      'CoordinationFencingStoreOptions',
      'CoordinationIdempotencyStoreOptions',
      'CoordinationRunGuardOptions',
      'CoordinationRunStateStoreOptions',
      'CronOwnership',
      'CronOwnershipOptions',
      'DagJobOptions',
      'DagJobResult',
      'DagJobsAttachOptions',
      'DagJobsOptions',
      'DagReplyMessage',
      'DagTaskMessage',
      'DagWorkerOptions',
      'DagWorkerStats',
      'QueueDagDispatcherOptions',
      'RaftClusterInfoOptions',
      'RemoteErrorInfo',
      'ClusterRunOptions',
      'DistributedOptions',
      'ForwardBody',
      'ForwardMessage',
      'MemberActivity',
      'PartitionRouterOptions',
      'SeedOutcome',
      'RaftCoordination',
      'RaftCoordinationOptions',
      'RaftUrlOptions',
    ],
  },
};

/** Literal specifiers, so that the resolver sees each subpath (a template it cannot). */
const SUBPATH_MODULES: Record<string, () => Promise<Record<string, unknown>>> = {
  redis: () => import('@mocra/core/redis'),
  nats: () => import('@mocra/core/nats'),
  kafka: () => import('@mocra/core/kafka'),
  leveldb: () => import('@mocra/core/leveldb'),
  browser: () => import('@mocra/core/browser'),
  websocket: () => import('@mocra/core/websocket'),
  store: () => import('@mocra/core/store'),
  cluster: () => import('@mocra/core/cluster'),
};

const CORE = path.resolve(import.meta.dirname, '../../core');

/** Every name an entry of @mocra/core exports (values and types), from its source entry file. */
function exportedNames(): Map<string, Set<string>> {
  const manifest = JSON.parse(fs.readFileSync(path.join(CORE, 'package.json'), 'utf8')) as {
    exports: Record<string, string | Record<string, string>>;
  };
  const entries = new Map<string, string>();
  for (const [key, target] of Object.entries(manifest.exports)) {
    if (typeof target === 'object') entries.set(key, path.join(CORE, target['@mocra/source']!));
  }
  const program = ts.createProgram([...entries.values()], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    // Names only, no type checking: neither the default library nor ambient types are needed.
    noLib: true,
    types: [],
  });
  const checker = program.getTypeChecker();
  const out = new Map<string, Set<string>>();
  for (const [key, file] of entries) {
    const source = program.getSourceFile(file);
    const symbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    out.set(key, new Set(symbol === undefined ? [] : checker.getExportsOfModule(symbol).map((s) => s.name)));
  }
  return out;
}

test('the optional parts are subpaths: the root of @mocra/core names none of them', async () => {
  const surface = exportedNames();
  const root = surface.get('.')!;
  // The root still is the kernel (a sanity check that the program read the entry files).
  expect(root).toContain('createEngine');
  expect(root).toContain('createQueueBackend');
  expect(root).toContain('MocraError');
  for (const [sub, { values, types }] of Object.entries(SUBPATHS)) {
    const names = [...values, ...types];
    expect(
      names.filter((n) => root.has(n)),
      `root still exports ${sub} names`,
    ).toEqual([]);
    const entry = surface.get(`./${sub}`);
    expect(entry, `no ./${sub} in packages/core/package.json`).toBeDefined();
    expect(
      names.filter((n) => !entry!.has(n)),
      `@mocra/core/${sub} misses`,
    ).toEqual([]);
  }
  // At run time too: the root module has none of the moved values, each subpath module has them.
  const rootModule: Record<string, unknown> = await import('@mocra/core');
  for (const [sub, { values }] of Object.entries(SUBPATHS)) {
    expect(values.filter((n) => n in rootModule)).toEqual([]);
    const module: Record<string, unknown> = await SUBPATH_MODULES[sub]!();
    expect(
      values.filter((n) => typeof module[n] === 'undefined'),
      `@mocra/core/${sub}`,
    ).toEqual([]);
  }
}, 120_000);

// What each subpath holds, by source file: the root must load none of them.
const LAZY_SOURCES: Record<string, RegExp> = {
  redis: /^(queue\/redis-queue|coordination\/redis-coordination|frontier\/dedup\/redis-deduplicator)\.ts$/,
  nats: /^(queue\/nats-queue|frontier\/dedup\/nats-deduplicator)\.ts$/,
  kafka: /^queue\/kafka-(queue|client)\.ts$/,
  browser: /^downloader\/browser\//,
  websocket: /^downloader\/websocket\//,
  cluster:
    /^(cluster\/|coordination\/raft-|distributed\/(distributed-runtime|cluster-run|partition-router)\.ts$)/,
};

test('the root of @mocra/core loads none of the backend, downloader and cluster subpaths', async () => {
  // createQueueBackend and createCoordination import a backend's module only for its URL. LevelDB
  // and the store are not in this list: the engine's persistence and its database use them directly.
  const { sources: root } = await sourceGraph('@mocra/core');
  expect(root).toContain('engine/engine.ts');
  for (const [sub, pattern] of Object.entries(LAZY_SOURCES)) {
    expect(
      root!.filter((f) => pattern.test(f)),
      `the root loads ${sub} code`,
    ).toEqual([]);
  }
  // The facade's builder loads the cluster code only for a distributed run or a DAG job, and
  // names the broker backends only through the URL factories.
  const { sources: facade } = await sourceGraph('mocra');
  expect(facade).toContain('engine/engine.ts');
  for (const sub of ['redis', 'nats', 'kafka', 'cluster']) {
    expect(
      facade!.filter((f) => LAZY_SOURCES[sub]!.test(f)),
      `mocra loads ${sub} code`,
    ).toEqual([]);
  }
  // Of the Raft package the facade loads only ClusterConfig, and of the DAG executor only the
  // graph check that module graphs use: the node, its log and the executor load with a run.
  const { workspace } = await sourceGraph('mocra');
  expect(workspace!.filter((f) => f.startsWith('cluster/'))).toEqual([
    'cluster/src/config-entry.ts',
    'cluster/src/config/cluster-config.ts',
    'cluster/src/errors.ts',
  ]);
  expect(workspace!.filter((f) => f.startsWith('dag/'))).toEqual([
    'dag/src/errors.ts',
    'dag/src/graph-entry.ts',
    'dag/src/graph/analyze.ts',
  ]);
  // Of the store only how module configs are built and its error classes: the repository, its
  // drivers and migrations load with the first store a run opens.
  expect(workspace!.filter((f) => f.startsWith('store/'))).toEqual([
    'store/src/config-entry.ts',
    'store/src/config/module-config.ts',
    'store/src/errors.ts',
    'store/src/model/json.ts',
  ]);
  // And each subpath does load its own (so that the patterns name real files).
  const { sources: redis } = await sourceGraph('@mocra/core/redis');
  expect(redis!.filter((f) => LAZY_SOURCES.redis!.test(f)).length).toBe(3);
  const { sources: cluster } = await sourceGraph('@mocra/core/cluster');
  expect(cluster).toContain('distributed/distributed-runtime.ts');
}, 120_000);

import { ClusterConfigError } from '../errors.js';
import type { ClusterNodeOptions } from '../node/cluster-node.js';

export type ClusterMode = 'bootstrap' | 'join';

export interface ClusterConfigOptions {
  /** Shared secret between nodes (sent as `x-mocra-cluster-secret`). @default undefined (no auth) */
  readonly secret?: string;
  /** Timing and policy of the node. @default see {@link ClusterNodeOptions} */
  readonly node?: ClusterNodeOptions;
}

const ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const ADDR_PATTERN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/**
 * Where a node lives and how it gets into a cluster. Exactly one node of a new cluster
 * bootstraps; every other node joins through any node that is already in (a seed). A node
 * restarted on a data directory that already holds a log ignores the mode and recovers.
 *
 * ```ts
 * const first = ClusterConfig.bootstrap('n1', '127.0.0.1:7001', './data/n1');
 * const second = ClusterConfig.join('n2', '127.0.0.1:7002', './data/n2', '127.0.0.1:7001');
 * const fromEnv = ClusterConfig.fromEnv(); // MOCRA_NODE_ID, MOCRA_HTTP_ADDR, MOCRA_DATA_DIR, MOCRA_SEEDS
 * ```
 */
export class ClusterConfig {
  readonly nodeId: string;
  /** `host:port` this node listens on and is reached at (port 0 picks a free port). */
  readonly addr: string;
  /** Directory of this node's LevelDB log. */
  readonly dataDir: string;
  readonly mode: ClusterMode;
  /** `host:port` of nodes to join through (empty when bootstrapping). */
  readonly seeds: readonly string[];
  readonly secret: string | undefined;
  readonly node: ClusterNodeOptions;

  private constructor(
    nodeId: string,
    addr: string,
    dataDir: string,
    mode: ClusterMode,
    seeds: readonly string[],
    options: ClusterConfigOptions,
  ) {
    if (!ID_PATTERN.test(nodeId)) {
      throw new ClusterConfigError(
        `node id ${JSON.stringify(nodeId)} must be 1–64 letters, digits, '.', '_' or '-'`,
      );
    }
    if (!isAddress(addr, true))
      throw new ClusterConfigError(`address ${JSON.stringify(addr)} is not host:port`);
    if (typeof dataDir !== 'string' || dataDir.trim() === '')
      throw new ClusterConfigError('dataDir must be a path');
    for (const s of seeds) {
      if (!isAddress(s, false)) throw new ClusterConfigError(`seed ${JSON.stringify(s)} is not host:port`);
    }
    if (mode === 'join' && seeds.length === 0)
      throw new ClusterConfigError('joining needs at least one seed');
    if (options.secret !== undefined && options.secret.length === 0) {
      throw new ClusterConfigError('secret must not be empty (leave it out for no auth)');
    }
    this.nodeId = nodeId;
    this.addr = addr;
    this.dataDir = dataDir;
    this.mode = mode;
    this.seeds = Object.freeze([...seeds]);
    this.secret = options.secret;
    this.node = options.node ?? {};
  }

  /** Start a new cluster with this node as its only voter. */
  static bootstrap(
    id: string,
    addr: string,
    dataDir: string,
    options: ClusterConfigOptions = {},
  ): ClusterConfig {
    return new ClusterConfig(id, addr, dataDir, 'bootstrap', [], options);
  }

  /** Join an existing cluster through `seed` (any member; it forwards to the leader). */
  static join(
    id: string,
    addr: string,
    dataDir: string,
    seed: string | readonly string[],
    options: ClusterConfigOptions = {},
  ): ClusterConfig {
    const seeds = typeof seed === 'string' ? [seed] : [...seed];
    return new ClusterConfig(id, addr, dataDir, 'join', seeds, options);
  }

  /**
   * Read `MOCRA_NODE_ID`, `MOCRA_HTTP_ADDR`, `MOCRA_DATA_DIR`, `MOCRA_SEEDS` (comma-separated
   * `host:port`; this node's own address is ignored) and `MOCRA_CLUSTER_SECRET`. No seeds means
   * bootstrap.
   */
  static fromEnv(
    env: Readonly<Record<string, string | undefined>> = process.env,
    options: ClusterConfigOptions = {},
  ): ClusterConfig {
    const need = (name: string): string => {
      const v = env[name]?.trim();
      if (!v) throw new ClusterConfigError(`environment variable ${name} is not set`);
      return v;
    };
    const id = need('MOCRA_NODE_ID');
    const addr = need('MOCRA_HTTP_ADDR');
    const dataDir = need('MOCRA_DATA_DIR');
    const seeds = (env.MOCRA_SEEDS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0 && s !== addr);
    const secret = env.MOCRA_CLUSTER_SECRET?.trim();
    const merged: ClusterConfigOptions = { ...options, ...(secret ? { secret } : {}) };
    return seeds.length === 0
      ? ClusterConfig.bootstrap(id, addr, dataDir, merged)
      : ClusterConfig.join(id, addr, dataDir, seeds, merged);
  }
}

function isAddress(addr: unknown, allowPortZero: boolean): boolean {
  if (typeof addr !== 'string') return false;
  const m = ADDR_PATTERN.exec(addr);
  if (!m) return false;
  const port = Number(m[2]);
  return port < 65536 && (port > 0 || allowPortZero);
}

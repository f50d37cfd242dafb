/**
 * `raft://` coordination URLs: where this process's cluster node listens and how it gets into
 * the cluster, in one string (a config value, `MOCRA_COORDINATION`).
 *
 * ```
 *  raft://127.0.0.1:7001?id=n1&dir=./data/n1                       bootstrap a new cluster
 *  raft://127.0.0.1:7002?id=n2&dir=./data/n2&join=127.0.0.1:7001   join through any member(s)
 *  raft://env                                                      ClusterConfig.fromEnv():
 *                         MOCRA_NODE_ID, MOCRA_HTTP_ADDR, MOCRA_DATA_DIR, MOCRA_SEEDS
 * ```
 *
 * The shared secret between nodes is never put in a URL: it comes from `MOCRA_CLUSTER_SECRET`.
 */
import { ClusterConfig } from '@mocra/cluster';
import { InvalidBackendUrlError } from '../errors.js';

export interface RaftUrlOptions {
  /** The node id when the URL has no `id`. */
  nodeId?: string;
  /** Where `MOCRA_CLUSTER_SECRET` (and, for `raft://env`, the rest) is read. @default process.env */
  env?: Readonly<Record<string, string | undefined>>;
}

/** The cluster config a `raft://` URL describes. Throws InvalidBackendUrlError for a URL it cannot use. */
export function raftConfigFromUrl(url: string, options: RaftUrlOptions = {}): ClusterConfig {
  const env = options.env ?? process.env;
  const text = url.trim();
  const match = /^raft:(?:\/\/)?([^?#]*)(?:\?([^#]*))?$/i.exec(text);
  if (!match)
    throw new InvalidBackendUrlError(text, 'expected raft://host:port?id=…&dir=…[&join=host:port,…]');
  const addr = match[1]!.replace(/\/+$/, '');
  const params = new URLSearchParams(match[2] ?? '');
  for (const key of params.keys()) {
    if (!['id', 'dir', 'join'].includes(key))
      throw new InvalidBackendUrlError(text, `unknown parameter '${key}' (expected id, dir, join)`);
  }
  const secret = env.MOCRA_CLUSTER_SECRET?.trim();
  const clusterOptions = secret ? { secret } : {};
  try {
    if (addr.toLowerCase() === 'env') {
      if ([...params.keys()].length > 0)
        throw new InvalidBackendUrlError(text, 'raft://env takes no parameters');
      return ClusterConfig.fromEnv(env);
    }
    if (addr === '') throw new InvalidBackendUrlError(text, 'no host:port (or raft://env)');
    const id = params.get('id') ?? options.nodeId;
    if (id === undefined || id === '')
      throw new InvalidBackendUrlError(text, 'no node id: add ?id=… (it must stay the same across restarts)');
    const dir = params.get('dir');
    if (dir === null || dir === '')
      throw new InvalidBackendUrlError(text, "no data directory: add &dir=… (the node's LevelDB log)");
    const seeds = (params.get('join') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0 && s !== addr);
    return seeds.length === 0
      ? ClusterConfig.bootstrap(id, addr, dir, clusterOptions)
      : ClusterConfig.join(id, addr, dir, seeds, clusterOptions);
  } catch (err) {
    if (err instanceof InvalidBackendUrlError) throw err;
    // ClusterConfigError: a bad id, address, directory or seed — say which, in URL terms.
    throw new InvalidBackendUrlError(text, err instanceof Error ? err.message : String(err));
  }
}

import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type { ClusterConfig } from '../config/cluster-config.js';
import { ClusterConfigError } from '../errors.js';
import type { NodeId, RaftMessage } from '../raft/types.js';
import { LevelKvEngine } from '../storage/level-engine.js';
import { HttpPeerServer } from '../transport/http-server.js';
import { HttpTransport } from '../transport/http-transport.js';
import type { ClusterNodeOptions } from './cluster-node.js';
import { ClusterNode } from './cluster-node.js';
import type { Clock, NodeRequest, NodeResponse, PeerTransport } from './ports.js';

/** The system clocks: `Date.now`, `performance.now`, `setTimeout`, `setImmediate`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
  defer(fn) {
    setImmediate(fn);
  },
};

function cryptoRandom(): number {
  return randomBytes(6).readUIntBE(0, 6) / 2 ** 48;
}

/** Joins the HTTP client and server so closing the node closes both. */
class ServedTransport implements PeerTransport {
  constructor(
    readonly client: HttpTransport,
    readonly server: HttpPeerServer,
  ) {}
  send(to: NodeId, addr: string, messages: readonly RaftMessage[]): void {
    this.client.send(to, addr, messages);
  }
  call(addr: string, request: NodeRequest, timeoutMs: number): Promise<NodeResponse> {
    return this.client.call(addr, request, timeoutMs);
  }
  onRemoved(listener: () => void): void {
    this.client.onRemoved(listener);
  }
  async close(): Promise<void> {
    await this.server.close();
    await this.client.close();
  }
}

/**
 * Start a cluster node for real: LevelDB log in `config.dataDir`, HTTP server on `config.addr`,
 * undici to its peers, the wall clock. Resolves once the node has recovered its log (and, for a
 * new node that joins, once the leader has added it).
 *
 * ```ts
 * const node = await createClusterNode(ClusterConfig.bootstrap('n1', '127.0.0.1:7001', './data/n1'));
 * await node.waitForLeader();
 * const lease = await node.acquireLock('cron', { ttlMs: 10_000 });
 * ```
 */
export async function createClusterNode(
  config: ClusterConfig,
  options: ClusterNodeOptions = {},
): Promise<ClusterNode> {
  const nodeOptions: ClusterNodeOptions = { ...config.node, ...options };
  try {
    await mkdir(config.dataDir, { recursive: true });
  } catch (cause) {
    throw new ClusterConfigError(`cannot create data directory ${config.dataDir}`, { cause });
  }
  let node: ClusterNode | undefined;
  const server = await HttpPeerServer.listen(config.addr, {
    ...(config.secret === undefined ? {} : { secret: config.secret }),
    status: () => node?.status() ?? { starting: true },
  });
  // With port 0 the node is reached at the port the OS picked.
  const addr = config.addr.endsWith(':0')
    ? `${config.addr.slice(0, -2)}:${server.address.slice(server.address.lastIndexOf(':') + 1)}`
    : config.addr;
  const client = new HttpTransport({
    selfAddr: addr,
    ...(config.secret === undefined ? {} : { secret: config.secret }),
  });
  const transport = new ServedTransport(client, server);
  let engine: LevelKvEngine;
  try {
    engine = await LevelKvEngine.open(config.dataDir);
  } catch (err) {
    await transport.close();
    throw err;
  }
  try {
    node = await ClusterNode.start({
      id: config.nodeId,
      addr,
      engine,
      transport,
      clock: systemClock,
      random: cryptoRandom,
      bootstrap: config.mode === 'bootstrap',
      seeds: config.seeds,
      options: nodeOptions,
      attach: (handler) => server.attach(handler),
    });
  } catch (err) {
    await transport.close().catch(() => {});
    await engine.close().catch(() => {});
    throw err;
  }
  return node;
}

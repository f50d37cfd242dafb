/**
 * One entry point from a URL (a config value, an environment variable) to a coordination
 * backend: `local://` (this process alone), `redis://host:6379[/db]`, or `raft://host:port?id=…&dir=…`
 * (this process runs a node of the embedded Raft cluster; see raft-url.ts).
 */
import { InvalidBackendUrlError } from '../errors.js';
import { createLocalCoordination, type LocalCoordinationOptions } from './local-coordination.js';
import type { RaftCoordinationOptions } from './raft-coordination.js';
import type { RedisCoordinationOptions } from './redis-coordination.js';
import type { Coordination } from './types.js';

export interface CreateCoordinationOptions {
  /** This member's id. @default `${hostname}-${pid}-${random}` */
  nodeId?: string;
  /** Keeps clusters sharing one server apart. @default 'mocra' */
  namespace?: string;
  /** A member silent for this long is no longer live. @default 10000 */
  memberTtlMs?: number;
  /** Options only the local backend reads. */
  local?: Omit<LocalCoordinationOptions, 'nodeId' | 'memberTtlMs'>;
  /** Options only the Redis backend reads. */
  redis?: Omit<RedisCoordinationOptions, 'url' | 'nodeId' | 'namespace' | 'memberTtlMs'>;
  /** Options only the Raft backend reads (node timing, leader wait). */
  raft?: Pick<RaftCoordinationOptions, 'nodeOptions' | 'heartbeatMs' | 'leaderTimeoutMs'>;
}

export const COORDINATION_URL_SCHEMES = ['local', 'redis', 'rediss', 'raft'] as const;

export async function createCoordination(
  url: string,
  options: CreateCoordinationOptions = {},
): Promise<Coordination> {
  const expected = COORDINATION_URL_SCHEMES.map((s) => `${s}://`).join(', ');
  if (typeof url !== 'string' || url.trim() === '')
    throw new InvalidBackendUrlError(String(url), `expected one of ${expected}`);
  const text = url.trim();
  const match = /^([a-z][a-z0-9+.-]*):(?:\/\/)?(.*)$/i.exec(text);
  if (!match) throw new InvalidBackendUrlError(text, `no scheme; expected one of ${expected}`);
  const scheme = match[1]!.toLowerCase();
  const rest = match[2]!;
  const common = {
    ...(options.nodeId === undefined ? {} : { nodeId: options.nodeId }),
    ...(options.memberTtlMs === undefined ? {} : { memberTtlMs: options.memberTtlMs }),
  };
  switch (scheme) {
    case 'local':
      if (rest.replace(/\/+$/, '') !== '')
        throw new InvalidBackendUrlError(text, 'local:// takes no host or path');
      return createLocalCoordination({ ...options.local, ...common });
    case 'redis':
    case 'rediss': {
      if (rest === '' || rest.startsWith('/')) throw new InvalidBackendUrlError(text, 'no host');
      // The remote backends' modules load on first use, so that a local run never loads them.
      const { createRedisCoordination } = await import('./redis-coordination.js');
      return createRedisCoordination({
        ...options.redis,
        ...common,
        ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
        url: text,
      });
    }
    case 'raft': {
      // The URL's node id names the Raft node; the coordination member id defaults to it.
      const [{ raftConfigFromUrl }, { createRaftCoordination }] = await Promise.all([
        import('./raft-url.js'),
        import('./raft-coordination.js'),
      ]);
      const config = raftConfigFromUrl(text, options.nodeId === undefined ? {} : { nodeId: options.nodeId });
      return createRaftCoordination({
        ...options.raft,
        config,
        ...(options.memberTtlMs === undefined ? {} : { memberTtlMs: options.memberTtlMs }),
        ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
      });
    }
    default:
      throw new InvalidBackendUrlError(text, `unknown scheme '${scheme}:'; expected one of ${expected}`);
  }
}

/**
 * One call that puts a control API (dashboard, observability, control, `/metrics`) in front of
 * an engine: metrics registry, telemetry from the engine's channels, the engine control plane
 * and the fastify server, started together and closed together.
 *
 * ```ts
 * const engine = createEngine({ logger });
 * engine.register(module, sink);
 * const api = await startEngineApi(engine, { port: 8905, apiKey, logs });  // throws ApiBindError, nothing left running
 * const summary = await engine.run();
 * await api.close();
 * ```
 *
 * Start it before `engine.run()`: a port that cannot be bound then fails start-up before any
 * work is taken, instead of leaving a crawl running without its API.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { clusterInfoOf } from '../cluster/raft-cluster-info.js';
import type { Coordination } from '../coordination/types.js';
import type { Engine } from '../engine/engine.js';
import { attachEngineTelemetry, type EngineTelemetry } from '../observability/metrics/engine-telemetry.js';
import { createMetrics, type MocraMetrics } from '../observability/metrics/mocra-metrics.js';
import { SystemSampler } from '../observability/metrics/system-sampler.js';
import { createEngineControlPlane, type EngineControlPlane } from './engine-control-plane.js';
import { type ApiAddress, type ApiServer, type ApiServerOptions, createApiServer } from './server.js';
import type { ClusterInfoSource } from './types.js';

export interface EngineApiOptions extends Omit<ApiServerOptions, 'controlPlane' | 'metrics' | 'system'> {
  /** The `node` label and the node name in views. @default the coordination node id, else the host name */
  node?: string;
  /** A shared coordination backend: cluster-wide pause, `/nodes`, the cluster view. */
  coordination?: Coordination;
  /** Leader, roles, term, commit index and partition map in the cluster view. @default the Raft backend's own */
  clusterInfo?: ClusterInfoSource;
  /** Use this registry (e.g. to add your own families); `false` serves no `/metrics`. @default a new one */
  metrics?: MocraMetrics | false;
  /** Also expose the Node.js process metrics on `/metrics`. @default true */
  processMetrics?: boolean;
  /** How often a node checks the cluster-wide pause key. @default 1000 */
  pausePollMs?: number;
  /** A partitioned cluster's map for `/nodes`: each member's keys (`host:…`, `account:…`). @default none */
  partitions?: () => ReadonlyMap<string, readonly string[]>;
}

export interface EngineApi {
  readonly server: ApiServer;
  readonly address: ApiAddress;
  readonly url: string;
  readonly metrics: MocraMetrics | undefined;
  readonly telemetry: EngineTelemetry;
  readonly controlPlane: EngineControlPlane;
  /** Stop serving and detach from the engine's channels (the engine is not stopped). */
  close(): Promise<void>;
}

export async function startEngineApi(engine: Engine, options: EngineApiOptions = {}): Promise<EngineApi> {
  const {
    node: nodeOption,
    coordination,
    clusterInfo = coordination === undefined ? undefined : clusterInfoOf(coordination),
    metrics: metricsOption,
    processMetrics,
    pausePollMs,
    partitions,
    ...serverOptions
  } = options;
  const node = nodeOption ?? coordination?.nodeId;
  const system = new SystemSampler();
  const metrics =
    metricsOption === false
      ? undefined
      : (metricsOption ??
        createMetrics({
          ...(node === undefined ? {} : { node }),
          ...(processMetrics === undefined ? {} : { processMetrics }),
          system,
        }));
  const pauseScope = coordination !== undefined && coordination.kind !== 'local' ? 'cluster' : 'local';
  const telemetry = attachEngineTelemetry(engine, {
    pauseScope,
    ...(metrics === undefined ? {} : { metrics }),
  });
  const controlPlane = createEngineControlPlane({
    engine,
    telemetry,
    ...(node === undefined ? {} : { node }),
    ...(coordination === undefined ? {} : { coordination }),
    ...(clusterInfo === undefined ? {} : { clusterInfo }),
    ...(pausePollMs === undefined ? {} : { pausePollMs }),
    ...(partitions === undefined ? {} : { partitions }),
  });
  const server = createApiServer({
    ...serverOptions,
    controlPlane,
    system,
    ...(metrics === undefined ? {} : { metrics }),
  });
  let address: ApiAddress;
  try {
    address = await server.listen();
  } catch (err) {
    controlPlane.close();
    telemetry.close();
    throw err;
  }
  metrics?.set('componentHealth', { component: 'api' }, 1);
  const detachCluster = metrics === undefined ? () => {} : watchCluster(metrics, coordination);
  let closed: Promise<void> | undefined;
  return {
    server,
    address,
    url: address.url,
    metrics,
    telemetry,
    controlPlane,
    close() {
      closed ??= (async () => {
        metrics?.set('componentHealth', { component: 'api' }, 0);
        detachCluster();
        controlPlane.close();
        telemetry.close();
        await server.close();
      })();
      return closed;
    },
  };
}

/**
 * Cluster families: membership and coordination health at scrape time; leadership from the
 * leader elections' channel (`mocra:coordination:leader`) for this node. A single node (no
 * shared backend) is a cluster of one that leads itself.
 */
function watchCluster(metrics: MocraMetrics, coordination: Coordination | undefined): () => void {
  if (coordination === undefined || coordination.kind === 'local') {
    metrics.set('clusterMembers', {}, 1);
    metrics.set('clusterLeader', {}, 1);
    return () => {};
  }
  const removeCollector = metrics.addCollector(async () => {
    try {
      const members = await coordination.members();
      metrics.set('clusterMembers', {}, members.length);
      metrics.set('componentHealth', { component: 'coordination' }, 1);
    } catch {
      metrics.set('componentHealth', { component: 'coordination' }, 0);
    }
  });
  const onLeader = (message: unknown) => {
    const m = message as { nodeId?: unknown; leader?: unknown } | null;
    if (
      m !== null &&
      typeof m === 'object' &&
      m.nodeId === coordination.nodeId &&
      typeof m.leader === 'boolean'
    ) {
      metrics.set('clusterLeader', {}, m.leader ? 1 : 0);
    }
  };
  diagnostics_channel.subscribe('mocra:coordination:leader', onLeader);
  return () => {
    removeCollector();
    diagnostics_channel.unsubscribe('mocra:coordination:leader', onLeader);
  };
}

/**
 * How the builder decides between one process and a cluster, by configuration only: builder
 * methods first, then the environment, then the in-memory default.
 *
 * | setting      | builder                 | environment          | TOML (`[channel_config]`) |
 * | ------------ | ----------------------- | -------------------- | ------------------------- |
 * | queue        | `.queue(url)`           | `MOCRA_QUEUE`        | `queue`                   |
 * | coordination | `.coordination(url)`    | `MOCRA_COORDINATION` | `coordination`            |
 * | run id       | `.cluster({ runId })`   | `MOCRA_RUN_ID`       | `run_id`                  |
 * | member id    | `.cluster({ nodeId })`  | `MOCRA_NODE_ID`      | —                         |
 * | namespace    | `.engineOptions({ namespace })` | `MOCRA_NAME` | `name`                    |
 *
 * A queue URL other than `memory://` makes the run distributed. With `.cluster(ClusterConfig…)`
 * (the embedded Raft cluster) the run is distributed whatever the queue: unset, `memory://` or
 * `none` make it a partitioned cluster (no queue service; each node on its own queues).
 */
import { InvalidArgumentError, type MocraConfig } from '@mocra/core';
import type { DistributedOptions } from '@mocra/core/cluster';

/** What `.cluster()` sets (besides the queue and coordination URLs). */
export type ClusterOptions = Omit<DistributedOptions, 'queue' | 'coordination'>;

export interface ClusterSettings {
  queue?: string;
  coordination?: string;
  cluster?: ClusterOptions;
  namespace?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The distributed options in force, or undefined for a single in-memory process. `raft`: this
 * process runs a node of the embedded Raft cluster (then no queue means partitioned).
 */
export function resolveClusterOptions(
  settings: ClusterSettings,
  env: Env = process.env,
  options: { raft?: boolean } = {},
): DistributedOptions | undefined {
  const given = settings.queue ?? nonEmpty(env.MOCRA_QUEUE);
  const none = given !== undefined && /^none$/i.test(given.trim());
  if (none && options.raft !== true) {
    throw new InvalidArgumentError(
      "queue 'none' (no queue service) partitions the work over the embedded Raft cluster: it needs .cluster(ClusterConfig…); one process needs no queue setting",
    );
  }
  const local = given === undefined || none || /^memory:(\/\/)?\/*$/i.test(given.trim());
  if (local && options.raft !== true) return undefined;
  const queue = local ? undefined : given;
  const coordination = settings.coordination ?? nonEmpty(env.MOCRA_COORDINATION);
  const runId = settings.cluster?.runId ?? nonEmpty(env.MOCRA_RUN_ID);
  const nodeId = settings.cluster?.nodeId ?? nonEmpty(env.MOCRA_NODE_ID);
  const namespace = settings.cluster?.namespace ?? settings.namespace ?? nonEmpty(env.MOCRA_NAME);
  return {
    ...settings.cluster,
    ...(queue === undefined ? {} : { queue }),
    ...(coordination === undefined ? {} : { coordination }),
    ...(runId === undefined ? {} : { runId }),
    ...(nodeId === undefined ? {} : { nodeId }),
    ...(namespace === undefined ? {} : { namespace }),
  };
}

/**
 * The cluster settings of a loaded config (`name` and `[channel_config]`), for
 * `builder.queue(...)` / `.coordination(...)` / `.cluster(...)`.
 */
export function clusterSettingsFromConfig(config: MocraConfig): ClusterSettings {
  const c = config.channel_config;
  const queueOptions: NonNullable<DistributedOptions['queueOptions']> = {
    codec: {
      format: c.queue_codec,
      compressThresholdBytes: c.compression_threshold,
    },
    ...(c.max_payload_bytes === undefined ? {} : { maxPayloadBytes: c.max_payload_bytes }),
    topicDefaults: {
      ...(c.lease_ms === undefined ? {} : { leaseMs: c.lease_ms }),
      ...(c.max_deliveries === undefined ? {} : { maxDeliveries: c.max_deliveries }),
    },
  };
  return {
    ...(c.queue === undefined ? {} : { queue: c.queue }),
    ...(c.coordination === undefined ? {} : { coordination: c.coordination }),
    namespace: config.name,
    cluster: {
      queueOptions,
      ...(c.run_id === undefined ? {} : { runId: c.run_id }),
      ...(c.service === undefined ? {} : { service: c.service }),
    },
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

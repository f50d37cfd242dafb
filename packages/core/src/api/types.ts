/**
 * The seam between the HTTP API and whatever it observes and steers. The server knows nothing
 * about engines, queues or coordination; it asks a {@link ControlPlane}. The engine implements
 * it (`engine/control-plane.ts`); tests can implement it over a real queue backend alone.
 *
 * Every method may be slow (a Redis round trip) or fail (a backend down): the server bounds each
 * call with a timeout and turns failures into typed JSON errors, so an implementation just
 * throws a {@link MocraError} with the right code (e.g. UnknownModuleError, EngineStateError).
 */
import type { z } from 'zod';
import type {
  clusterViewSchema,
  dlqEntrySchema,
  dlqPageSchema,
  dlqResultSchema,
  engineViewSchema,
  healthViewSchema,
  historySampleSchema,
  historyViewSchema,
  hostsViewSchema,
  hostViewSchema,
  logRecordSchema,
  logsViewSchema,
  memberViewSchema,
  nodesViewSchema,
  nodeViewSchema,
  pauseViewSchema,
  queuesViewSchema,
  queueViewSchema,
  StartWorkInput,
  stageViewSchema,
  startWorkResultSchema,
  stopViewSchema,
  systemViewSchema,
} from './schemas.js';

export type { StartWorkInput };

export type EngineView = z.output<typeof engineViewSchema>;
export type StageView = z.output<typeof stageViewSchema>;
export type QueuesView = z.output<typeof queuesViewSchema>;
export type QueueView = z.output<typeof queueViewSchema>;
export type HostsView = z.output<typeof hostsViewSchema>;
export type HostView = z.output<typeof hostViewSchema>;
export type ClusterView = z.output<typeof clusterViewSchema>;
export type MemberView = z.output<typeof memberViewSchema>;
export type HealthView = z.output<typeof healthViewSchema>;
export type SystemView = z.output<typeof systemViewSchema>;
export type HistoryView = z.output<typeof historyViewSchema>;
export type HistorySample = z.output<typeof historySampleSchema>;
export type LogsView = z.output<typeof logsViewSchema>;
export type LogRecordView = z.output<typeof logRecordSchema>;
export type NodesView = z.output<typeof nodesViewSchema>;
export type NodeView = z.output<typeof nodeViewSchema>;
export type PauseView = z.output<typeof pauseViewSchema>;
export type StopView = z.output<typeof stopViewSchema>;
export type StartWorkResult = z.output<typeof startWorkResultSchema>;
export type DlqEntryView = z.output<typeof dlqEntrySchema>;
export type DlqPage = z.output<typeof dlqPageSchema>;
export type DlqResult = z.output<typeof dlqResultSchema>;

export interface DlqListQuery {
  /** Only this topic; every topic when absent. */
  topic?: string;
  limit: number;
  offset: number;
  reasonIncludes?: string;
}

/** Which dead letters a replay or purge applies to. `all: true` is needed to select everything. */
export interface DlqSelection {
  topic?: string;
  ids?: string[];
  reasonIncludes?: string;
  since?: number;
  all?: boolean;
}

export interface ControlPlane {
  /** State, mode, per-stage counts, throughput, latency percentiles. */
  engine(): Promise<EngineView>;
  /** Every stage topic with its ready / delayed / leased / dead-lettered counts. */
  queues(): Promise<QueuesView>;
  /** Per-host politeness state (not bounded like the metric labels; the implementation caps the list). */
  hosts(): Promise<HostsView>;
  /** The cluster as this node sees it; null in single-node mode. */
  cluster(): Promise<ClusterView | null>;
  /** Component health for `/health`. */
  health(): Promise<HealthView>;
  /** Throughput of the last minutes, kept on the server so a reloaded dashboard has its chart. */
  history(): Promise<HistoryView>;
  /** Members known to the coordination backend (just this node when single-node). */
  nodes(): Promise<NodesView>;
  /** Stop taking new work (cluster-wide when a coordination backend is shared). */
  pause(): Promise<PauseView>;
  resume(): Promise<PauseView>;
  /** Stop this node gracefully (answers at once; the run ends once work in flight drained). */
  stop(): Promise<StopView>;
  /** Put one task on the `task` topic. Throws UnknownModuleError for a module that is not registered. */
  startWork(task: StartWorkInput): Promise<StartWorkResult>;
  /** Topics whose dead-letter queues can be listed (unknown topic names are a 400). */
  dlqTopics(): readonly string[];
  listDeadLetters(query: DlqListQuery): Promise<DlqPage>;
  replayDeadLetters(selection: DlqSelection): Promise<DlqResult>;
  purgeDeadLetters(selection: DlqSelection): Promise<DlqResult>;
}

/**
 * Facts about the cluster that only the coordination backend knows (who leads, each member's
 * role, term and commit index, the partition map), for `/observability/cluster` and the
 * dashboard's cluster panel. The Raft backend has one (from `ClusterNode.status()`); without
 * one the view lists the members alone.
 */
export interface ClusterInfoSource {
  describe(members: readonly { readonly id: string }[]): ClusterInfo | Promise<ClusterInfo>;
}

export interface ClusterInfo {
  /** The member that leads the cluster, if known. */
  leader: string | null;
  /** Role per member id (`leader`, `voter`, `learner`…); shown in the members table. */
  roles: Record<string, string>;
  /** Shown as a key/value table under the members. */
  details: Record<string, string | number | boolean | null>;
}

/** What `/metrics` renders: a prom-client registry or mocra's own `MocraMetrics` both fit. */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

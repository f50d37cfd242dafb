/**
 * The {@link ControlPlane} of a running {@link Engine}: what the control API serves, read from
 * the engine (`stats()`), its queue topics (stats and dead-letter queues), the telemetry
 * gathered from its diagnostics channels, and — when one is given — a coordination backend.
 *
 * Pause and resume are cluster-wide when the coordination backend is shared (Redis, Raft): the
 * pause is a key (`<namespace>:engine:pause`) that every node's control plane watches and
 * applies to its own engine, so pausing through any node's API pauses them all, and a node
 * that starts while the key is set starts paused. Without a shared backend they act on this
 * engine only.
 *
 * Dead letters are the stage topics' real DLQs, listed per topic. Replay and purge go through
 * `engine.deadLetters`: replaying a failure the policy gave up on (the error topic's DLQ)
 * republishes the *work it failed on* to its own topic with fresh attempts, not the failure
 * event, which the policy would only give up on again.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import os from 'node:os';
import type { RaftCoordination } from '../coordination/raft-coordination.js';
import type { Coordination } from '../coordination/types.js';
import { MOCRA_VERSION } from '../downloader/version.js';
import type { DeadLetterQuery } from '../engine/dead-letters.js';
import type { Engine } from '../engine/engine.js';
import { EngineStateError } from '../errors.js';
import { STAGE_TOPICS, type StageName, TOPICS, type TopicName } from '../model/events.js';
import { CHANNEL_NAMES } from '../observability/channels.js';
import type { EngineTelemetry } from '../observability/metrics/engine-telemetry.js';
import type { DeadLetter, DeadLetterFilter } from '../queue/types.js';
import { safeJson, summarizeDeadLetter } from './dlq-view.js';
import { ThroughputHistory } from './throughput-history.js';
import type {
  ClusterInfoSource,
  ClusterView,
  ControlPlane,
  DlqEntryView,
  DlqListQuery,
  DlqPage,
  DlqResult,
  DlqSelection,
  EngineView,
  HealthView,
  HistoryView,
  HostsView,
  NodesView,
  PauseView,
  QueuesView,
  StartWorkInput,
  StartWorkResult,
  StopView,
} from './types.js';

export interface EngineControlPlaneOptions {
  engine: Engine;
  /** Where throughput, latency and the host table come from. */
  telemetry: EngineTelemetry;
  /** Name of this node in views and `/nodes`. @default the coordination node id, else os.hostname() */
  node?: string;
  /** A shared backend makes pause/resume cluster-wide and fills `/nodes` and the cluster view. */
  coordination?: Coordination;
  /** Leader, roles, term, commit index, partition map for the cluster view. @default members only */
  clusterInfo?: ClusterInfoSource;
  /** How often a node checks the cluster-wide pause key. @default 1000 */
  pausePollMs?: number;
  /** A partitioned cluster's map for `/nodes`: each member's keys (`host:…`, `account:…`). @default none */
  partitions?: () => ReadonlyMap<string, readonly string[]>;
  /** Rows of `/observability/hosts`. @default 200 */
  hostsLimit?: number;
  /** How often the throughput history of `/observability/history` is sampled. @default 2000 */
  historyIntervalMs?: number;
}

const TOPIC_NAMES = Object.values(TOPICS) as TopicName[];
const STAGE_OF_TOPIC = Object.fromEntries(
  (Object.entries(STAGE_TOPICS) as [StageName, TopicName][]).map(([stage, topic]) => [topic, stage]),
) as Record<TopicName, StageName>;
/** Entries one topic-scoped replay or purge acts on (call again for more). */
const MAX_SELECTED = 10_000;

export function createEngineControlPlane(options: EngineControlPlaneOptions): EngineControlPlane {
  return new EngineControlPlane(options);
}

export class EngineControlPlane implements ControlPlane {
  readonly node: string;
  readonly #engine: Engine;
  readonly #telemetry: EngineTelemetry;
  readonly #coordination: Coordination | undefined;
  readonly #clusterInfo: ClusterInfoSource | undefined;
  readonly #partitions: (() => ReadonlyMap<string, readonly string[]>) | undefined;
  readonly #clustered: boolean;
  readonly #pauseKey: string;
  readonly #hostsLimit: number;
  readonly #history: ThroughputHistory;
  /** The last queue view read: what `/observability/queues` shows once the engine closed its queues. */
  #lastQueues: QueuesView | undefined;
  readonly #onStage: (message: unknown) => void;
  #pollTimer: NodeJS.Timeout | undefined;
  /** This node paused because of the cluster key (so the key going away resumes it). */
  #pausedByCluster = false;
  #coordinationUp = true;

  constructor(options: EngineControlPlaneOptions) {
    this.#engine = options.engine;
    this.#telemetry = options.telemetry;
    this.#coordination = options.coordination;
    this.#clusterInfo = options.clusterInfo;
    this.#partitions = options.partitions;
    this.#clustered = options.coordination !== undefined && options.coordination.kind !== 'local';
    this.node = options.node ?? options.coordination?.nodeId ?? os.hostname();
    this.#pauseKey = `${options.engine.queue.namespace}:engine:pause`;
    this.#hostsLimit = options.hostsLimit ?? 200;
    const engine = options.engine;
    this.#history = new ThroughputHistory({
      read: () => engine.stats(),
      ...(options.historyIntervalMs === undefined ? {} : { intervalMs: options.historyIntervalMs }),
    }).start();
    // Its stages stopped, its queues are about to close: keep their final counts for a
    // dashboard that stays up after the run (a lingering one).
    let finalRead = false;
    this.#onStage = (message) => {
      if (finalRead || (message as { phase?: unknown }).phase !== 'stop' || engine.state !== 'stopping')
        return;
      finalRead = true;
      void this.queues().catch(() => {});
    };
    diagnostics_channel.subscribe(CHANNEL_NAMES.stage, this.#onStage);
    if (this.#clustered) {
      const every = options.pausePollMs ?? 1000;
      this.#pollTimer = setInterval(() => void this.syncPause(), every);
      this.#pollTimer.unref();
      void this.syncPause();
    }
  }

  /** Whether pause/resume act on every node (a shared coordination backend) or this one. */
  get pauseScope(): 'local' | 'cluster' {
    return this.#clustered ? 'cluster' : 'local';
  }

  /**
   * Apply the cluster-wide pause key to this engine now (the poll does this every
   * `pausePollMs`). Resumes only a pause that came from the key, never a local `engine.pause()`.
   */
  async syncPause(): Promise<void> {
    const coordination = this.#coordination;
    if (!this.#clustered || coordination === undefined) return;
    let value: string | undefined;
    try {
      value = await coordination.get(this.#pauseKey);
      this.#coordinationUp = true;
    } catch {
      this.#coordinationUp = false;
      return;
    }
    const engine = this.#engine;
    if (engine.state === 'stopping' || engine.state === 'stopped') return;
    if (value !== undefined && !engine.paused) {
      engine.pause();
      this.#pausedByCluster = true;
    } else if (value === undefined && engine.paused && this.#pausedByCluster) {
      this.#pausedByCluster = false;
      engine.resume();
    }
  }

  close(): void {
    this.#history.close();
    diagnostics_channel.unsubscribe(CHANNEL_NAMES.stage, this.#onStage);
    if (this.#pollTimer !== undefined) clearInterval(this.#pollTimer);
    this.#pollTimer = undefined;
  }

  async engine(): Promise<EngineView> {
    const engine = this.#engine;
    const stats = await engine.stats();
    let pending = 0;
    let inflight = 0;
    for (const stage of Object.values(stats.stages)) {
      pending += stage.queued + stage.delayed;
      inflight += stage.inFlight;
    }
    return {
      node: this.node,
      namespace: engine.queue.namespace,
      version: MOCRA_VERSION,
      runId: stats.runId,
      state: stats.state,
      paused: stats.paused,
      pauseScope: this.pauseScope,
      mode: {
        singleNode: !this.#clustered,
        clustered: this.#clustered,
        queue: engine.queue.kind,
        coordination: this.#coordination?.kind ?? 'none',
      },
      startedAt: stats.startedAt ?? null,
      uptimeMs: stats.uptimeMs,
      pending,
      inflight,
      stages: stats.stages,
      throughput: this.#telemetry.throughput(),
      latency: this.#telemetry.latency(),
      dag: this.#telemetry.dag(),
      totals: {
        pages: stats.pages,
        items: stats.items,
        bytes: stats.bytes,
        errors: stats.errors,
        retries: stats.retries,
        deadLettered: stats.deadLettered,
        dropped: stats.dropped,
      },
      errorsByCode: stats.errorsByCode,
      sampledAt: Date.now(),
    };
  }

  async history(): Promise<HistoryView> {
    return { intervalMs: this.#history.intervalMs, samples: this.#history.samples(), sampledAt: Date.now() };
  }

  async queues(): Promise<QueuesView> {
    try {
      this.#lastQueues = await this.#readQueues();
      return this.#lastQueues;
    } catch (err) {
      if (this.#engine.state === 'stopped' && this.#lastQueues !== undefined) return this.#lastQueues;
      throw err;
    }
  }

  async #readQueues(): Promise<QueuesView> {
    const queue = this.#engine.queue;
    const queues = await Promise.all(
      TOPIC_NAMES.map(async (topic) => {
        const q = queue.topic(topic);
        const [s, dlq] = await Promise.all([q.stats(), q.deadLetters.size()]);
        const capacity = q.options.capacity;
        return {
          topic,
          stage: STAGE_OF_TOPIC[topic],
          ready: s.ready,
          delayed: s.delayed,
          inflight: s.inflight,
          deadLettered: dlq,
          capacity: capacity >= Number.MAX_SAFE_INTEGER ? null : capacity,
        };
      }),
    );
    return { backend: queue.kind, namespace: queue.namespace, queues, sampledAt: Date.now() };
  }

  async hosts(): Promise<HostsView> {
    const { hosts, total } = this.#telemetry.hosts(this.#hostsLimit);
    return {
      hosts: hosts.map((h) => ({
        host: h.host,
        inFlight: h.inFlight,
        requests: h.requests,
        errors: h.errors,
        lastStatus: h.lastStatus,
        avgLatencyMs: h.avgLatencyMs,
        delayMs: null,
        backoffUntil: null,
        concurrency: null,
        breaker: h.breaker,
      })),
      total,
      sampledAt: Date.now(),
    };
  }

  async cluster(): Promise<ClusterView | null> {
    const coordination = this.#coordination;
    if (!this.#clustered || coordination === undefined) return null;
    const members = await coordination.members();
    const paused = await coordination.get(this.#pauseKey);
    const info = await this.#clusterInfo?.describe(members);
    const leader = info?.leader ?? null;
    return {
      kind: coordination.kind,
      nodeId: coordination.nodeId,
      leader,
      isLeader: leader !== null && leader === coordination.nodeId,
      members: members.map((m) => {
        const role = info?.roles[m.id];
        return {
          id: m.id,
          addr: m.addr ?? null,
          lastSeen: m.lastSeen,
          leader: leader !== null && m.id === leader,
          self: m.id === coordination.nodeId,
          meta: { ...m.meta, ...(role === undefined ? {} : { role }) },
        };
      }),
      details: {
        members: members.length,
        'pause key': this.#pauseKey,
        'cluster paused': paused !== undefined,
        ...info?.details,
      },
      sampledAt: Date.now(),
    };
  }

  async health(): Promise<HealthView> {
    const components: HealthView['components'] = {};
    try {
      await this.#engine.queue.topic(TOPICS.task).stats();
      components.queue = { status: 'up' };
    } catch (err) {
      components.queue = { status: 'down', error: err instanceof Error ? err.message : String(err) };
    }
    if (this.#clustered && this.#coordination !== undefined) {
      try {
        await this.#coordination.get(this.#pauseKey);
        this.#coordinationUp = true;
      } catch {
        this.#coordinationUp = false;
      }
      components.coordination = this.#coordinationUp
        ? { status: 'up' }
        : { status: 'down', error: 'the coordination backend did not answer' };
    }
    const state = this.#engine.state;
    components.engine =
      state === 'running' || state === 'created'
        ? { status: 'up' }
        : { status: 'down', error: `engine ${state}` };
    const status =
      components.queue.status === 'down'
        ? 'down'
        : Object.values(components).some((c) => c.status === 'down')
          ? 'degraded'
          : 'up';
    return { status, components, checkedAt: Date.now() };
  }

  async nodes(): Promise<NodesView> {
    const coordination = this.#coordination;
    if (coordination === undefined) {
      return {
        nodes: [
          {
            id: this.node,
            addr: null,
            hostname: os.hostname(),
            version: MOCRA_VERSION,
            lastHeartbeat: Date.now(),
            self: true,
            live: true,
            meta: {},
          },
        ],
      };
    }
    const members = await coordination.members();
    const owned = this.#partitions?.();
    const partitionsOf = (id: string) =>
      owned === undefined ? {} : { partitions: [...(owned.get(id) ?? [])] };
    const nodes: NodesView['nodes'] = members.map((m) => ({
      id: m.id,
      addr: m.addr ?? null,
      hostname: m.meta.hostname ?? null,
      version: m.meta.version ?? null,
      lastHeartbeat: m.lastSeen,
      self: m.id === coordination.nodeId,
      live: true,
      meta: { ...m.meta },
      ...partitionsOf(m.id),
    }));
    // On Raft, nodes of the cluster whose membership lapsed (dead, or not running a crawl) are
    // listed too, as not live: a dead node's partitions have moved to the live ones.
    if (coordination.kind === 'raft' && 'status' in coordination) {
      const live = new Set(members.map((m) => m.id));
      for (const n of (coordination as RaftCoordination).status().members) {
        if (live.has(n.id)) continue;
        nodes.push({
          id: n.id,
          addr: null,
          hostname: null,
          version: null,
          lastHeartbeat: null,
          self: n.id === coordination.nodeId,
          live: false,
          meta: {},
          ...partitionsOf(n.id),
        });
      }
    }
    return { nodes };
  }

  async pause(): Promise<PauseView> {
    this.#checkRunning('pause');
    if (this.#clustered && this.#coordination !== undefined) {
      await this.#coordination.set(this.#pauseKey, JSON.stringify({ by: this.node, at: Date.now() }));
      await this.syncPause();
      return { paused: true, scope: 'cluster' };
    }
    this.#engine.pause();
    return { paused: true, scope: 'local' };
  }

  async resume(): Promise<PauseView> {
    this.#checkRunning('resume');
    if (this.#clustered && this.#coordination !== undefined) {
      await this.#coordination.delete(this.#pauseKey);
      // An API resume also lifts a local pause on this node.
      this.#pausedByCluster = false;
      this.#engine.resume();
      return { paused: false, scope: 'cluster' };
    }
    this.#engine.resume();
    return { paused: false, scope: 'local' };
  }

  async stop(): Promise<StopView> {
    this.#checkRunning('stop');
    // Not awaited: the run ends after this answer went out (the API closes with the run).
    void this.#engine.stop('stopped');
    return { stopping: true, node: this.node };
  }

  async startWork(task: StartWorkInput): Promise<StartWorkResult> {
    const runId = task.runId ?? this.#engine.runId;
    this.#telemetry.adoptRun(runId);
    await this.#engine.submit({ ...task, runId });
    return {
      accepted: true,
      ...(task.module === undefined ? {} : { module: task.module }),
      ...(task.modules === undefined ? {} : { modules: task.modules }),
      runId,
    };
  }

  dlqTopics(): readonly string[] {
    return TOPIC_NAMES;
  }

  async listDeadLetters(query: DlqListQuery): Promise<DlqPage> {
    const topics = this.#topics(query.topic);
    const counts: Record<string, number> = {};
    const filter: DeadLetterFilter | undefined =
      query.reasonIncludes === undefined ? undefined : { reasonIncludes: query.reasonIncludes };
    // Each topic is oldest first; reading offset+limit from each is enough to merge a page.
    const want = query.offset + query.limit;
    let total = 0;
    const merged: DeadLetter<unknown>[] = [];
    await Promise.all(
      topics.map(async (topic) => {
        const dlq = this.#engine.queue.topic(topic).deadLetters;
        const size = await dlq.size();
        counts[topic] = size;
        const entries = await dlq.list(filter === undefined ? { limit: want } : { limit: want, filter });
        merged.push(...entries);
        total += filter === undefined ? size : (await dlq.list({ filter })).length;
      }),
    );
    merged.sort((a, b) => a.deadLetteredAt - b.deadLetteredAt || a.id.localeCompare(b.id));
    const entries = merged.slice(query.offset, want).map(toEntryView);
    return { entries, total, counts, limit: query.limit, offset: query.offset };
  }

  async replayDeadLetters(selection: DlqSelection): Promise<DlqResult> {
    this.#checkRunning('replay dead letters');
    const query = await this.#queryOf(selection);
    return { count: query === undefined ? 0 : await this.#engine.deadLetters.replay(query) };
  }

  async purgeDeadLetters(selection: DlqSelection): Promise<DlqResult> {
    const query = await this.#queryOf(selection);
    return { count: query === undefined ? 0 : await this.#engine.deadLetters.purge(query) };
  }

  /**
   * The engine's dead-letter query for an API selection (undefined: nothing matches). Replay
   * and purge go through `engine.deadLetters`, so the API does exactly what code does. A topic
   * selects that topic's own DLQ, resolved to entry ids (at most {@link MAX_SELECTED}).
   */
  async #queryOf(selection: DlqSelection): Promise<DeadLetterQuery | undefined> {
    const base: DeadLetterQuery = {
      ...(selection.reasonIncludes === undefined ? {} : { reasonIncludes: selection.reasonIncludes }),
      ...(selection.since === undefined ? {} : { since: selection.since }),
    };
    const topic = selection.topic;
    if (topic === undefined) return selection.ids === undefined ? base : { ...base, ids: selection.ids };
    const prefix = `${topic}:`;
    const filter: DeadLetterFilter = {
      ...(selection.reasonIncludes === undefined ? {} : { reasonIncludes: selection.reasonIncludes }),
      ...(selection.since === undefined ? {} : { since: selection.since }),
      ...(selection.ids === undefined
        ? {}
        : { ids: selection.ids.filter((id) => id.startsWith(prefix)).map((id) => id.slice(prefix.length)) }),
    };
    if (filter.ids !== undefined && filter.ids.length === 0) return undefined;
    const letters = await this.#engine.queue.topic(topic).deadLetters.list({ filter, limit: MAX_SELECTED });
    if (letters.length === 0) return undefined;
    return { ids: letters.map((letter) => `${prefix}${letter.id}`) };
  }

  #topics(topic: string | undefined): TopicName[] {
    return topic === undefined ? TOPIC_NAMES : [topic as TopicName];
  }

  #checkRunning(what: string): void {
    const state = this.#engine.state;
    if (state === 'stopping' || state === 'stopped') {
      throw new EngineStateError(`cannot ${what}: the engine is ${state}`);
    }
  }
}

function toEntryView(letter: DeadLetter<unknown>): DlqEntryView {
  const payload = letter.payload === undefined ? { undecodable: letter.raw ?? null } : letter.payload;
  return {
    // The engine's entry id (`<topic>:<id>`): unique across topics, accepted by replay and purge.
    id: `${letter.topic}:${letter.id}`,
    topic: letter.topic,
    messageId: letter.messageId,
    reason: letter.reason,
    attempts: letter.attempts,
    publishedAt: letter.publishedAt,
    deadLetteredAt: letter.deadLetteredAt,
    key: letter.key ?? null,
    summary: summarizeDeadLetter(letter.topic, letter.payload),
    payload: safeJson(payload),
  };
}

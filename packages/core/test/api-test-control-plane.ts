/**
 * A ControlPlane for the API tests, built on a real in-memory queue backend (real topics, real
 * dead-letter queues) instead of an engine: the API is tested against the contract, the engine's
 * own ControlPlane is tested end to end in packages/tests. Counters are plain fields the test
 * moves; the queues and DLQs are the real thing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  ClusterView,
  ControlPlane,
  DlqListQuery,
  DlqPage,
  DlqResult,
  DlqSelection,
  EngineView,
  HealthView,
  HistorySample,
  HistoryView,
  HostsView,
  NodesView,
  PauseView,
  QueuesView,
  StartWorkInput,
  StartWorkResult,
  StopView,
} from '../src/api/index.js';
import {
  createMemoryQueueBackend,
  type DeadLetter,
  type DeadLetterFilter,
  type DeadLetterQueue,
  type QueueBackend,
  UnknownModuleError,
} from '../src/index.js';
import { emptyDagTotals } from '../src/observability/metrics/dag-telemetry.js';

export const TEST_TOPICS = ['task', 'request', 'response', 'parser_task', 'error'] as const;

export class TestControlPlane implements ControlPlane {
  readonly backend: QueueBackend;
  readonly modules = new Set<string>(['catalog']);
  paused = false;
  stopped = false;
  pages = 0;
  items = 0;
  /** Milliseconds every engine() call takes (to test the call timeout). */
  engineDelayMs = 0;
  /** Thrown by hosts() when set (to test failure mapping). */
  hostsError: unknown;
  cluster_: ClusterView | null = null;
  health_: HealthView['status'] = 'up';
  readonly started: StartWorkInput[] = [];

  constructor() {
    this.backend = createMemoryQueueBackend({
      namespace: `api-test-${process.pid}-${Math.random().toString(36).slice(2)}`,
    });
    for (const topic of TEST_TOPICS) this.backend.topic(topic, { maxDeliveries: 1 });
  }

  /** Publish `count` messages to `topic` and dead-letter them through real deliveries. */
  async deadLetter(topic: string, count: number, reason = 'test failure'): Promise<void> {
    const queue = this.backend.topic<{ url: string; n: number }>(topic);
    await queue.publish(
      Array.from({ length: count }, (_, n) => ({
        payload: { url: `https://example.test/${topic}/${n}`, n },
      })),
    );
    let left = count;
    while (left > 0) {
      const deliveries = await queue.consume({ max: left, waitMs: 100 });
      for (const d of deliveries) await d.deadLetter(reason);
      left -= deliveries.length;
    }
  }

  async engine(): Promise<EngineView> {
    if (this.engineDelayMs > 0) await sleep(this.engineDelayMs);
    const stats = await Promise.all(TEST_TOPICS.map((t) => this.backend.topic(t).stats()));
    const pending = stats.reduce((n, s) => n + s.ready + s.delayed, 0);
    const stage = (i: number) => ({
      queued: stats[i]?.ready ?? 0,
      delayed: stats[i]?.delayed ?? 0,
      inFlight: 0,
      done: 0,
      failed: 0,
      concurrency: 4,
      paused: this.paused,
    });
    return {
      node: 'test-node',
      namespace: this.backend.namespace,
      version: '0.0.0',
      runId: 'run-1',
      state: 'running',
      paused: this.paused,
      pauseScope: 'local',
      mode: { singleNode: true, clustered: false, queue: 'memory', coordination: 'local' },
      startedAt: Date.now() - 1000,
      uptimeMs: 1000,
      pending,
      inflight: 0,
      stages: { task: stage(0), download: stage(1), parse: stage(2), followUp: stage(3), error: stage(4) },
      dag: emptyDagTotals(),
      throughput: {
        download: { success: this.pages, failure: 0, total: this.pages, successRate: this.pages ? 1 : null },
      },
      latency: { download: { count: 0, p50Ms: null, p95Ms: null, p99Ms: null } },
      totals: {
        pages: this.pages,
        items: this.items,
        bytes: 0,
        errors: 0,
        retries: 0,
        deadLettered: 0,
        dropped: 0,
      },
      errorsByCode: {},
      sampledAt: Date.now(),
    };
  }

  async queues(): Promise<QueuesView> {
    const queues = await Promise.all(
      TEST_TOPICS.map(async (topic) => {
        const s = await this.backend.topic(topic).stats();
        return { topic, stage: topic, ...s, capacity: null };
      }),
    );
    return { backend: 'memory', namespace: this.backend.namespace, queues, sampledAt: Date.now() };
  }

  async hosts(): Promise<HostsView> {
    if (this.hostsError !== undefined) throw this.hostsError;
    return { hosts: [], total: 0, sampledAt: Date.now() };
  }

  async cluster(): Promise<ClusterView | null> {
    return this.cluster_;
  }

  async health(): Promise<HealthView> {
    return {
      status: this.health_,
      components: { queue: { status: this.health_ === 'down' ? 'down' : 'up' } },
      checkedAt: Date.now(),
    };
  }

  /** What `/observability/history` answers (the test sets it). */
  history_: HistorySample[] = [];

  async history(): Promise<HistoryView> {
    return { intervalMs: 2000, samples: this.history_, sampledAt: Date.now() };
  }

  async nodes(): Promise<NodesView> {
    return {
      nodes: [
        {
          id: 'test-node',
          addr: null,
          hostname: 'localhost',
          version: '0.0.0',
          lastHeartbeat: Date.now(),
          self: true,
          live: true,
          meta: {},
        },
      ],
    };
  }

  async pause(): Promise<PauseView> {
    this.paused = true;
    return { paused: true, scope: 'local' };
  }

  async resume(): Promise<PauseView> {
    this.paused = false;
    return { paused: false, scope: 'local' };
  }

  async stop(): Promise<StopView> {
    this.stopped = true;
    return { stopping: true, node: 'test' };
  }

  async startWork(task: StartWorkInput): Promise<StartWorkResult> {
    for (const name of task.modules ?? (task.module === undefined ? [] : [task.module])) {
      if (!this.modules.has(name)) throw new UnknownModuleError(name);
    }
    const runId = task.runId ?? 'run-1';
    await this.backend.topic('task').publish([{ payload: { ...task, runId } }]);
    this.started.push(task);
    return {
      accepted: true,
      ...(task.module === undefined ? {} : { module: task.module }),
      ...(task.modules === undefined ? {} : { modules: task.modules }),
      runId,
    };
  }

  dlqTopics(): readonly string[] {
    return TEST_TOPICS;
  }

  async listDeadLetters(query: DlqListQuery): Promise<DlqPage> {
    const topics = query.topic === undefined ? TEST_TOPICS : [query.topic];
    const counts: Record<string, number> = {};
    const all: DeadLetter<unknown>[] = [];
    for (const topic of topics) {
      const dlq = this.backend.topic(topic).deadLetters;
      counts[topic] = await dlq.size();
      const filter =
        query.reasonIncludes === undefined ? undefined : { reasonIncludes: query.reasonIncludes };
      all.push(...(await dlq.list(filter === undefined ? {} : { filter })));
    }
    const entries = all.slice(query.offset, query.offset + query.limit).map((l) => ({
      id: l.id,
      topic: l.topic,
      messageId: l.messageId,
      reason: l.reason,
      attempts: l.attempts,
      publishedAt: l.publishedAt,
      deadLetteredAt: l.deadLetteredAt,
      key: l.key ?? null,
      summary: `${l.topic} ${(l.payload as { url?: string } | undefined)?.url ?? l.messageId}`,
      payload: l.payload,
    }));
    return { entries, total: all.length, counts, limit: query.limit, offset: query.offset };
  }

  async replayDeadLetters(selection: DlqSelection): Promise<DlqResult> {
    return this.#apply(selection, (dlq, filter) => dlq.replay(filter));
  }

  async purgeDeadLetters(selection: DlqSelection): Promise<DlqResult> {
    return this.#apply(selection, (dlq, filter) => dlq.purge(filter));
  }

  async #apply(
    selection: DlqSelection,
    op: (dlq: DeadLetterQueue<unknown>, filter: DeadLetterFilter) => Promise<number>,
  ): Promise<DlqResult> {
    const topics = selection.topic === undefined ? TEST_TOPICS : [selection.topic];
    const filter: DeadLetterFilter = {
      ...(selection.ids === undefined ? {} : { ids: selection.ids }),
      ...(selection.reasonIncludes === undefined ? {} : { reasonIncludes: selection.reasonIncludes }),
      ...(selection.since === undefined ? {} : { since: selection.since }),
    };
    let count = 0;
    for (const topic of topics) count += await op(this.backend.topic(topic).deadLetters, filter);
    return { count };
  }

  close(): Promise<void> {
    return this.backend.close();
  }
}

/**
 * Everything the metrics and the dashboard know about a running engine, gathered without
 * touching the hot path: the engine's diagnostics channels are subscribed (push), and
 * `engine.stats()` plus the queue topics' stats are read at scrape time (pull).
 *
 * ```
 *  mocra:engine:handler ──┐                                   ┌─▶ MocraMetrics (mocra_* families)
 *  mocra:downloader:*  ───┤                                   │
 *  mocra:engine:item   ───┼─▶ EngineTelemetry (this engine's ─┼─▶ stage throughput / latency windows
 *  mocra:engine:error  ───┤    messages only, by runId or     │
 *  mocra:queue:*       ───┤    topic identity)                └─▶ host table (bounded)
 *  mocra:policy:breaker ──┤
 *  mocra:policy:decision ─┤   (threshold verdicts)
 *  mocra:engine:dag ──────┘   (DAG jobs' runs: dag-telemetry.ts)
 *  engine.stats(), topic.stats()  ── read by a collector before every /metrics exposition
 * ```
 *
 * Channels are process-wide, so every message is checked to belong to this engine: by `runId`
 * (the engine's, plus runs started through the API) or, for queue events, by topic object
 * identity. Breaker and scheduler events carry no engine identity and are counted by every
 * telemetry attached in the process.
 *
 * Subscribers must never throw (diagnostics_channel would rethrow asynchronously and crash the
 * process), so each handler is wrapped.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { Engine } from '../../engine/engine.js';
import { type ErrorEvent, STAGE_TOPICS, type StageName, TOPICS } from '../../model/events.js';
import type { ThresholdDecision } from '../../policy/error-thresholds.js';
import {
  CHANNEL_NAMES,
  type DagMessage,
  type DropMessage,
  type ErrorMessage,
  type HandlerMessage,
  type ItemMessage,
  type RequestMessage,
  type ResponseMessage,
} from '../channels.js';
import { type DagTotals, emptyDagTotals, recordDagEvent } from './dag-telemetry.js';
import { CRAWL_PIPELINE, errorKind, THRESHOLD_DECISION_LABELS } from './families.js';
import { hostLabel, statusClass } from './label-guard.js';
import type { BreakerStateLabel, EngineStateLabel, MocraMetrics } from './mocra-metrics.js';

/** Stage names as metric labels (snake_case, as Prometheus label values are). */
export const STAGE_LABELS: Readonly<Record<StageName, string>> = {
  task: 'task',
  download: 'download',
  parse: 'parse',
  followUp: 'follow_up',
  error: 'error',
};

/** What one handler of each stage does, as the `operation` label. */
const OPERATIONS: Readonly<Record<StageName, string>> = {
  task: 'generate',
  download: 'fetch',
  parse: 'parse',
  followUp: 'follow',
  error: 'policy',
};

const STAGES = Object.keys(STAGE_LABELS) as StageName[];

export interface StageThroughput {
  success: number;
  failure: number;
  total: number;
  successRate: number | null;
}

export interface StageLatency {
  count: number;
  p50Ms: number | null;
  p95Ms: number | null;
  p99Ms: number | null;
}

export interface HostState {
  host: string;
  inFlight: number;
  requests: number;
  errors: number;
  lastStatus: number | null;
  avgLatencyMs: number | null;
  breaker: BreakerStateLabel | null;
  lastSeen: number;
}

export interface EngineTelemetryOptions {
  /** Where the mocra_* families are set; without it only the views are kept. */
  metrics?: MocraMetrics;
  /** Latency samples kept per stage (the percentile window). @default 1024 */
  latencySamples?: number;
  /** Samples older than this are left out of the percentiles. @default 60000 */
  latencyWindowMs?: number;
  /** Hosts kept in the host table (least recently seen are forgotten). @default 1000 */
  maxHosts?: number;
  /** The `scope` label of `mocra_engine_paused`: 'cluster' when pauses come from a shared backend. @default 'local' */
  pauseScope?: 'local' | 'cluster';
}

/** A fixed ring of (time, duration) samples. */
class LatencyWindow {
  readonly #at: Float64Array;
  readonly #ms: Float64Array;
  #next = 0;
  #size = 0;

  constructor(capacity: number) {
    this.#at = new Float64Array(capacity);
    this.#ms = new Float64Array(capacity);
  }

  add(at: number, ms: number): void {
    this.#at[this.#next] = at;
    this.#ms[this.#next] = ms;
    this.#next = (this.#next + 1) % this.#at.length;
    if (this.#size < this.#at.length) this.#size++;
  }

  percentiles(since: number): StageLatency {
    const values: number[] = [];
    for (let i = 0; i < this.#size; i++) if ((this.#at[i] ?? 0) >= since) values.push(this.#ms[i] ?? 0);
    if (values.length === 0) return { count: 0, p50Ms: null, p95Ms: null, p99Ms: null };
    values.sort((a, b) => a - b);
    const at = (q: number) => round(values[Math.min(values.length - 1, Math.floor(q * values.length))] ?? 0);
    return { count: values.length, p50Ms: at(0.5), p95Ms: at(0.95), p99Ms: at(0.99) };
  }
}

export function attachEngineTelemetry(engine: Engine, options: EngineTelemetryOptions = {}): EngineTelemetry {
  return new EngineTelemetry(engine, options);
}

export class EngineTelemetry {
  readonly engine: Engine;
  readonly metrics: MocraMetrics | undefined;
  readonly #runIds = new Set<string>();
  readonly #topics: Set<object>;
  readonly #topicNames: Set<string>;
  readonly #counts = new Map<string, { success: number; failure: number }>();
  readonly #latency = new Map<StageName, LatencyWindow>();
  readonly #latencyWindowMs: number;
  readonly #hosts = new Map<string, HostState & { latencySum: number; latencyCount: number }>();
  readonly #maxHosts: number;
  readonly #pauseScope: 'local' | 'cluster';
  readonly #dag = emptyDagTotals();
  readonly #unsubscribe: (() => void)[] = [];
  #closed = false;

  constructor(engine: Engine, options: EngineTelemetryOptions = {}) {
    this.engine = engine;
    this.metrics = options.metrics;
    this.#runIds.add(engine.runId);
    this.#topicNames = new Set(Object.values(TOPICS));
    this.#topics = new Set([...this.#topicNames].map((name) => engine.queue.topic(name)));
    this.#latencyWindowMs = options.latencyWindowMs ?? 60_000;
    this.#maxHosts = options.maxHosts ?? 1000;
    this.#pauseScope = options.pauseScope ?? 'local';
    const samples = options.latencySamples ?? 1024;
    for (const stage of STAGES) {
      this.#latency.set(stage, new LatencyWindow(samples));
      this.#counts.set(stage, { success: 0, failure: 0 });
    }
    this.#counts.set('store', { success: 0, failure: 0 });

    this.#on<HandlerMessage>(CHANNEL_NAMES.handler, (m) => this.#onHandler(m));
    this.#on<RequestMessage>(CHANNEL_NAMES.request, (m) => this.#onRequest(m));
    this.#on<ResponseMessage>(CHANNEL_NAMES.response, (m) => this.#onResponse(m));
    this.#on<ItemMessage>(CHANNEL_NAMES.item, (m) => this.#onItem(m));
    this.#on<ErrorMessage>(CHANNEL_NAMES.error, (m) => this.#onError(m));
    this.#on<DagMessage>(CHANNEL_NAMES.dag, (m) => {
      if (this.#mine(m.runId)) recordDagEvent(m.event, this.#dag, this.metrics);
    });
    this.#on<DropMessage>(CHANNEL_NAMES.drop, (m) => {
      if (this.#mine(m.request.runId)) this.metrics?.inc('frontierRejections', { reason: 'gate_drop' });
    });
    this.#on<{ topic?: unknown; queue?: unknown }>('mocra:queue:backpressure', (m) => {
      if (
        typeof m.queue === 'object' &&
        m.queue !== null &&
        this.#topics.has(m.queue) &&
        typeof m.topic === 'string'
      ) {
        this.metrics?.countBackpressure(m.topic);
      }
    });
    this.#on<{ backend?: unknown; topic?: unknown }>('mocra:queue:poison', (m) => {
      if (m.backend === engine.queue.kind && typeof m.topic === 'string' && this.#topicNames.has(m.topic)) {
        this.metrics?.inc('queueDecodeErrors', { queue: m.topic });
      }
    });
    // Threshold verdicts carry no engine identity (like breaker events): every telemetry in the
    // process counts them. Resolver decisions are counted from `mocra:engine:error` instead,
    // where the stage and the run are known.
    this.#on<{ source?: unknown; verdict?: { decision?: unknown } }>('mocra:policy:decision', (m) => {
      if (m.source !== 'thresholds' || typeof m.verdict?.decision !== 'string') return;
      const decision = THRESHOLD_DECISION_LABELS[m.verdict.decision as ThresholdDecision];
      if (decision !== undefined) this.metrics?.inc('thresholdDecisions', { decision });
    });
    this.#on<{ scope?: unknown; key?: unknown; to?: unknown }>('mocra:policy:breaker', (m) => {
      if (m.scope !== 'host' || typeof m.key !== 'string') return;
      const state = m.to === 'open' || m.to === 'half-open' || m.to === 'closed' ? m.to : undefined;
      if (state === undefined) return;
      const host = this.#host(m.key);
      host.breaker = state;
      this.metrics?.setBreakerState(m.key, state);
    });
    this.#on<{ jobId?: unknown; scheduledAt?: unknown; firedAt?: unknown }>('mocra:schedule:fire', (m) => {
      if (typeof m.jobId !== 'string') return;
      this.metrics?.inc('scheduledTasks', { module: m.jobId });
      if (typeof m.scheduledAt === 'number' && typeof m.firedAt === 'number') {
        this.metrics?.observe('schedulerFireDelay', {}, Math.max(0, m.firedAt - m.scheduledAt) / 1000);
      }
    });
    this.#on<{ jobId?: unknown; reason?: unknown; count?: unknown }>('mocra:schedule:skip', (m) => {
      if (typeof m.jobId !== 'string' || typeof m.reason !== 'string') return;
      this.metrics?.inc(
        'schedulerDrops',
        { module: m.jobId, reason: m.reason },
        typeof m.count === 'number' ? m.count : 1,
      );
    });

    if (this.metrics !== undefined) {
      const metrics = this.metrics;
      this.#unsubscribe.push(metrics.addCollector(() => this.#collect(metrics)));
    }
  }

  /** Count work of this run id as this engine's (runs started through the API with their own id). */
  adoptRun(runId: string): void {
    this.#runIds.add(runId);
  }

  /** Per stage (and `store` for sink writes): finished handlers by outcome. */
  throughput(): Record<string, StageThroughput> {
    const out: Record<string, StageThroughput> = {};
    for (const [stage, c] of this.#counts) {
      const total = c.success + c.failure;
      out[stage] = {
        success: c.success,
        failure: c.failure,
        total,
        successRate: total === 0 ? null : c.success / total,
      };
    }
    return out;
  }

  /** What this engine's DAG jobs did so far. */
  dag(): DagTotals {
    return structuredClone(this.#dag);
  }

  /** Per stage: handler duration percentiles over the recent window. */
  latency(now = performance.now()): Record<string, StageLatency> {
    const out: Record<string, StageLatency> = {};
    for (const [stage, window] of this.#latency) out[stage] = window.percentiles(now - this.#latencyWindowMs);
    return out;
  }

  /** The host table, busiest first, at most `limit` rows; `total` is how many hosts are known. */
  hosts(limit = 200): { hosts: HostState[]; total: number } {
    const all = [...this.#hosts.values()].sort((a, b) => b.inFlight - a.inFlight || b.requests - a.requests);
    return {
      total: all.length,
      hosts: all.slice(0, limit).map(({ latencySum, latencyCount, ...rest }) => ({
        ...rest,
        avgLatencyMs: latencyCount === 0 ? null : round(latencySum / latencyCount),
      })),
    };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const off of this.#unsubscribe.splice(0)) off();
  }

  // ── channel handlers ───────────────────────────────────────────────────────────

  #mine(runId: string | undefined): boolean {
    return runId !== undefined && this.#runIds.has(runId);
  }

  #onHandler(m: HandlerMessage): void {
    // A download handler also ends when the politeness gate defers or drops a request: the
    // download stage is counted from responses and download failures instead (#onResponse).
    if (!this.#runIds.has(m.runId) || m.stage === 'download') return;
    const counts = this.#counts.get(m.stage);
    if (counts !== undefined) {
      if (m.ok) counts.success++;
      else counts.failure++;
    }
    this.#latency.get(m.stage)?.add(performance.now(), m.durationMs);
    this.metrics?.observeOperation({
      stage: STAGE_LABELS[m.stage],
      operation: OPERATIONS[m.stage],
      result: m.ok ? 'success' : 'failure',
      seconds: m.durationMs / 1000,
    });
  }

  #onRequest(m: RequestMessage): void {
    if (!this.#mine(m.request.runId)) return;
    const host = this.#host(hostLabel(m.request.url));
    host.inFlight++;
  }

  #onResponse(m: ResponseMessage): void {
    if (!this.#mine(m.request.runId)) return;
    const name = hostLabel(m.request.url);
    const host = this.#host(name);
    host.inFlight = Math.max(0, host.inFlight - 1);
    host.requests++;
    host.lastStatus = m.response.status;
    if (m.response.durationMs > 0) {
      host.latencySum += m.response.durationMs;
      host.latencyCount++;
    }
    if (host.lastStatus >= 400) host.errors++;
    this.#countFetch(true, m.response.durationMs);
    const cls = statusClass(m.response.status);
    this.metrics?.inc('hostRequests', { host: name, result: cls });
    this.metrics?.inc('responses', { module: m.request.module ?? 'unknown', status_class: cls });
    this.metrics?.inc('responseBytes', {}, m.response.body.length);
  }

  #onItem(m: ItemMessage): void {
    if (!this.#mine(m.meta.runId)) return;
    const counts = this.#counts.get('store');
    if (counts !== undefined) counts.success++;
    this.metrics?.inc('items', { module: m.meta.module });
    this.metrics?.observeOperation({ stage: 'store', operation: 'write', result: 'success' });
  }

  #onError(m: ErrorMessage): void {
    const event = m.event;
    // Some failures carry no run (a follow-up rejected before the engine claimed it): counted.
    const runId = runIdOf(event);
    if (runId !== undefined && !this.#runIds.has(runId)) return;
    const stage = STAGE_LABELS[event.stage] ?? event.stage;
    this.metrics?.countError({ stage, code: event.code });
    const action = m.decision.action === 'dead-letter' ? 'dead_letter' : m.decision.action;
    this.metrics?.inc('policyDecisions', {
      domain: 'engine',
      event_type: stage,
      phase: 'failed',
      kind: errorKind(event.code),
      action,
    });
    if (event.code === 'MOCRA_ERR_QUEUE_ENCODE')
      this.metrics?.inc('queueEncodeErrors', { queue: event.topic });
    if (event.code === 'MOCRA_ERR_SINK_FAILED') {
      const counts = this.#counts.get('store');
      if (counts !== undefined) counts.failure++;
      this.metrics?.observeOperation({ stage: 'store', operation: 'write', result: 'failure' });
    }
    if (event.stage === 'download') this.#countFetch(false, undefined);
    if (event.stage === 'download' && event.url !== undefined) {
      // The download ended without a response message (network error, retried status, abort).
      const name = hostLabel(event.url);
      const host = this.#host(name);
      host.inFlight = Math.max(0, host.inFlight - 1);
      host.requests++;
      host.errors++;
      const status = (event.error as { status?: unknown } | undefined)?.status;
      if (typeof status === 'number') host.lastStatus = status;
      this.metrics?.inc('hostRequests', {
        host: name,
        result: typeof status === 'number' ? statusClass(status) : 'error',
      });
    }
  }

  /** One fetch finished: with a response (its download time) or with a failure. */
  #countFetch(ok: boolean, durationMs: number | undefined): void {
    const counts = this.#counts.get('download');
    if (counts !== undefined) {
      if (ok) counts.success++;
      else counts.failure++;
    }
    if (durationMs !== undefined && durationMs > 0)
      this.#latency.get('download')?.add(performance.now(), durationMs);
    this.metrics?.observeOperation({
      stage: STAGE_LABELS.download,
      operation: OPERATIONS.download,
      result: ok ? 'success' : 'failure',
      ...(durationMs === undefined || durationMs <= 0 ? {} : { seconds: durationMs / 1000 }),
    });
  }

  #host(name: string): HostState & { latencySum: number; latencyCount: number } {
    let host = this.#hosts.get(name);
    if (host === undefined) {
      if (this.#hosts.size >= this.#maxHosts) this.#forgetQuietestHost();
      host = {
        host: name,
        inFlight: 0,
        requests: 0,
        errors: 0,
        lastStatus: null,
        avgLatencyMs: null,
        breaker: null,
        lastSeen: Date.now(),
        latencySum: 0,
        latencyCount: 0,
      };
      this.#hosts.set(name, host);
    } else {
      host.lastSeen = Date.now();
    }
    return host;
  }

  #forgetQuietestHost(): void {
    let oldest: string | undefined;
    let at = Number.POSITIVE_INFINITY;
    for (const [name, host] of this.#hosts) {
      if (host.inFlight === 0 && host.lastSeen < at) {
        at = host.lastSeen;
        oldest = name;
      }
    }
    if (oldest !== undefined) this.#hosts.delete(oldest);
  }

  // ── scrape-time collection ─────────────────────────────────────────────────────

  async #collect(metrics: MocraMetrics): Promise<void> {
    const engine = this.engine;
    const stats = await engine.stats();
    const state: EngineStateLabel = stats.paused && stats.state === 'running' ? 'paused' : stats.state;
    metrics.setEngineState(state);
    metrics.setPaused(stats.paused, this.#pauseScope);
    for (const stage of STAGES) {
      metrics.set(
        'inflight',
        { pipeline: CRAWL_PIPELINE, stage: STAGE_LABELS[stage] },
        stats.stages[stage].inFlight,
      );
    }
    metrics.advance('dedup', { result: 'hit' }, stats.frontier.duplicates);
    metrics.advance('dedup', { result: 'miss' }, stats.frontier.admitted);
    metrics.advance('frontierRejections', { reason: 'over_depth' }, stats.frontier.overDepth);
    metrics.advance('frontierRejections', { reason: 'over_limit' }, stats.frontier.overLimit);
    metrics.advance('frontierRejections', { reason: 'invalid' }, stats.frontier.invalid);
    metrics.advance('deadLetters', { pipeline: CRAWL_PIPELINE, queue: TOPICS.error }, stats.deadLettered);
    let queueUp = true;
    await Promise.all(
      Object.values(STAGE_TOPICS).map(async (topic) => {
        try {
          const q = engine.queue.topic(topic);
          const [s, dlq] = await Promise.all([q.stats(), q.deadLetters.size()]);
          metrics.setQueue(topic, {
            ready: s.ready,
            delayed: s.delayed,
            inflight: s.inflight,
            deadLettered: dlq,
          });
        } catch {
          queueUp = false;
        }
      }),
    );
    metrics.set('componentHealth', { component: 'queue' }, queueUp ? 1 : 0);
    for (const host of this.#hosts.values()) metrics.set('hostInflight', { host: host.host }, host.inFlight);
  }

  #on<T>(name: string, handler: (message: T) => void): void {
    const listener = (message: unknown) => {
      if (this.#closed) return;
      try {
        handler(message as T);
      } catch {
        // A malformed message from another publisher must not crash the process.
      }
    };
    diagnostics_channel.subscribe(name, listener);
    this.#unsubscribe.push(() => diagnostics_channel.unsubscribe(name, listener));
  }
}

/** The run an error event belongs to, from the failed payload (task, follow-up, request or response). */
function runIdOf(event: ErrorEvent): string | undefined {
  const payload = event.payload as { runId?: unknown; request?: { runId?: unknown } } | null | undefined;
  if (payload === null || typeof payload !== 'object') return undefined;
  if (typeof payload.runId === 'string') return payload.runId;
  const nested = payload.request?.runId;
  return typeof nested === 'string' ? nested : undefined;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

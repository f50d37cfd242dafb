/**
 * One engine's Prometheus metrics: a prom-client {@link Registry} of its own (two engines in one
 * process never share or collide on series), built from {@link METRIC_FAMILIES}, with every
 * open-ended label value passed through a {@link LabelGuard}.
 *
 * Values arrive two ways:
 *   - pushed as events happen (`inc`, `observe`, `observeOperation`, …), from diagnostics-channel
 *     subscribers, never from inside a hot path;
 *   - pulled at scrape time by collectors (`addCollector`), which read snapshots (queue stats,
 *     engine stats) and `set` gauges or `advance` counters to a running total.
 *
 * ```ts
 * const metrics = createMetrics({ node: 'worker-1' });
 * metrics.observeOperation({ stage: 'download', operation: 'fetch', result: 'success', seconds: 0.12 });
 * res.setHeader('content-type', metrics.contentType).end(await metrics.metrics());
 * ```
 */

import os from 'node:os';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { MOCRA_VERSION } from '../../downloader/version.js';
import { InternalError } from '../../errors.js';
import { lazyRequire } from '../../optional-dependency.js';
import {
  CRAWL_PIPELINE,
  DEFAULT_LABEL_LIMITS,
  errorKind,
  METRIC_FAMILIES,
  type MetricFamilyKey,
  type MetricFamilySpec,
} from './families.js';
import { LabelGuard } from './label-guard.js';
import { processMetricsRegistry } from './process-metrics.js';
import { SystemSampler } from './system-sampler.js';

// Loaded when the first metrics registry is built: a crawl without metrics never loads it.
const promClient = lazyRequire<typeof import('prom-client')>('prom-client');

type FamiliesOfType<TType extends string> = {
  [K in MetricFamilyKey]: (typeof METRIC_FAMILIES)[K]['type'] extends TType ? K : never;
}[MetricFamilyKey];

export type CounterKey = FamiliesOfType<'counter'>;
export type GaugeKey = FamiliesOfType<'gauge'>;
export type HistogramKey = FamiliesOfType<'histogram'>;

/** Label values by label name. Unknown names are a programming error (prom-client throws). */
export type MetricLabels = Readonly<Record<string, string>>;

/** Runs before every exposition; sets gauges / advances counters from a snapshot. */
export type MetricsCollector = () => void | Promise<void>;

export interface MetricsOptions {
  /** The `node` label on every `mocra_*` series. @default os.hostname() */
  node?: string;
  /** Also expose the Node.js process metrics (`mocra_process_*`, `mocra_nodejs_*`). @default true */
  processMetrics?: boolean;
  /** Distinct values admitted per open-ended label before it folds into `other`. @default DEFAULT_LABEL_LIMITS */
  labelLimits?: Readonly<Record<string, number>>;
  /** Where `mocra_resource_usage` reads host figures; `false` leaves that family unset. @default a new SystemSampler */
  system?: SystemSampler | false;
  /** A collector slower than this is abandoned for the scrape (its gauges keep their last value). @default 2000 */
  collectorTimeoutMs?: number;
}

export type EngineStateLabel = 'created' | 'running' | 'paused' | 'stopping' | 'stopped';
const ENGINE_STATES: readonly EngineStateLabel[] = ['created', 'running', 'paused', 'stopping', 'stopped'];

export type BreakerStateLabel = 'closed' | 'half-open' | 'open';
const BREAKER_VALUE: Readonly<Record<BreakerStateLabel, number>> = { closed: 0, 'half-open': 1, open: 2 };

export interface OperationSample {
  /** @default 'crawl' */
  pipeline?: string;
  /** task, download, parse, follow_up, error, store… */
  stage: string;
  /** generate, fetch, parse, follow, policy, write… */
  operation: string;
  result: 'success' | 'failure';
  /** Omit when the duration is unknown: the counter still counts, the histogram is left alone. */
  seconds?: number;
}

export interface QueueSample {
  ready: number;
  delayed: number;
  inflight: number;
  deadLettered: number;
}

export function createMetrics(options: MetricsOptions = {}): MocraMetrics {
  return new MocraMetrics(options);
}

export class MocraMetrics {
  /** This engine's registry (without the shared process metrics). */
  readonly registry: Registry;
  readonly node: string;
  readonly contentType: string;
  readonly #guard: LabelGuard;
  readonly #counters = new Map<string, Counter<string>>();
  readonly #gauges = new Map<string, Gauge<string>>();
  readonly #histograms = new Map<string, Histogram<string>>();
  readonly #collectors = new Set<MetricsCollector>();
  /** Last running total seen per counter series, for `advance`. */
  readonly #totals = new Map<string, number>();
  readonly #process: Registry | undefined;
  readonly #collectorTimeoutMs: number;

  constructor(options: MetricsOptions = {}) {
    this.node = options.node ?? os.hostname();
    const { Counter, Gauge, Histogram, Registry } = promClient();
    this.registry = new Registry();
    this.registry.setDefaultLabels({ node: this.node });
    this.contentType = this.registry.contentType;
    this.#collectorTimeoutMs = options.collectorTimeoutMs ?? 2000;
    this.#process = options.processMetrics === false ? undefined : processMetricsRegistry();

    const overflow = new Counter<string>({
      name: METRIC_FAMILIES.labelOverflow.name,
      help: METRIC_FAMILIES.labelOverflow.help,
      labelNames: [...METRIC_FAMILIES.labelOverflow.labelNames],
      registers: [this.registry],
    });
    this.#counters.set('labelOverflow', overflow);
    this.#guard = new LabelGuard({
      limits: { ...DEFAULT_LABEL_LIMITS, ...options.labelLimits },
      // The overflow counter's own `label` values are the guarded label names: a fixed set.
      onOverflow: (label) => overflow.inc({ label }),
    });

    for (const [key, spec] of Object.entries(METRIC_FAMILIES) as [MetricFamilyKey, MetricFamilySpec][]) {
      if (key === 'labelOverflow') continue;
      const common = {
        name: spec.name,
        help: spec.help,
        labelNames: [...spec.labelNames],
        registers: [this.registry],
      };
      if (spec.type === 'counter') this.#counters.set(key, new Counter(common));
      else if (spec.type === 'gauge') this.#gauges.set(key, new Gauge(common));
      else this.#histograms.set(key, new Histogram({ ...common, buckets: [...(spec.buckets ?? [])] }));
    }

    this.set('buildInfo', { version: MOCRA_VERSION, nodejs: process.version }, 1);
    this.set('nodeUp', {}, 0);
    this.setEngineState('created');

    const sampler = options.system === false ? undefined : (options.system ?? new SystemSampler());
    if (sampler !== undefined) {
      this.addCollector(() => {
        const s = sampler.sample();
        this.set('resourceUsage', { resource: 'cpu_usage_percent' }, s.cpuUsagePercent);
        this.set('resourceUsage', { resource: 'memory_used_bytes' }, s.memoryUsedBytes);
        this.set('resourceUsage', { resource: 'memory_total_bytes' }, s.memoryTotalBytes);
        this.set('resourceUsage', { resource: 'memory_usage_percent' }, s.memoryUsagePercent);
        this.set('resourceUsage', { resource: 'swap_used_bytes' }, s.swapUsedBytes);
        this.set('resourceUsage', { resource: 'swap_total_bytes' }, s.swapTotalBytes);
      });
    }
  }

  // ── generic, guarded access ────────────────────────────────────────────────────

  inc(key: CounterKey, labels: MetricLabels = {}, by = 1): void {
    if (!(by > 0)) return;
    this.#counter(key).inc(this.#labels(labels), by);
  }

  /**
   * Move a counter to a running total read from a snapshot (e.g. the frontier's duplicate
   * count). Only the increase since the previous call is added; a total that went down (a
   * new run started counting from zero) adds the whole new total.
   */
  advance(key: CounterKey, labels: MetricLabels, total: number): void {
    const guarded = this.#labels(labels);
    const id = `${key}|${seriesKey(guarded)}`;
    const last = this.#totals.get(id) ?? 0;
    this.#totals.set(id, total);
    const delta = total >= last ? total - last : total;
    if (delta > 0) this.#counter(key).inc(guarded, delta);
  }

  set(key: GaugeKey, labels: MetricLabels, value: number): void {
    if (!Number.isFinite(value)) return;
    this.#gauge(key).set(this.#labels(labels), value);
  }

  observe(key: HistogramKey, labels: MetricLabels, seconds: number): void {
    if (!(seconds >= 0) || !Number.isFinite(seconds)) return;
    this.#histogram(key).observe(this.#labels(labels), seconds);
  }

  // ── the common multi-family recordings ─────────────────────────────────────────

  /** One finished operation: `mocra_throughput_total` and, with a duration, `mocra_latency_seconds`. */
  observeOperation(sample: OperationSample): void {
    const labels = {
      pipeline: sample.pipeline ?? CRAWL_PIPELINE,
      stage: sample.stage,
      operation: sample.operation,
      result: sample.result,
    };
    this.inc('throughput', labels);
    if (sample.seconds !== undefined) this.observe('latency', labels, sample.seconds);
  }

  /** A reported failure: `mocra_errors_total` (kind derived from the code), and a panic for internal ones. */
  countError(error: { stage: string; code: string; pipeline?: string }): void {
    this.inc('errors', {
      pipeline: error.pipeline ?? CRAWL_PIPELINE,
      stage: error.stage,
      kind: errorKind(error.code),
      code: error.code,
    });
    if (error.code === 'MOCRA_ERR_INTERNAL') this.inc('processorPanics', { processor: error.stage });
  }

  /** The figures of one queue topic: backlog, messages by state, DLQ size. */
  setQueue(queue: string, stats: QueueSample, pipeline = CRAWL_PIPELINE): void {
    this.set('backlogDepth', { pipeline, queue }, stats.ready + stats.delayed);
    this.set('queueMessages', { pipeline, queue, state: 'ready' }, stats.ready);
    this.set('queueMessages', { pipeline, queue, state: 'delayed' }, stats.delayed);
    this.set('queueMessages', { pipeline, queue, state: 'inflight' }, stats.inflight);
    this.set('dlqSize', { pipeline, queue }, stats.deadLettered);
  }

  /**
   * A publish that had to wait for room on `queue`, counted under the family of that boundary: `request` → request_publish, `response` → download_response, `parser_task` →
   * parser_chain. Other topics are not bounded by the engine and have no family.
   */
  countBackpressure(queue: string, reason = 'capacity'): void {
    if (queue === 'request') this.inc('requestPublishBackpressure', { reason });
    else if (queue === 'response') this.inc('downloadResponseBackpressure', { queue, reason });
    else if (queue === 'parser_task') this.inc('parserChainBackpressure', { queue, reason });
  }

  setEngineState(state: EngineStateLabel): void {
    for (const s of ENGINE_STATES) this.set('engineState', { state: s }, s === state ? 1 : 0);
    this.set('nodeUp', {}, state === 'running' || state === 'paused' ? 1 : 0);
  }

  setPaused(paused: boolean, scope: 'local' | 'cluster' = 'local'): void {
    this.set('enginePaused', { scope }, paused ? 1 : 0);
  }

  setBreakerState(host: string, state: BreakerStateLabel): void {
    this.set('breakerState', { host }, BREAKER_VALUE[state]);
  }

  // ── exposition ─────────────────────────────────────────────────────────────────

  /** Register a collector run before every exposition. Returns a function that removes it. */
  addCollector(collector: MetricsCollector): () => void {
    this.#collectors.add(collector);
    return () => {
      this.#collectors.delete(collector);
    };
  }

  /** Run the collectors, then render this engine's families and the process families as Prometheus text. */
  async metrics(): Promise<string> {
    await this.collect();
    const own = await this.registry.metrics();
    if (this.#process === undefined) return own;
    const proc = await this.#process.metrics();
    return `${own.endsWith('\n') ? own : `${own}\n`}${proc}`;
  }

  /**
   * Run every collector once. A collector that throws or outlasts `collectorTimeoutMs` is
   * skipped for this scrape: a slow queue backend must not make `/metrics` hang.
   */
  async collect(): Promise<void> {
    const timeoutMs = this.#collectorTimeoutMs;
    await Promise.allSettled(
      [...this.#collectors].map(async (collector) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            Promise.resolve().then(collector),
            new Promise<void>((resolve) => {
              timer = setTimeout(resolve, timeoutMs);
              timer.unref();
            }),
          ]);
        } finally {
          if (timer !== undefined) clearTimeout(timer);
        }
      }),
    );
  }

  /** Current value of one series (for tests and the dashboard); undefined when it was never set. */
  async value(name: string, labels: MetricLabels = {}): Promise<number | undefined> {
    const metric = this.registry.getSingleMetric(name);
    if (metric === undefined) return undefined;
    const data = await metric.get();
    // Default labels (node) are added at exposition, not stored on the series.
    const want: Record<string, string> = { ...labels };
    const found = data.values.find(
      (v) =>
        !('metricName' in v && v.metricName !== undefined && v.metricName !== name) &&
        Object.entries(want).every(([k, val]) => String((v.labels as Record<string, unknown>)[k]) === val),
    );
    return found?.value;
  }

  #labels(labels: MetricLabels): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(labels)) out[name] = this.#guard.value(name, value);
    return out;
  }

  #counter(key: CounterKey): Counter<string> {
    const metric = this.#counters.get(key);
    if (metric === undefined) throw new InternalError(`no counter family '${key}'`);
    return metric;
  }

  #gauge(key: GaugeKey): Gauge<string> {
    const metric = this.#gauges.get(key);
    if (metric === undefined) throw new InternalError(`no gauge family '${key}'`);
    return metric;
  }

  #histogram(key: HistogramKey): Histogram<string> {
    const metric = this.#histograms.get(key);
    if (metric === undefined) throw new InternalError(`no histogram family '${key}'`);
    return metric;
  }
}

function seriesKey(labels: Record<string, string>): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

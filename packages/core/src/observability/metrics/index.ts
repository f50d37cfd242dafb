export type { DagTotals } from './dag-telemetry.js';
export type {
  EngineTelemetryOptions,
  HostState,
  StageLatency,
  StageThroughput,
} from './engine-telemetry.js';
export { attachEngineTelemetry, EngineTelemetry, STAGE_LABELS } from './engine-telemetry.js';
export type { MetricFamilyKey, MetricFamilySpec, MetricType } from './families.js';
export {
  CRAWL_PIPELINE,
  DAG_PIPELINE,
  DEFAULT_LABEL_LIMITS,
  errorKind,
  LATENCY_BUCKETS,
  METRIC_FAMILIES,
  THRESHOLD_DECISION_LABELS,
} from './families.js';
export type { LabelGuardOptions } from './label-guard.js';
export { hostLabel, LabelGuard, OVERFLOW_LABEL_VALUE, statusClass } from './label-guard.js';
export type {
  BreakerStateLabel,
  CounterKey,
  EngineStateLabel,
  GaugeKey,
  HistogramKey,
  MetricLabels,
  MetricsCollector,
  MetricsOptions,
  OperationSample,
  QueueSample,
} from './mocra-metrics.js';
export { createMetrics, MocraMetrics } from './mocra-metrics.js';
export { PROCESS_METRICS_PREFIX, processMetricsRegistry } from './process-metrics.js';
export type { ProcessSnapshot, SystemSamplerOptions, SystemSnapshot } from './system-sampler.js';
export { SystemSampler } from './system-sampler.js';

/**
 * Every `mocra_*` metric family an engine exposes, in one table: the registry is built from it,
 * `docs/metrics.md` documents it, and a test keeps the two in step. Names and labels follow
 * mocra for Rust (the project this one is modelled on) where it has the family, so its
 * dashboards carry over; the others cover what it does not measure (backlog, DLQ size, dedup,
 * per-host politeness, label overflow).
 *
 * Every family also carries `node` (the engine's node name) as a registry default label, so it
 * is not listed per family. Label values that come from open-ended input (`host`, `module`,
 * `code`, `queue`, `reason`, `component`, `domain`) pass a {@link LabelGuard} first.
 */
import type { ThresholdDecision } from '../../policy/error-thresholds.js';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricFamilySpec {
  readonly name: string;
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly buckets?: readonly number[];
}

/** Seconds; spans a fast parse (1 ms) to a slow download (60 s). */
export const LATENCY_BUCKETS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** Scheduler lateness: a healthy firing is milliseconds late, a blocked process seconds. */
const SHORT_BUCKETS: readonly number[] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30];

export const METRIC_FAMILIES = {
  nodeUp: {
    name: 'mocra_node_up',
    type: 'gauge',
    help: 'Whether this node runs an engine: 1 while running (paused included), 0 otherwise.',
    labelNames: [],
  },
  buildInfo: {
    name: 'mocra_build_info',
    type: 'gauge',
    help: 'Always 1; the labels carry the mocra and Node.js versions.',
    labelNames: ['version', 'nodejs'],
  },
  engineState: {
    name: 'mocra_engine_state',
    type: 'gauge',
    help: 'The engine state as an enum: 1 for the current state, 0 for the others.',
    labelNames: ['state'],
  },
  enginePaused: {
    name: 'mocra_engine_paused',
    type: 'gauge',
    help: 'Whether work intake is paused (1) or not (0); scope says whether the pause is cluster-wide.',
    labelNames: ['scope'],
  },
  componentHealth: {
    name: 'mocra_component_health',
    type: 'gauge',
    help: 'Health of a component the node depends on (queue, coordination, api): 1 up, 0 down.',
    labelNames: ['component'],
  },
  resourceUsage: {
    name: 'mocra_resource_usage',
    type: 'gauge',
    help: 'Host resources: cpu_usage_percent, memory_used_bytes, memory_total_bytes, memory_usage_percent, swap_used_bytes, swap_total_bytes.',
    labelNames: ['resource'],
  },
  throughput: {
    name: 'mocra_throughput_total',
    type: 'counter',
    help: 'Operations finished per pipeline stage, by result (success or failure); each attempt counts once.',
    labelNames: ['pipeline', 'stage', 'operation', 'result'],
  },
  latency: {
    name: 'mocra_latency_seconds',
    type: 'histogram',
    help: 'Duration of one operation of a pipeline stage, by result.',
    labelNames: ['pipeline', 'stage', 'operation', 'result'],
    buckets: LATENCY_BUCKETS,
  },
  errors: {
    name: 'mocra_errors_total',
    type: 'counter',
    help: 'Failures reported by a pipeline stage, by error kind and stable error code.',
    labelNames: ['pipeline', 'stage', 'kind', 'code'],
  },
  inflight: {
    name: 'mocra_inflight',
    type: 'gauge',
    help: 'Handlers of a pipeline stage running now in this process.',
    labelNames: ['pipeline', 'stage'],
  },
  backlogDepth: {
    name: 'mocra_backlog_depth',
    type: 'gauge',
    help: 'Messages waiting on a queue topic (ready plus delayed), not yet handed to a worker.',
    labelNames: ['pipeline', 'queue'],
  },
  queueMessages: {
    name: 'mocra_queue_messages',
    type: 'gauge',
    help: 'Messages on a queue topic by state: ready, delayed or inflight (leased).',
    labelNames: ['pipeline', 'queue', 'state'],
  },
  dlqSize: {
    name: 'mocra_dlq_size',
    type: 'gauge',
    help: 'Entries in the dead-letter queue of a topic.',
    labelNames: ['pipeline', 'queue'],
  },
  deadLetters: {
    name: 'mocra_dead_letters_total',
    type: 'counter',
    help: 'Messages that entered a dead-letter queue.',
    labelNames: ['pipeline', 'queue'],
  },
  queueDecodeErrors: {
    name: 'mocra_queue_decode_errors_total',
    type: 'counter',
    help: 'Queue messages that could not be decoded (poison messages, dead-lettered).',
    labelNames: ['queue'],
  },
  queueEncodeErrors: {
    name: 'mocra_queue_encode_errors_total',
    type: 'counter',
    help: 'Payloads the queue codec could not encode.',
    labelNames: ['queue'],
  },
  policyDecisions: {
    name: 'mocra_policy_decisions_total',
    type: 'counter',
    help: 'Decisions of the failure policy: action is retry, dead_letter or stop.',
    labelNames: ['domain', 'event_type', 'phase', 'kind', 'action'],
  },
  thresholdDecisions: {
    name: 'mocra_error_task_threshold_decision_total',
    type: 'counter',
    help: 'Error-threshold verdicts per failure: continue, retry_after (cool down, then retry), skip, terminate_module or terminate_task.',
    labelNames: ['decision'],
  },
  processorPanics: {
    name: 'mocra_processor_panics_total',
    type: 'counter',
    help: 'Internal invariant failures (MOCRA_ERR_INTERNAL) inside a stage processor.',
    labelNames: ['processor'],
  },
  requestPublishBackpressure: {
    name: 'mocra_request_publish_backpressure_total',
    type: 'counter',
    help: 'Times publishing to the request topic had to wait for room.',
    labelNames: ['reason'],
  },
  downloadResponseBackpressure: {
    name: 'mocra_download_response_backpressure_total',
    type: 'counter',
    help: 'Times the download stage had to wait for room on the response topic.',
    labelNames: ['queue', 'reason'],
  },
  parserChainBackpressure: {
    name: 'mocra_parser_chain_backpressure_total',
    type: 'counter',
    help: 'Times the parse stage had to wait for room on the parser_task topic.',
    labelNames: ['queue', 'reason'],
  },
  dedup: {
    name: 'mocra_dedup_total',
    type: 'counter',
    help: 'Frontier dedup lookups: hit (a duplicate, dropped) or miss (new, admitted).',
    labelNames: ['result'],
  },
  frontierRejections: {
    name: 'mocra_frontier_rejections_total',
    type: 'counter',
    help: 'Requests the frontier refused other than duplicates: over_depth, over_limit, invalid, gate_drop.',
    labelNames: ['reason'],
  },
  items: {
    name: 'mocra_items_total',
    type: 'counter',
    help: 'Items written to sinks, by module.',
    labelNames: ['module'],
  },
  responses: {
    name: 'mocra_responses_total',
    type: 'counter',
    help: 'HTTP responses downloaded, by module and status class (2xx … 5xx).',
    labelNames: ['module', 'status_class'],
  },
  responseBytes: {
    name: 'mocra_response_bytes_total',
    type: 'counter',
    help: 'Body bytes downloaded (after decompression).',
    labelNames: [],
  },
  hostRequests: {
    name: 'mocra_host_requests_total',
    type: 'counter',
    help: 'Downloads per host (bounded: the first N hosts, then other), by status class or error.',
    labelNames: ['host', 'result'],
  },
  hostInflight: {
    name: 'mocra_host_inflight',
    type: 'gauge',
    help: 'Downloads running now per host (bounded host label).',
    labelNames: ['host'],
  },
  breakerState: {
    name: 'mocra_breaker_state',
    type: 'gauge',
    help: 'Circuit breaker of a host: 0 closed, 1 half-open, 2 open (bounded host label).',
    labelNames: ['host'],
  },
  scheduledTasks: {
    name: 'mocra_scheduled_tasks_total',
    type: 'counter',
    help: 'Tasks the cron scheduler fired, by module.',
    labelNames: ['module'],
  },
  schedulerDrops: {
    name: 'mocra_scheduler_task_drops_total',
    type: 'counter',
    help: 'Cron firings that were not run (misfire, not the owner, publish failed), by module and reason.',
    labelNames: ['module', 'reason'],
  },
  schedulerFireDelay: {
    name: 'mocra_scheduler_fire_delay_seconds',
    type: 'histogram',
    help: 'How late a cron firing ran after its scheduled time.',
    labelNames: [],
    buckets: SHORT_BUCKETS,
  },
  clusterMembers: {
    name: 'mocra_cluster_members',
    type: 'gauge',
    help: 'Live members the coordination backend reports (1 in single-node mode).',
    labelNames: [],
  },
  clusterLeader: {
    name: 'mocra_cluster_leader',
    type: 'gauge',
    help: 'Whether this node is the leader (1) or not (0).',
    labelNames: [],
  },
  logEvents: {
    name: 'mocra_log_events_total',
    type: 'counter',
    help: 'Log records received by a log sink, by level.',
    labelNames: ['sink', 'level'],
  },
  logDropped: {
    name: 'mocra_log_dropped_total',
    type: 'counter',
    help: 'Log records a sink discarded (invalid: not a JSON record), by level and reason.',
    labelNames: ['sink', 'level', 'reason'],
  },
  dagRetries: {
    name: 'mocra_dag_retries_total',
    type: 'counter',
    help: 'DAG node retries scheduled: reason backoff (an attempt failed) or breaker (the node circuit breaker was open).',
    labelNames: ['pipeline', 'reason'],
  },
  dagTimeouts: {
    name: 'mocra_dag_timeouts_total',
    type: 'counter',
    help: 'DAG timeouts: scope node (an attempt ran past its timeout and was aborted) or run (the whole run did).',
    labelNames: ['pipeline', 'scope'],
  },
  dagRunGuard: {
    name: 'mocra_dag_run_guard_total',
    type: 'counter',
    help: 'DAG run-guard events: acquired, contended (another owner holds it), acquire_failed, renewed, lost, released, release_failed.',
    labelNames: ['pipeline', 'event'],
  },
  dagFencingRejections: {
    name: 'mocra_dag_fencing_rejections_total',
    type: 'counter',
    help: 'DAG node outputs refused because a newer fencing token had written for the run.',
    labelNames: ['pipeline'],
  },
  dagCheckpointWrites: {
    name: 'mocra_dag_checkpoint_writes_total',
    type: 'counter',
    help: 'DAG node outputs written to the run checkpoint (a resumed run restores them).',
    labelNames: ['pipeline'],
  },
  dagSingleflightHits: {
    name: 'mocra_dag_singleflight_hits_total',
    type: 'counter',
    help: 'DAG nodes served by another node with the same idempotency key: source cache (already done) or singleflight (waited for it).',
    labelNames: ['pipeline', 'source'],
  },
  labelOverflow: {
    name: 'mocra_label_overflow_total',
    type: 'counter',
    help: 'Label values folded into "other" because the label reached its limit of distinct values.',
    labelNames: ['label'],
  },
} as const satisfies Record<string, MetricFamilySpec>;

export type MetricFamilyKey = keyof typeof METRIC_FAMILIES;

/** How many distinct values each open-ended label admits before folding into `other`. */
export const DEFAULT_LABEL_LIMITS: Readonly<Record<string, number>> = Object.freeze({
  host: 50,
  module: 100,
  code: 100,
  queue: 50,
  reason: 50,
  component: 20,
  domain: 20,
  event_type: 20,
  processor: 20,
  kind: 30,
  pipeline: 20,
  stage: 20,
  operation: 20,
});

/** The pipeline label of the engine's stages. */
export const CRAWL_PIPELINE = 'crawl';
/** The pipeline label of the DAG executor's runs and node attempts (DAG jobs). */
export const DAG_PIPELINE = 'dag';

/** Error-code → kind, so dashboards can group codes without listing each one. */
const KIND_BY_CODE: Readonly<Record<string, string>> = {
  MOCRA_ERR_TIMEOUT: 'network',
  MOCRA_ERR_CONNECTION: 'network',
  MOCRA_ERR_MALFORMED_RESPONSE: 'network',
  MOCRA_ERR_HTTP_STATUS: 'http',
  MOCRA_ERR_BODY_TOO_LARGE: 'content',
  MOCRA_ERR_CONTENT_DECODING: 'content',
  MOCRA_ERR_TEXT_DECODING: 'content',
  MOCRA_ERR_TOO_MANY_REDIRECTS: 'redirect',
  MOCRA_ERR_REDIRECT_LOOP: 'redirect',
  MOCRA_ERR_INVALID_URL: 'request',
  MOCRA_ERR_GENERATE_FAILED: 'user',
  MOCRA_ERR_RUN_HOOK_FAILED: 'user',
  MOCRA_ERR_PARSE_FAILED: 'user',
  MOCRA_ERR_NON_RETRYABLE: 'user',
  MOCRA_ERR_RETRY_LATER: 'user',
  MOCRA_ERR_CRITICAL: 'user',
  MOCRA_ERR_SINK_FAILED: 'store',
  MOCRA_ERR_MIDDLEWARE_FAILED: 'middleware',
  MOCRA_ERR_UNKNOWN_MIDDLEWARE: 'middleware',
  MOCRA_ERR_SESSION_EXPIRED: 'session',
  MOCRA_ERR_LOGIN_FAILED: 'session',
  MOCRA_ERR_ABORTED: 'aborted',
  MOCRA_ERR_INTERNAL: 'internal',
};

/** The `kind` label of an error code: network, http, content, redirect, request, user, store, queue, … or other. */
export function errorKind(code: string): string {
  const known = KIND_BY_CODE[code];
  if (known !== undefined) return known;
  if (
    code.startsWith('MOCRA_ERR_QUEUE') ||
    code.startsWith('MOCRA_ERR_BACKEND') ||
    code === 'MOCRA_ERR_LEASE_EXPIRED'
  )
    return 'queue';
  if (code.startsWith('MOCRA_ERR_DAG_')) return 'dag';
  return 'other';
}

/**
 * The `decision` label of `mocra_error_task_threshold_decision_total` for each threshold verdict.
 * The values are the Rust project's (`ErrorDecision::RetryAfter` is our `retry-later`: the module
 * or task is failing often, so the request is retried after a cool-down), so dashboards built for
 * either read the other's metrics.
 */
export const THRESHOLD_DECISION_LABELS: Readonly<Record<ThresholdDecision, string>> = {
  continue: 'continue',
  'retry-later': 'retry_after',
  skip: 'skip',
  'terminate-module': 'terminate_module',
  'terminate-task': 'terminate_task',
};

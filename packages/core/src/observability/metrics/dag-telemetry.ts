/**
 * DAG jobs in the metrics: each `@mocra/dag` event of a job's run (from `mocra:engine:dag`)
 * becomes `mocra_*` series with `pipeline="dag"` and a count on the dashboard.
 *
 * ```
 *  run-succeeded / run-failed     ─▶ mocra_throughput_total / mocra_latency_seconds {stage="run", operation="execute"}
 *  node-succeeded (source run)    ─▶ mocra_throughput_total / mocra_latency_seconds {stage="node", operation="attempt"}
 *  node-attempt-failed            ─▶ the same with result="failure", mocra_errors_total {stage="node"}
 *  node-retry-scheduled           ─▶ mocra_dag_retries_total
 *  attempt / run timeout          ─▶ mocra_dag_timeouts_total
 *  run-guard-*                    ─▶ mocra_dag_run_guard_total
 *  node-failed (fencing refused)  ─▶ mocra_dag_fencing_rejections_total
 *  node-checkpointed              ─▶ mocra_dag_checkpoint_writes_total
 *  node-succeeded (cache, singleflight) ─▶ mocra_dag_singleflight_hits_total
 * ```
 */
import type { DagEvent } from '@mocra/dag';
import { DAG_PIPELINE } from './families.js';
import type { MocraMetrics } from './mocra-metrics.js';

/** What the DAG jobs of an engine did, for the dashboard (the same figures as the metrics). */
export interface DagTotals {
  runs: { success: number; failure: number };
  attempts: { success: number; failure: number };
  retries: number;
  timeouts: number;
  runGuard: { acquired: number; contended: number; lost: number };
  fencingRejections: number;
  checkpointWrites: number;
  singleflightHits: number;
}

export function emptyDagTotals(): DagTotals {
  return {
    runs: { success: 0, failure: 0 },
    attempts: { success: 0, failure: 0 },
    retries: 0,
    timeouts: 0,
    runGuard: { acquired: 0, contended: 0, lost: 0 },
    fencingRejections: 0,
    checkpointWrites: 0,
    singleflightHits: 0,
  };
}

const NODE_TIMEOUT = 'MOCRA_ERR_DAG_NODE_TIMEOUT';
const RUN_TIMEOUT = 'MOCRA_ERR_DAG_RUN_TIMEOUT';
const FENCING_REJECTED = 'MOCRA_ERR_DAG_FENCING_REJECTED';
/** A DAG error without a code (a plain Error thrown by a node) is counted under this one. */
const NODE_ERROR = 'MOCRA_ERR_DAG_NODE_FAILED';

const pipeline = DAG_PIPELINE;

/** Counts one event in `totals` and, when given, in `metrics`. */
export function recordDagEvent(event: DagEvent, totals: DagTotals, metrics: MocraMetrics | undefined): void {
  switch (event.type) {
    case 'run-succeeded':
    case 'run-failed': {
      const ok = event.type === 'run-succeeded';
      if (ok) totals.runs.success++;
      else totals.runs.failure++;
      metrics?.observeOperation({
        pipeline,
        stage: 'run',
        operation: 'execute',
        result: ok ? 'success' : 'failure',
        seconds: event.durationMs / 1000,
      });
      if (event.type === 'run-failed') {
        metrics?.countError({ pipeline, stage: 'run', code: event.error.code ?? NODE_ERROR });
        if (event.error.code === RUN_TIMEOUT) timeout(totals, metrics, 'run');
      }
      return;
    }
    case 'node-succeeded':
      if (event.source === 'run') {
        totals.attempts.success++;
        metrics?.observeOperation({
          pipeline,
          stage: 'node',
          operation: 'attempt',
          result: 'success',
          seconds: event.durationMs / 1000,
        });
      } else {
        totals.singleflightHits++;
        metrics?.inc('dagSingleflightHits', { pipeline, source: event.source });
      }
      return;
    case 'node-attempt-failed': {
      totals.attempts.failure++;
      metrics?.observeOperation({
        pipeline,
        stage: 'node',
        operation: 'attempt',
        result: 'failure',
        seconds: event.durationMs / 1000,
      });
      const code = event.error.code ?? NODE_ERROR;
      metrics?.countError({ pipeline, stage: 'node', code });
      if (code === NODE_TIMEOUT) timeout(totals, metrics, 'node');
      return;
    }
    case 'node-retry-scheduled':
      totals.retries++;
      metrics?.inc('dagRetries', { pipeline, reason: event.breakerOpen ? 'breaker' : 'backoff' });
      return;
    case 'node-failed':
      if (event.error.code === FENCING_REJECTED) {
        totals.fencingRejections++;
        metrics?.inc('dagFencingRejections', { pipeline });
      }
      return;
    case 'node-checkpointed':
      totals.checkpointWrites++;
      metrics?.inc('dagCheckpointWrites', { pipeline });
      return;
    case 'run-guard-acquired':
      totals.runGuard.acquired++;
      metrics?.inc('dagRunGuard', { pipeline, event: 'acquired' });
      return;
    case 'run-guard-refused':
      if (event.reason === 'held') totals.runGuard.contended++;
      metrics?.inc('dagRunGuard', {
        pipeline,
        event: event.reason === 'held' ? 'contended' : 'acquire_failed',
      });
      return;
    case 'run-guard-renewed':
      metrics?.inc('dagRunGuard', { pipeline, event: 'renewed' });
      return;
    case 'run-guard-lost':
      totals.runGuard.lost++;
      metrics?.inc('dagRunGuard', { pipeline, event: 'lost' });
      return;
    case 'run-guard-released':
      metrics?.inc('dagRunGuard', { pipeline, event: event.released ? 'released' : 'release_failed' });
      return;
    default:
      return;
  }
}

function timeout(totals: DagTotals, metrics: MocraMetrics | undefined, scope: 'node' | 'run'): void {
  totals.timeouts++;
  metrics?.inc('dagTimeouts', { pipeline, scope });
}

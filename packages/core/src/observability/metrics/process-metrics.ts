/**
 * Node.js process metrics (CPU, memory, event-loop lag, GC, handles, file descriptors) under
 * the `mocra_` prefix: `mocra_process_cpu_seconds_total`, `mocra_nodejs_eventloop_lag_seconds`…
 *
 * They describe the process, not an engine, so there is one registry per process, created on
 * first use and shared by every engine's exposition. prom-client's collectors start a GC
 * observer and an event-loop histogram that are never stopped; creating them per engine would
 * leak one set per engine a long-lived process ever built.
 *
 * prom-client's `nodejs_active_{handles,requests,resources}_total` are gauges with a `_total`
 * suffix, which `promtool check metrics` rejects (that suffix is for counters); they are dropped,
 * `sum(mocra_nodejs_active_handles)` gives the same figure.
 */

import type { Registry } from 'prom-client';
import { lazyRequire } from '../../optional-dependency.js';

const promClient = lazyRequire<typeof import('prom-client')>('prom-client');

export const PROCESS_METRICS_PREFIX = 'mocra_';

let shared: Registry | undefined;

/** The process-wide registry of Node.js process metrics (created once). */
export function processMetricsRegistry(): Registry {
  if (shared === undefined) {
    const { collectDefaultMetrics, Registry } = promClient();
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: PROCESS_METRICS_PREFIX });
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
      registry.removeSingleMetric(`${PROCESS_METRICS_PREFIX}nodejs_${name}`);
    }
    shared = registry;
  }
  return shared;
}

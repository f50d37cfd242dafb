// The mocra_* registry: every family exposed, labels bounded, registries isolated, and the
// exposition accepted by Prometheus's own linter (promtool, from Debian's prometheus package;
// .ci/system-deps installs it, the promtool tests skip where it is missing).
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import {
  createMetrics,
  errorKind,
  hostLabel,
  METRIC_FAMILIES,
  type MocraMetrics,
  statusClass,
} from '../src/index.js';

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;

function promtoolCheck(text: string): { status: number | null; output: string } {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 20_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** Touch every family once, the way the engine's collector does. */
function populate(m: MocraMetrics): void {
  m.setEngineState('running');
  m.setPaused(false);
  m.set('componentHealth', { component: 'queue' }, 1);
  m.observeOperation({ stage: 'download', operation: 'fetch', result: 'success', seconds: 0.12 });
  m.observeOperation({ stage: 'parse', operation: 'parse', result: 'failure', seconds: 0.003 });
  m.countError({ stage: 'download', code: 'MOCRA_ERR_TIMEOUT' });
  m.countError({ stage: 'parse', code: 'MOCRA_ERR_INTERNAL' });
  m.set('inflight', { pipeline: 'crawl', stage: 'download' }, 4);
  m.setQueue('request', { ready: 10, delayed: 2, inflight: 4, deadLettered: 1 });
  m.inc('deadLetters', { pipeline: 'crawl', queue: 'error' });
  m.inc('queueDecodeErrors', { queue: 'response' });
  m.inc('queueEncodeErrors', { queue: 'request' });
  m.inc('policyDecisions', {
    domain: 'engine',
    event_type: 'download',
    phase: 'failed',
    kind: 'network',
    action: 'retry',
  });
  m.countBackpressure('request');
  m.countBackpressure('response');
  m.countBackpressure('parser_task');
  m.advance('dedup', { result: 'hit' }, 3);
  m.advance('dedup', { result: 'miss' }, 7);
  m.inc('frontierRejections', { reason: 'over_depth' });
  m.inc('items', { module: 'catalog' }, 5);
  m.inc('responses', { module: 'catalog', status_class: statusClass(200) });
  m.inc('responseBytes', {}, 2048);
  m.inc('hostRequests', { host: hostLabel('http://127.0.0.1:8080/a?b=c'), result: '2xx' });
  m.set('hostInflight', { host: '127.0.0.1:8080' }, 1);
  m.setBreakerState('127.0.0.1:8080', 'half-open');
  m.inc('scheduledTasks', { module: 'catalog' });
  m.inc('schedulerDrops', { module: 'catalog', reason: 'misfire' });
  m.observe('schedulerFireDelay', {}, 0.002);
  m.set('clusterMembers', {}, 1);
  m.set('clusterLeader', {}, 1);
  m.inc('logEvents', { sink: 'buffer', level: 'info' });
  m.inc('logDropped', { sink: 'buffer', level: 'unknown', reason: 'invalid' });
}

describe('MocraMetrics', () => {
  test('exposes every family of the table with HELP and TYPE, under the node label', async () => {
    const m = createMetrics({ node: 'n1', processMetrics: false });
    populate(m);
    const text = await m.metrics();
    for (const spec of Object.values(METRIC_FAMILIES)) {
      expect(text, spec.name).toContain(`# HELP ${spec.name} `);
      expect(text, spec.name).toContain(`# TYPE ${spec.name} ${spec.type}`);
    }
    expect(text).toContain('mocra_node_up{node="n1"} 1');
    expect(text).toContain('mocra_backlog_depth{pipeline="crawl",queue="request",node="n1"} 12');
    expect(text).toContain('mocra_dlq_size{pipeline="crawl",queue="request",node="n1"} 1');
    expect(text).toContain(
      'mocra_errors_total{pipeline="crawl",stage="download",kind="network",code="MOCRA_ERR_TIMEOUT",node="n1"} 1',
    );
    expect(text).toContain('mocra_processor_panics_total{processor="parse",node="n1"} 1');
    expect(text).toContain('mocra_breaker_state{host="127.0.0.1:8080",node="n1"} 1');
    expect(text).toContain('mocra_resource_usage{resource="memory_total_bytes",node="n1"}');
    expect(text).not.toContain('?b=c');
  });

  test.skipIf(!promtool)(
    'promtool check metrics accepts the whole exposition (process metrics included)',
    async () => {
      const m = createMetrics({ node: 'lint' });
      populate(m);
      const text = await m.metrics();
      expect(text).toContain('# TYPE mocra_process_cpu_seconds_total counter');
      expect(text).toContain('# TYPE mocra_nodejs_eventloop_lag_seconds gauge');
      const result = promtoolCheck(text);
      expect(result.output).toBe('');
      expect(result.status).toBe(0);
    },
  );

  test.skipIf(!promtool)('promtool would catch a broken exposition (the check is real)', () => {
    const result = promtoolCheck('# TYPE bad_gauge_total gauge\nbad_gauge_total 1\n');
    expect(result.status).not.toBe(0);
    expect(result.output).toContain('_total');
  });

  test('open-ended labels fold into "other" past their limit and the overflow is counted', async () => {
    const m = createMetrics({ node: 'g', processMetrics: false, system: false, labelLimits: { host: 3 } });
    for (const host of ['a.test', 'b.test', 'c.test', 'd.test', 'e.test', 'a.test']) {
      m.inc('hostRequests', { host, result: '2xx' });
    }
    expect(await m.value('mocra_host_requests_total', { host: 'a.test', result: '2xx' })).toBe(2);
    expect(await m.value('mocra_host_requests_total', { host: 'other', result: '2xx' })).toBe(2);
    expect(await m.value('mocra_host_requests_total', { host: 'd.test', result: '2xx' })).toBeUndefined();
    expect(await m.value('mocra_label_overflow_total', { label: 'host' })).toBe(2);
    // A label value is a name, never a payload: long ones are cut.
    m.inc('items', { module: 'm'.repeat(500) });
    expect((await m.metrics()).includes('m'.repeat(129))).toBe(false);
  });

  test('two registries in one process never share series', async () => {
    const a = createMetrics({ node: 'a', processMetrics: false, system: false });
    const b = createMetrics({ node: 'b', processMetrics: false, system: false });
    a.inc('items', { module: 'catalog' }, 3);
    b.inc('items', { module: 'catalog' }, 1);
    expect(await a.value('mocra_items_total', { module: 'catalog' })).toBe(3);
    expect(await b.value('mocra_items_total', { module: 'catalog' })).toBe(1);
    expect(await a.metrics()).not.toContain('node="b"');
  });

  test('advance adds only the increase of a running total, and restarts from a reset', async () => {
    const m = createMetrics({ node: 't', processMetrics: false, system: false });
    m.advance('dedup', { result: 'hit' }, 5);
    m.advance('dedup', { result: 'hit' }, 5);
    m.advance('dedup', { result: 'hit' }, 8);
    expect(await m.value('mocra_dedup_total', { result: 'hit' })).toBe(8);
    m.advance('dedup', { result: 'hit' }, 2); // a new run counts from zero
    expect(await m.value('mocra_dedup_total', { result: 'hit' })).toBe(10);
  });

  test('collectors run at scrape time; a hung one is skipped instead of hanging /metrics', async () => {
    const m = createMetrics({ node: 'c', processMetrics: false, system: false, collectorTimeoutMs: 50 });
    let depth = 0;
    m.addCollector(() => {
      depth += 5;
      m.set('backlogDepth', { pipeline: 'crawl', queue: 'task' }, depth);
    });
    const remove = m.addCollector(() => new Promise<void>(() => {}));
    m.addCollector(() => {
      throw new Error('collector bug');
    });
    expect(await m.metrics()).toContain('mocra_backlog_depth{pipeline="crawl",queue="task",node="c"} 5');
    remove();
    expect(await m.metrics()).toContain('mocra_backlog_depth{pipeline="crawl",queue="task",node="c"} 10');
  });

  test('engine state is an enum gauge and node_up follows it', async () => {
    const m = createMetrics({ node: 's', processMetrics: false, system: false });
    expect(await m.value('mocra_node_up')).toBe(0);
    m.setEngineState('paused');
    expect(await m.value('mocra_engine_state', { state: 'paused' })).toBe(1);
    expect(await m.value('mocra_engine_state', { state: 'running' })).toBe(0);
    expect(await m.value('mocra_node_up')).toBe(1);
    m.setEngineState('stopped');
    expect(await m.value('mocra_node_up')).toBe(0);
  });

  test('error kinds and host labels stay bounded by construction', () => {
    expect(errorKind('MOCRA_ERR_CONNECTION')).toBe('network');
    expect(errorKind('MOCRA_ERR_QUEUE_DECODE')).toBe('queue');
    expect(errorKind('MOCRA_ERR_DAG_NODE_TIMEOUT')).toBe('dag');
    expect(errorKind('ECONNRESET')).toBe('other');
    expect(hostLabel('https://Example.COM:443/x')).toBe('example.com');
    expect(hostLabel('http://example.com:8080/x')).toBe('example.com:8080');
    expect(hostLabel('not a url')).toBe('invalid');
    expect(statusClass(404)).toBe('4xx');
    expect(statusClass(42)).toBe('other');
  });
});

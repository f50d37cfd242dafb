// The monitoring stack as shipped: docker-compose.monitoring.yml, monitoring/prometheus.yml, the
// alert rules and the Grafana dashboard. Prometheus's own promtool validates the config, the
// rules and every PromQL expression of the dashboard; the metric names they use must be
// families the engine really exposes (and every family must be on the dashboard).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { METRIC_FAMILIES, processMetricsRegistry } from '@mocra/core';
import { describe, expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;

function runPromtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { encoding: 'utf8', timeout: 30_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: { expr: string; datasource?: { uid: string } }[];
}
const dashboard = JSON.parse(read('monitoring/grafana/dashboards/mocra.json')) as {
  uid: string;
  panels: Panel[];
  templating: { list: { query: { query: string } }[] };
};
const expressions = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
const alertRules = read('monitoring/alerts.yml');

/** PromQL as Prometheus sees it once Grafana has substituted its variables. */
function concrete(expr: string): string {
  return expr.replaceAll('$__rate_interval', '1m').replaceAll('$node', '.*');
}

function metricNames(text: string): Set<string> {
  return new Set(text.match(/\bmocra_[a-z0-9_]+/g) ?? []);
}

describe('monitoring stack', () => {
  test.skipIf(!promtool)(
    'promtool check config accepts monitoring/prometheus.yml (and its rule file)',
    () => {
      const result = runPromtool('check', 'config', path.join(root, 'monitoring/prometheus.yml'));
      expect(result.output).toContain('is valid prometheus config file syntax');
      expect(result.status).toBe(0);
    },
  );

  test.skipIf(!promtool)('promtool check rules accepts the alert rules', () => {
    const result = runPromtool('check', 'rules', path.join(root, 'monitoring/alerts.yml'));
    expect(result.output).toContain('SUCCESS: 5 rules found');
    expect(result.status).toBe(0);
  });

  test.skipIf(!promtool)('every PromQL expression of the Grafana dashboard parses', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-promql-'));
    try {
      // promtool has no bare "parse this query" command; recording rules get the same parser.
      const rules = expressions.map(
        (expr, i) =>
          `      - record: mocra:dashboard_expr_${i}\n        expr: ${JSON.stringify(concrete(expr))}`,
      );
      const file = path.join(dir, 'dashboard-rules.yml');
      fs.writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
      const result = runPromtool('check', 'rules', file);
      expect(result.output).toContain(`SUCCESS: ${expressions.length} rules found`);
      expect(result.status).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!promtool)('promtool rejects a broken expression (the check above is real)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-promql-'));
    try {
      const file = path.join(dir, 'bad.yml');
      fs.writeFileSync(
        file,
        'groups:\n  - name: bad\n    rules:\n      - record: x:y\n        expr: "sum(rate(mocra_items_total[1m])"\n',
      );
      expect(runPromtool('check', 'rules', file).status).not.toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the dashboard and the alerts only use metrics the engine exposes, and show every family', async () => {
    const families = Object.values(METRIC_FAMILIES);
    const known = new Set<string>();
    for (const f of families) {
      known.add(f.name);
      if (f.type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) known.add(f.name + s);
    }
    for (const metric of await processMetricsRegistry().getMetricsAsJSON()) known.add(metric.name);

    const used = new Set([...metricNames(expressions.join('\n')), ...metricNames(alertRules)]);
    expect([...used].filter((name) => !known.has(name)).sort()).toEqual([]);

    const onDashboard = metricNames(expressions.join('\n'));
    const missing = families.filter(
      (f) =>
        !onDashboard.has(f.name) &&
        !onDashboard.has(`${f.name}_bucket`) &&
        !onDashboard.has(`${f.name}_count`),
    );
    expect(missing.map((f) => f.name)).toEqual([]);
  });

  test('Grafana provisioning points the dashboard at the provisioned datasource', () => {
    const datasource = read('monitoring/grafana/provisioning/datasources/prometheus.yml');
    const uid = /uid:\s*(\S+)/.exec(datasource)?.[1];
    expect(uid).toBe('mocra-prometheus');
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid, panel.title).toBe(uid);
      for (const t of panel.targets ?? []) expect(t.datasource?.uid, panel.title).toBe(uid);
    }
    const provider = read('monitoring/grafana/provisioning/dashboards/mocra.yml');
    expect(provider).toContain('path: /var/lib/grafana/dashboards');
  });

  test('docker-compose.monitoring.yml mounts files that exist', () => {
    const compose = read('docker-compose.monitoring.yml');
    const mounts = [...compose.matchAll(/- (\.\/[^:\s]+):/g)].map((m) => m[1]!);
    expect(mounts).toEqual(
      expect.arrayContaining([
        './monitoring/prometheus.yml',
        './monitoring/alerts.yml',
        './monitoring/grafana/provisioning',
      ]),
    );
    for (const mount of mounts) expect(fs.existsSync(path.join(root, mount)), mount).toBe(true);
    expect(read('monitoring/prometheus.yml')).toContain('host.docker.internal:8905');
  });
});

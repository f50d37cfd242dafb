// A DAG job as a user runs it (Mocra.builder().dag() with the dashboard): a node that times out
// once and is retried, two nodes sharing an idempotency key. The engine's /metrics then carries
// the run, the attempts, the retry, the timeout, the run guard, the checkpoint writes and the
// singleflight hit under pipeline="dag", passes promtool, and the dashboard (its engine view, and
// its "DAG jobs" card in real Chromium) has the same counts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDag, jsonPayload, type Payload } from '@mocra/dag';
import { type DagJobResult, Mocra } from 'mocra';
import { chromium } from 'playwright-core';
import { expect, test } from 'vitest';

// The predicate passed to page.waitForFunction runs in the page; this package has no DOM lib.
declare const document: { querySelector(selector: string): { textContent: string | null } | null };

const hasPromtool = spawnSync('promtool', ['--version']).status === 0;
const CHROMIUM = process.env.MOCRA_CHROMIUM ?? '/usr/bin/chromium';

async function until<T>(probe: () => T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = probe();
    if (value !== undefined) return value;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The value of one exposed series, by its exact label set as prom-client writes it. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('a DAG job is in /metrics with pipeline="dag", passes promtool, and on the dashboard', async () => {
  const stop = new AbortController();
  const results: DagJobResult[] = [];
  let apiUrl = '';
  let flakyAttempts = 0;
  const build = () =>
    createDag([
      {
        id: 'flaky',
        timeoutMs: 150,
        retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 0 } },
        // The first attempt hangs until the scheduler aborts it for its timeout.
        run: (ctx) =>
          ++flakyAttempts === 1
            ? new Promise<Payload>((_, reject) =>
                ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
              )
            : Promise.resolve(jsonPayload({ attempt: flakyAttempts })),
      },
      { id: 'left', after: ['flaky'], idempotencyKey: 'shared', run: async () => jsonPayload('work') },
      { id: 'right', after: ['flaky'], idempotencyKey: 'shared', run: async () => jsonPayload('work') },
    ]);
  const running = Mocra.builder()
    .dag('report', build, { sink: (item: DagJobResult) => void results.push(item) })
    .handleSignals(false)
    .signal(stop.signal)
    .dashboard({ port: 0, node: 'dag-metrics', keepAlive: true, onListen: (u) => (apiUrl = u) })
    .run();
  try {
    await until(() => (results.length > 0 && apiUrl !== '' ? true : undefined), 'the DAG run');
    expect(flakyAttempts).toBe(2);
    const text = await (await fetch(`${apiUrl}/metrics`)).text();
    const node = 'node="dag-metrics"';
    const dag = (family: string, labels: string) =>
      sample(text, `${family}{pipeline="dag",${labels}${node}}`);
    expect(dag('mocra_throughput_total', 'stage="run",operation="execute",result="success",')).toBe(1);
    // prom-client writes the default label first on histogram lines.
    expect(
      sample(
        text,
        `mocra_latency_seconds_count{${node},pipeline="dag",stage="run",operation="execute",result="success"}`,
      ),
    ).toBe(1);
    // flaky twice (one timed out), then the one of left/right that did the work.
    expect(dag('mocra_throughput_total', 'stage="node",operation="attempt",result="success",')).toBe(2);
    expect(dag('mocra_throughput_total', 'stage="node",operation="attempt",result="failure",')).toBe(1);
    expect(dag('mocra_errors_total', 'stage="node",kind="dag",code="MOCRA_ERR_DAG_NODE_TIMEOUT",')).toBe(1);
    expect(dag('mocra_dag_retries_total', 'reason="backoff",')).toBe(1);
    expect(dag('mocra_dag_timeouts_total', 'scope="node",')).toBe(1);
    expect(dag('mocra_dag_run_guard_total', 'event="acquired",')).toBe(1);
    expect(dag('mocra_dag_run_guard_total', 'event="released",')).toBe(1);
    expect(dag('mocra_dag_checkpoint_writes_total', '')).toBe(3);
    const hits =
      (dag('mocra_dag_singleflight_hits_total', 'source="cache",') ?? 0) +
      (dag('mocra_dag_singleflight_hits_total', 'source="singleflight",') ?? 0);
    expect(hits).toBe(1);
    // Declared with no samples: nothing was fenced off.
    expect(text).toContain('# TYPE mocra_dag_fencing_rejections_total counter');
    expect(text).not.toMatch(/^mocra_dag_fencing_rejections_total\{/m);
    if (hasPromtool) {
      const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      expect(`${lint.stdout}${lint.stderr}`).toBe('');
      expect(lint.status).toBe(0);
    }

    const view = (await (await fetch(`${apiUrl}/observability/engine`)).json()) as {
      dag: Record<string, unknown>;
    };
    expect(view.dag).toEqual({
      runs: { success: 1, failure: 0 },
      attempts: { success: 2, failure: 1 },
      retries: 1,
      timeouts: 1,
      runGuard: { acquired: 1, contended: 0, lost: 0 },
      fencingRejections: 0,
      checkpointWrites: 3,
      singleflightHits: 1,
    });
    if (fs.existsSync(CHROMIUM)) await dashboardShowsTheRun(apiUrl);
  } finally {
    stop.abort();
    await running;
  }
});

/** The dashboard's "DAG jobs" card, in real Chromium, shows the run's counts without a page error. */
async function dashboardShowsTheRun(apiUrl: string): Promise<void> {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    await page.goto(`${apiUrl}/?interval=1000`);
    await page.waitForFunction(
      () => document.querySelector('[data-dag="checkpoint writes"]')?.textContent === '3',
      undefined,
      { timeout: 15_000 },
    );
    expect(await page.textContent('[data-dag="runs"]')).toBe('✓ 1 · ✕ 0');
    expect(await page.textContent('[data-dag="timeouts"]')).toBe('1');
    expect(await page.textContent('#dag-summary')).toBe('1 runs · 3 node attempts');
    expect(pageErrors).toEqual([]);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
}

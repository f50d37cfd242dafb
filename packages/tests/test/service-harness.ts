// Node processes of the service-node journeys (service-nodes.test.ts): spawn a worker script as a
// user runs one, wait (bounded) for what it prints and for conditions, call its control API.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';

export interface NodeProc {
  name: string;
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnNode(file: string, name: string, env: Record<string, string>): NodeProc {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', file], {
    cwd: path.resolve(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MOCRA_LOG_LEVEL: 'warn', ...env },
  });
  const p: NodeProc = {
    name,
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))),
  };
  child.stdout!.on('data', (d: Buffer) => {
    p.stdout += d;
  });
  child.stderr!.on('data', (d: Buffer) => {
    p.stderr += d;
  });
  return p;
}

export const running = (p: NodeProc): boolean => p.child.exitCode === null && p.child.signalCode === null;

/** Poll `probe` until it answers (bounded); fail with the nodes' stderr otherwise, or at once when one of `nodes` (those that must stay up meanwhile) ended. */
export async function until<T>(
  what: string,
  nodes: readonly NodeProc[],
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    const ended = nodes.find((p) => !running(p));
    if (ended !== undefined)
      throw new Error(`${ended.name} ended while waiting for ${what}:\n${ended.stderr}`);
    if (Date.now() > deadline) {
      const logs = nodes.map((p) => `${p.name}: ${p.stderr.slice(-2_000)}`).join('\n');
      throw new Error(`${what}: not within ${timeoutMs} ms\n${logs}`);
    }
    await sleep(50);
  }
}

/** The summary line a node prints when its run ends, after it exited (bounded). */
export async function report(
  p: NodeProc,
  timeoutMs = 30_000,
): Promise<{
  exit: { code: number | null; signal: NodeJS.Signals | null };
  summary: Record<string, unknown>;
}> {
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([
    p.exited,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${p.name} did not exit:\n${p.stderr.slice(-3_000)}`)),
        timeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  const line = p.stdout.trim().split('\n').at(-1) ?? '';
  return { exit, summary: line.startsWith('{') ? (JSON.parse(line) as Record<string, unknown>) : {} };
}

/** Call a node's control API (it printed `api <url>`). */
export async function callApi(
  p: NodeProc,
  apiKey: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const url = /^api (\S+)$/m.exec(p.stdout)?.[1];
  if (url === undefined) throw new Error(`${p.name} has not printed its API URL`);
  const res = await request(`${url}${route}`, {
    method: body === undefined && !route.startsWith('/control/') ? 'GET' : 'POST',
    headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    headersTimeout: 5_000,
    bodyTimeout: 5_000,
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

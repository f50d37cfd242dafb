/**
 * Real clusters of child processes on loopback for the multi-process tests and the benchmark:
 * one `node --import tsx --conditions=@mocra/source` process per node, each with its own LevelDB
 * directory, HTTP port, and a test client API (test/fixtures/cluster-node-main.ts). Nodes can be
 * SIGKILLed, SIGSTOPped/SIGCONTed and restarted on the same port and data.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import type { ClusterNodeOptions, ClusterStatus } from '../../src/index.js';

/** Node timing for the multi-process tests: fast elections, small snapshots (so restarts need them). */
export const TEST_NODE_OPTIONS: ClusterNodeOptions = {
  tickMs: 20,
  electionTicks: 15,
  heartbeatTicks: 3,
  requestTimeoutMs: 6000,
  attemptTimeoutMs: 1500,
  snapshotThreshold: 300,
  snapshotTrailingEntries: 50,
};

const entry = path.join(import.meta.dirname, '..', 'fixtures', 'cluster-node-main.ts');

export interface ProcNode {
  readonly id: string;
  readonly dataDir: string;
  raftAddr: string;
  clientAddr: string;
  clientPort: number;
  proc: ChildProcess | undefined;
  state: 'up' | 'stopped' | 'dead';
  log: string;
  /** Extra environment of this node's process (kept across restarts). */
  readonly env: Readonly<Record<string, string>>;
}

export type OpResult = { ok: true; value: unknown } | { ok: false; code: string; message: string };

export interface ProcessClusterOptions {
  readonly nodeOptions?: ClusterNodeOptions;
  /** Kept for debugging when set. */
  readonly keepData?: boolean;
}

export class ProcessCluster {
  readonly nodes = new Map<string, ProcNode>();
  #baseDir = '';
  readonly #options: ProcessClusterOptions;

  constructor(options: ProcessClusterOptions = {}) {
    this.#options = options;
  }

  async init(): Promise<void> {
    this.#baseDir = await mkdtemp(path.join(tmpdir(), 'mocra-cluster-'));
  }

  node(id: string): ProcNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  /** Start a new node: bootstrap when `seeds` is empty, else join through them. */
  async start(id: string, seeds: string[] = [], env: Record<string, string> = {}): Promise<ProcNode> {
    const n: ProcNode = {
      id,
      dataDir: path.join(this.#baseDir, id),
      raftAddr: '127.0.0.1:0',
      clientAddr: '',
      clientPort: 0,
      proc: undefined,
      state: 'dead',
      log: '',
      env,
    };
    this.nodes.set(id, n);
    await this.#spawn(n, seeds);
    return n;
  }

  /** Start a dead node again on its old port and data directory. */
  async restart(id: string): Promise<ProcNode> {
    const n = this.node(id);
    if (n.state !== 'dead') throw new Error(`${id} is not dead`);
    await this.#spawn(n, []);
    return n;
  }

  async #spawn(n: ProcNode, seeds: string[]): Promise<void> {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', entry], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        MOCRA_NODE_ID: n.id,
        MOCRA_HTTP_ADDR: n.raftAddr,
        MOCRA_DATA_DIR: n.dataDir,
        MOCRA_SEEDS: seeds.join(','),
        MOCRA_TEST_NODE_OPTIONS: JSON.stringify(this.#options.nodeOptions ?? {}),
        MOCRA_TEST_CLIENT_PORT: String(n.clientPort),
        ...n.env,
      },
    });
    n.proc = child;
    n.state = 'up';
    child.stderr!.on('data', (c: Buffer) => {
      n.log = (n.log + c.toString()).slice(-20_000);
    });
    child.on('exit', () => {
      if (n.proc === child) n.state = 'dead';
    });
    await new Promise<void>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`${n.id} did not start: ${n.log}`)), 60_000);
      child.stdout!.on('data', (c: Buffer) => {
        buf += c.toString();
        const m = /ready (\{.*\})\n/.exec(buf);
        if (m) {
          clearTimeout(timer);
          const info = JSON.parse(m[1]!) as { clientAddr: string; raftAddr: string };
          n.clientAddr = info.clientAddr;
          n.clientPort = Number(info.clientAddr.split(':')[1]);
          n.raftAddr = info.raftAddr;
          resolve();
        }
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${n.id} exited (${code ?? signal}) before it was ready: ${n.log}`));
      });
    });
  }

  kill(id: string): void {
    const n = this.node(id);
    if (n.state === 'stopped') n.proc?.kill('SIGCONT');
    n.proc?.kill('SIGKILL');
    n.state = 'dead';
  }

  pause(id: string): void {
    const n = this.node(id);
    n.proc?.kill('SIGSTOP');
    n.state = 'stopped';
  }

  resume(id: string): void {
    const n = this.node(id);
    n.proc?.kill('SIGCONT');
    n.state = 'up';
  }

  up(): ProcNode[] {
    return [...this.nodes.values()].filter((n) => n.state === 'up');
  }

  /** Call the test client API of `id`. Connection refused = the request never reached the node. */
  async op(id: string, body: Record<string, unknown>, timeoutMs = 8000): Promise<OpResult> {
    const n = this.node(id);
    try {
      const res = await request(`http://${n.clientAddr}/op`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return (await res.body.json()) as OpResult;
    } catch (err) {
      const code = (err as { code?: string }).code === 'ECONNREFUSED' ? 'ECONNREFUSED' : 'CLIENT_TIMEOUT';
      return { ok: false, code, message: (err as Error).message };
    }
  }

  async post(id: string, route: string, body: unknown): Promise<unknown> {
    const res = await request(`http://${this.node(id).clientAddr}${route}`, {
      method: body === undefined ? 'GET' : 'POST',
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      headersTimeout: 600_000,
      bodyTimeout: 600_000,
    });
    return res.body.json();
  }

  async status(id: string): Promise<ClusterStatus | undefined> {
    const r = await this.op(id, { op: 'status' }, 3000);
    return r.ok ? (r.value as ClusterStatus) : undefined;
  }

  /** The leader every responsive node agrees on, if any. */
  async agreedLeader(): Promise<string | undefined> {
    const statuses = (await Promise.all(this.up().map((n) => this.status(n.id)))).filter(
      (s): s is ClusterStatus => s !== undefined,
    );
    const leaders = statuses.filter((s) => s.role === 'leader');
    if (leaders.length !== 1) return undefined;
    const leader = leaders[0]!;
    return statuses.every((s) => s.leaderId === leader.id || s.role === 'removed') ? leader.id : undefined;
  }

  async close(): Promise<void> {
    for (const n of this.nodes.values()) {
      if (n.state !== 'dead') {
        if (n.state === 'stopped') n.proc?.kill('SIGCONT');
        n.proc?.kill('SIGKILL');
      }
    }
    await new Promise((r) => setTimeout(r, 100));
    if (!this.#options.keepData && this.#baseDir) await rm(this.#baseDir, { recursive: true, force: true });
  }
}

/** Poll `check` until it returns a value other than undefined/false, or throw after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/**
 * A real Raft cluster inside the test process: three `@mocra/cluster` nodes with their LevelDB
 * logs in a temp directory, talking HTTP on loopback, with fast timing (short elections, a sweep
 * every 25 ms so key TTLs lapse promptly). Shared by the Raft coordination and cluster tests.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ClusterConfig, type ClusterNode, type ClusterNodeOptions, createClusterNode } from '@mocra/cluster';

export const FAST_NODE_OPTIONS: ClusterNodeOptions = {
  tickMs: 20,
  electionTicks: 15,
  heartbeatTicks: 3,
  requestTimeoutMs: 6_000,
  attemptTimeoutMs: 1_500,
  sweepIntervalMs: 25,
};

export interface InProcessCluster {
  readonly nodes: ClusterNode[];
  readonly dir: string;
  leader(): Promise<ClusterNode>;
  close(): Promise<void>;
}

export async function startInProcessCluster(
  size = 3,
  options: ClusterNodeOptions = FAST_NODE_OPTIONS,
): Promise<InProcessCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mocra-core-raft-'));
  const nodes: ClusterNode[] = [];
  try {
    const first = await createClusterNode(
      ClusterConfig.bootstrap('n1', '127.0.0.1:0', path.join(dir, 'n1')),
      options,
    );
    nodes.push(first);
    await first.waitForLeader();
    for (let i = 2; i <= size; i++) {
      nodes.push(
        await createClusterNode(
          ClusterConfig.join(`n${i}`, '127.0.0.1:0', path.join(dir, `n${i}`), first.addr),
          options,
        ),
      );
    }
    await waitUntil(`${size} voters`, () => first.status().voters.length === size || undefined, 30_000);
  } catch (err) {
    for (const n of nodes) await n.close({ transferLeadership: false }).catch(() => {});
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    nodes,
    dir,
    leader: () => waitUntil('a leader', () => nodes.find((n) => n.isLeader), 10_000),
    async close() {
      for (const n of nodes) await n.close({ transferLeadership: false }).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Poll `probe` (bounded) until it returns a value. */
export async function waitUntil<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${String(last)})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

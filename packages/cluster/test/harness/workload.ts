/**
 * A client workload against a ProcessCluster: several concurrent clients doing put/get/CAS on a
 * few shared keys, increments on a counter, and puts of unique keys (each must survive). Every
 * operation is recorded with its call and return time for the linearizability checker; an
 * operation whose outcome is unknown (timeout, a node killed under it) stays in the history with
 * ret = Infinity.
 */
import { performance } from 'node:perf_hooks';
import type { HistoryOp, KvInput, KvOutput } from '../sim/lincheck.js';
import type { Prng } from '../sim/prng.js';
import type { OpResult, ProcessCluster } from './process-cluster.js';

const NOT_APPLIED = new Set([
  'MOCRA_ERR_CLUSTER_NO_LEADER',
  'MOCRA_ERR_CLUSTER_NOT_LEADER',
  'MOCRA_ERR_CLUSTER_REMOVED',
  'ECONNREFUSED',
]);

export class KvWorkload {
  readonly history: Array<HistoryOp<KvInput, KvOutput> | undefined> = [];
  /** Unique keys whose put was acknowledged, with their value. */
  readonly acked = new Map<string, string>();
  readonly counts = { ok: 0, unknown: 0, failed: 0 };
  #running = false;
  #loops: Promise<void>[] = [];
  readonly #cluster: ProcessCluster;
  readonly #prng: Prng;
  #seq = 0;

  constructor(cluster: ProcessCluster, prng: Prng) {
    this.#cluster = cluster;
    this.#prng = prng;
  }

  start(clients: number): void {
    this.#running = true;
    for (let c = 0; c < clients; c++) this.#loops.push(this.#client(`c${c}`));
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#loops);
  }

  ops(): HistoryOp<KvInput, KvOutput>[] {
    return this.history.filter((h): h is HistoryOp<KvInput, KvOutput> => h !== undefined);
  }

  async #client(name: string): Promise<void> {
    const p = this.#prng;
    let lastSeen: string | null = null;
    while (this.#running) {
      const up = this.#cluster.up();
      if (up.length === 0) {
        await sleep(20);
        continue;
      }
      const target = p.pick(up).id;
      const roll = p.next();
      let input: KvInput;
      let body: Record<string, unknown>;
      let unique: string | undefined;
      if (roll < 0.25) {
        const key = p.pick(['k0', 'k1', 'k2']);
        const value = `${name}-${++this.#seq}`;
        input = { op: 'put', key, value };
        body = { op: 'set', key, value };
      } else if (roll < 0.45) {
        const key = p.pick(['k0', 'k1', 'k2']);
        input = { op: 'get', key };
        body = { op: 'get', key };
      } else if (roll < 0.6) {
        const key = p.pick(['k0', 'k1', 'k2']);
        const next = `${name}-${++this.#seq}`;
        input = { op: 'cas', key, expected: lastSeen, next };
        body = { op: 'cas', key, expected: lastSeen, next };
      } else if (roll < 0.75) {
        input = { op: 'incr', key: 'ctr', by: 1 };
        body = { op: 'incr', key: 'ctr', by: 1 };
      } else {
        unique = `u/${name}/${++this.#seq}`;
        input = { op: 'put', key: unique, value: unique };
        body = { op: 'set', key: unique, value: unique };
      }
      const call = performance.now();
      const slot = this.history.length;
      this.history.push({ client: name, input, output: undefined, call, ret: Number.POSITIVE_INFINITY });
      const r: OpResult = await this.#cluster.op(target, body, 10_000);
      if (r.ok) {
        const output = (input.op === 'put' ? 'ok' : r.value) as KvOutput;
        this.history[slot] = { client: name, input, output, call, ret: performance.now() };
        if (input.op === 'get') lastSeen = output as string | null;
        else if (input.op === 'put' && !unique) lastSeen = input.value;
        if (unique) this.acked.set(unique, unique);
        this.counts.ok++;
      } else if (input.op === 'get' || NOT_APPLIED.has(r.code)) {
        this.history[slot] = undefined;
        this.counts.failed++;
      } else {
        this.counts.unknown++;
      }
      await sleep(p.int(0, 15));
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

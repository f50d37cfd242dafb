/**
 * A synchronous, in-memory network of RaftCore instances for scenario tests (etcd's raft_test.go
 * `network` in spirit). Messages are queued and delivered on demand; links can be cut one way or
 * both; each node's "disk" is a plain object that persists a Ready at once unless the node is set
 * to hold its writes. Nothing here is asynchronous, so every test is exactly reproducible.
 */
import type { LogEntry, NodeId, RaftMessage, Ready, Snapshot } from '../../src/internal.js';
import { encodeConfiguration, RaftCore } from '../../src/internal.js';
import type { RaftCoreOptions } from '../../src/raft/raft-core.js';

export interface CoreDisk {
  term: number;
  vote: NodeId | null;
  commit: number;
  snapshot: Snapshot | undefined;
  entries: LogEntry[];
}

export interface CoreNode {
  id: NodeId;
  core: RaftCore;
  disk: CoreDisk;
  applied: LogEntry[];
  readStates: Array<{ ctx: string; index: number }>;
  /** When set, Readies are taken but not persisted until `release(id)`. */
  holdWrites: boolean;
  held: Ready[];
}

export type CoreOptions = Partial<Omit<RaftCoreOptions, 'id' | 'random'>>;

/** xorshift32: deterministic randomness for election timeouts. */
export function seededRandom(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

export function bootstrapEntry(voters: readonly NodeId[], learners: readonly NodeId[] = []): LogEntry {
  const members = [
    ...voters.map((id) => ({ id, addr: `${id}:1`, voter: true })),
    ...learners.map((id) => ({ id, addr: `${id}:1`, voter: false })),
  ].sort((a, b) => (a.id < b.id ? -1 : 1));
  return { index: 1, term: 1, kind: 'config', data: encodeConfiguration({ members, retired: [] }) };
}

export class CoreNetwork {
  readonly nodes = new Map<NodeId, CoreNode>();
  queue: RaftMessage[] = [];
  /** "a->b" means messages from a to b are dropped. */
  readonly cut = new Set<string>();
  /** Message types dropped everywhere (e.g. 'append'). */
  readonly dropTypes = new Set<string>();
  readonly delivered: RaftMessage[] = [];
  #seed = 1;
  readonly options: CoreOptions;

  constructor(voters: readonly NodeId[], options: CoreOptions = {}, learners: readonly NodeId[] = []) {
    this.options = options;
    const boot = bootstrapEntry(voters, learners);
    for (const id of [...voters, ...learners]) this.addNode(id, [boot]);
  }

  /** Add a node with the given log (empty = a new node waiting to be contacted). */
  addNode(id: NodeId, entries: LogEntry[] = [], seedOffset = 0): CoreNode {
    const disk: CoreDisk = {
      term: entries.length > 0 ? entries[entries.length - 1]!.term : 0,
      vote: null,
      commit: entries.length > 0 ? 1 : 0,
      snapshot: undefined,
      entries: [...entries],
    };
    const node = this.#make(id, disk, seedOffset);
    this.nodes.set(id, node);
    return node;
  }

  #make(id: NodeId, disk: CoreDisk, seedOffset: number): CoreNode {
    const core = new RaftCore(
      {
        electionTicks: 10,
        heartbeatTicks: 1,
        ...this.options,
        id,
        random: seededRandom(this.#seed++ * 7919 + seedOffset),
      },
      {
        hardState: { term: disk.term, vote: disk.vote, commit: disk.commit },
        snapshot: disk.snapshot,
        entries: disk.entries,
      },
    );
    return { id, core, disk, applied: [], readStates: [], holdWrites: false, held: [] };
  }

  node(id: NodeId): CoreNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  core(id: NodeId): RaftCore {
    return this.node(id).core;
  }

  /** Simulate a crash and restart: the node comes back from its disk only. */
  restart(id: NodeId): CoreNode {
    const old = this.node(id);
    const fresh = this.#make(id, structuredClone(old.disk), 0);
    fresh.applied = [];
    this.nodes.set(id, fresh);
    this.queue = this.queue.filter((m) => m.to !== id && m.from !== id);
    return fresh;
  }

  /** Drain every node's Ready (persisting unless held) and collect outgoing messages. */
  flush(): void {
    for (const n of this.nodes.values()) this.#drain(n);
  }

  #drain(n: CoreNode): void {
    this.queue.push(...n.core.takeUrgentMessages());
    let guard = 0;
    while (n.core.hasReady() && guard++ < 1000) {
      const rd = n.core.ready();
      if (n.holdWrites && (rd.hardState || rd.entries.length > 0 || rd.snapshot)) {
        n.held.push(rd);
        // A held write blocks the pipeline, as the real host does.
        break;
      }
      this.#finish(n, rd);
      this.queue.push(...n.core.takeUrgentMessages());
      if (n.held.length > 0) break;
    }
  }

  #finish(n: CoreNode, rd: Ready): void {
    const d = n.disk;
    if (rd.snapshot) {
      d.snapshot = rd.snapshot;
      d.entries = [];
      n.applied.push({
        index: rd.snapshot.meta.index,
        term: rd.snapshot.meta.term,
        kind: 'noop',
        data: 'SNAPSHOT',
      });
    }
    if (rd.entries.length > 0) {
      const first = rd.entries[0]!.index;
      d.entries = d.entries.filter((e) => e.index < first).concat(rd.entries.map((e) => ({ ...e })));
    }
    if (rd.hardState) {
      d.term = rd.hardState.term;
      d.vote = rd.hardState.vote;
      d.commit = rd.hardState.commit;
    }
    this.queue.push(...rd.messages);
    n.applied.push(...rd.committed);
    n.readStates.push(...rd.readStates);
    n.core.advance(rd);
  }

  /** Let a node's held writes land. */
  release(id: NodeId): void {
    const n = this.node(id);
    n.holdWrites = false;
    const held = n.held;
    n.held = [];
    for (const rd of held) this.#finish(n, rd);
    this.#drain(n);
  }

  /** Deliver queued messages (and what they cause) until nothing moves, or `maxRounds`. */
  stabilize(maxRounds = 200): void {
    for (let round = 0; round < maxRounds; round++) {
      this.flush();
      if (this.queue.length === 0) return;
      const batch = this.queue;
      this.queue = [];
      for (const m of batch) this.deliver(m);
    }
    throw new Error('network did not stabilize');
  }

  /** Deliver one message now (unless its link is cut). */
  deliver(m: RaftMessage): void {
    if (this.cut.has(`${m.from}->${m.to}`) || this.dropTypes.has(m.type)) return;
    const n = this.nodes.get(m.to);
    if (!n) return;
    this.delivered.push(m);
    n.core.step(m);
  }

  /** Take the queued messages without delivering them (to reorder, duplicate or drop in a test). */
  take(filter: (m: RaftMessage) => boolean = () => true): RaftMessage[] {
    this.flush();
    const out = this.queue.filter(filter);
    this.queue = this.queue.filter((m) => !filter(m));
    return out;
  }

  isolate(id: NodeId): void {
    for (const other of this.nodes.keys()) {
      if (other === id) continue;
      this.cut.add(`${id}->${other}`);
      this.cut.add(`${other}->${id}`);
    }
  }

  heal(): void {
    this.cut.clear();
    this.dropTypes.clear();
  }

  tick(id: NodeId, times = 1): void {
    for (let i = 0; i < times; i++) this.core(id).tick();
  }

  tickAll(times = 1): void {
    for (let i = 0; i < times; i++) for (const n of this.nodes.values()) n.core.tick();
  }

  /** Campaign and settle: convenience for "make `id` the leader". */
  elect(id: NodeId): void {
    this.core(id).campaign();
    this.stabilize();
  }

  propose(id: NodeId, data: string): number {
    const r = this.core(id).propose(data);
    if (!r.ok) throw new Error(`propose on ${id} failed: ${r.reason}`);
    return r.index;
  }

  leaders(): NodeId[] {
    return [...this.nodes.values()].filter((n) => n.core.role === 'leader').map((n) => n.id);
  }

  /** The (index, term, data) list of a node's in-memory log from `from`. */
  log(id: NodeId, from = 1): Array<[number, number, string]> {
    const c = this.core(id);
    const out: Array<[number, number, string]> = [];
    for (let i = Math.max(from, c.firstIndex); i <= c.lastIndex; i++) {
      const e = c.entryAt(i)!;
      out.push([e.index, e.term, e.kind === 'command' ? e.data : e.kind]);
    }
    return out;
  }
}

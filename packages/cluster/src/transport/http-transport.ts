import { Pool } from 'undici';
import { ClusterTimeoutError, InvalidClusterMessageError } from '../errors.js';
import type { NodeRequest, NodeResponse, PeerTransport } from '../node/ports.js';
import type { NodeId, RaftMessage } from '../raft/types.js';
import { FROM_ADDR_HEADER, SECRET_HEADER } from './wire.js';

export interface HttpTransportOptions {
  /** This node's own `host:port`, sent with Raft messages so a joining peer can answer. */
  readonly selfAddr?: string;
  /** Shared secret sent with every request (`x-mocra-cluster-secret`). @default undefined (none) */
  readonly secret?: string;
  /** Deadline of one `POST /raft/messages`; the batch is dropped after it (Raft resends). @default 2000 */
  readonly messageTimeoutMs?: number;
  /** Messages queued for one peer while its posts are in flight; the oldest are dropped first. @default 4096 */
  readonly maxQueuedMessages?: number;
  /** Raft-message posts in flight per peer, pipelined on one connection (so they stay in order). @default 4 */
  readonly messagePipelining?: number;
  /** Connections per peer for forwarded requests (proposals, joins), which wait for a commit. @default 64 */
  readonly callConnectionsPerPeer?: number;
}

interface PeerQueue {
  readonly addr: string;
  pending: RaftMessage[];
  inFlight: number;
}

/**
 * The client side of node-to-node HTTP, on undici. Raft messages to one peer travel on one
 * connection with HTTP/1.1 pipelining (so they arrive in order), at most `messagePipelining`
 * posts at a time; whatever piles up meanwhile goes out together in the next post, so under load
 * a follower gets few large batches instead of many small ones, and a hung peer costs a few
 * requests, not a pile of them. Forwarded requests, which wait for a commit, use a separate pool:
 * they must never sit in front of the Raft traffic that would commit them.
 */
export class HttpTransport implements PeerTransport {
  readonly #secret: string | undefined;
  readonly #selfAddr: string | undefined;
  readonly #messageTimeoutMs: number;
  readonly #maxQueued: number;
  readonly #pipelining: number;
  readonly #callConnections: number;
  readonly #messagePools = new Map<string, Pool>();
  readonly #callPools = new Map<string, Pool>();
  readonly #queues = new Map<NodeId, PeerQueue>();
  #closed = false;
  #removedListener: (() => void) | undefined;

  constructor(options: HttpTransportOptions = {}) {
    this.#secret = options.secret;
    this.#selfAddr = options.selfAddr;
    this.#messageTimeoutMs = options.messageTimeoutMs ?? 2000;
    this.#maxQueued = options.maxQueuedMessages ?? 4096;
    this.#pipelining = options.messagePipelining ?? 4;
    this.#callConnections = options.callConnectionsPerPeer ?? 64;
  }

  send(to: NodeId, addr: string, messages: readonly RaftMessage[]): void {
    if (this.#closed || messages.length === 0) return;
    let q = this.#queues.get(to);
    if (!q || q.addr !== addr) {
      q = { addr, pending: [], inFlight: 0 };
      this.#queues.set(to, q);
    }
    q.pending.push(...messages);
    if (q.pending.length > this.#maxQueued) q.pending.splice(0, q.pending.length - this.#maxQueued);
    if (q.inFlight < this.#pipelining) this.#flush(q);
  }

  #flush(q: PeerQueue): void {
    if (this.#closed || q.pending.length === 0) return;
    const batch = q.pending;
    q.pending = [];
    q.inFlight++;
    this.#pool(this.#messagePools, q.addr, { connections: 1, pipelining: this.#pipelining })
      .request({
        method: 'POST',
        path: '/raft/messages',
        headers:
          this.#selfAddr === undefined
            ? this.#headers()
            : { ...this.#headers(), [FROM_ADDR_HEADER]: this.#selfAddr },
        body: JSON.stringify(batch),
        headersTimeout: this.#messageTimeoutMs,
        bodyTimeout: this.#messageTimeoutMs,
        signal: AbortSignal.timeout(this.#messageTimeoutMs),
      })
      .then(
        async (res) => {
          await res.body.dump();
          if (res.statusCode === 410) this.#removedListener?.();
        },
        () => {
          // Dropped: Raft treats the network as lossy and sends again.
        },
      )
      .finally(() => {
        q.inFlight--;
        this.#flush(q);
      });
  }

  onRemoved(listener: () => void): void {
    this.#removedListener = listener;
  }

  async call(addr: string, request: NodeRequest, timeoutMs: number): Promise<NodeResponse> {
    if (this.#closed) throw new InvalidClusterMessageError('transport is closed');
    let res: Awaited<ReturnType<Pool['request']>>;
    try {
      res = await this.#pool(this.#callPools, addr, {
        connections: this.#callConnections,
        pipelining: 1,
      }).request({
        method: 'POST',
        path: '/raft/request',
        headers: this.#headers(),
        body: JSON.stringify(request),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (cause) {
      if (cause instanceof Error && (cause.name === 'TimeoutError' || cause.name === 'AbortError')) {
        throw new ClusterTimeoutError(`${request.kind} via ${addr}`, timeoutMs, { cause });
      }
      throw cause;
    }
    const text = await res.body.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new InvalidClusterMessageError(`${addr} answered ${res.statusCode} with a body that is not JSON`);
    }
    if (typeof body !== 'object' || body === null || typeof (body as { ok?: unknown }).ok !== 'boolean') {
      throw new InvalidClusterMessageError(`${addr} answered with something that is not a node response`);
    }
    return body as NodeResponse;
  }

  #headers(): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json' };
    if (this.#secret !== undefined) h[SECRET_HEADER] = this.#secret;
    return h;
  }

  #pool(pools: Map<string, Pool>, addr: string, shape: { connections: number; pipelining: number }): Pool {
    let pool = pools.get(addr);
    if (!pool) {
      pool = new Pool(`http://${addr}`, {
        ...shape,
        keepAliveTimeout: 10_000,
        connect: { timeout: 1000 },
      });
      pools.set(addr, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const pools = [...this.#messagePools.values(), ...this.#callPools.values()];
    this.#messagePools.clear();
    this.#callPools.clear();
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
  }
}

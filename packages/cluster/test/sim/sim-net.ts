/**
 * The simulated network: per-packet drops, duplicates and random delays (which reorder), one-way
 * link cuts (symmetric partitions are two cuts), and request/response calls that time out when
 * either leg is lost. A packet is one `send` of a batch of Raft messages, as one HTTP request is.
 * A packet still in flight when its receiver restarts may reach the new process (it sat in the
 * sender's queue, as the HTTP transport's pending batches do), so an answer can meet a node that
 * has forgotten what it said before the crash.
 */
import type { NodeRequest, NodeResponse, PeerHandler, PeerTransport } from '../../src/index.js';
import { ClusterTimeoutError } from '../../src/index.js';
import type { NodeId, RaftMessage } from '../../src/internal.js';
import type { Prng } from './prng.js';
import type { SimWorld } from './sim-world.js';

export interface NetFaults {
  drop: number;
  duplicate: number;
  /** Chance that a packet in flight to a node that restarts reaches the new incarnation. */
  survive: number;
  /** One-way delay in ms, uniform in [min, max]. */
  delayMs: [number, number];
}

interface Endpoint {
  readonly id: NodeId;
  readonly owner: string;
  readonly handler: PeerHandler;
}

export class SimNet {
  readonly #world: SimWorld;
  readonly #prng: Prng;
  readonly faults: NetFaults;
  readonly #endpoints = new Map<string, Endpoint>(); // by addr
  /** "a->b": packets from node a to node b are lost. */
  readonly cuts = new Set<string>();
  packets = 0;
  dropped = 0;

  constructor(world: SimWorld, prng: Prng, faults: NetFaults) {
    this.#world = world;
    this.#prng = prng;
    this.faults = faults;
  }

  register(addr: string, id: NodeId, owner: string, handler: PeerHandler): void {
    this.#endpoints.set(addr, { id, owner, handler });
  }

  unregister(addr: string): void {
    this.#endpoints.delete(addr);
  }

  #lost(from: NodeId, to: NodeId): boolean {
    if (this.cuts.has(`${from}->${to}`)) return true;
    return this.#prng.chance(this.faults.drop);
  }

  #delay(): number {
    return this.#prng.int(this.faults.delayMs[0], this.faults.delayMs[1]);
  }

  /**
   * Deliver `messages` to the node at `addr` after `delayMs`, as if `from` had sent them then.
   * The vote-crash schedule uses it for TimeoutNow messages of two leadership transfers that the
   * network held back and delivered together.
   */
  deliverLater(
    from: NodeId,
    to: NodeId,
    addr: string,
    messages: readonly RaftMessage[],
    delayMs: number,
  ): void {
    this.#world.schedule(delayMs, () => {
      const ep = this.#endpoints.get(addr);
      if (ep?.id === to && !this.#world.isPaused(ep.owner) && !ep.handler.isRetired(from))
        ep.handler.handleMessages(messages);
    });
  }

  /** The transport one node incarnation uses. */
  transport(from: NodeId, fromAddr: string, owner: string): PeerTransport {
    let removed: (() => void) | undefined;
    return {
      onRemoved: (listener) => {
        removed = listener;
      },
      send: (to, addr, messages) => {
        this.packets++;
        const copies = this.#prng.chance(this.faults.duplicate) ? 2 : 1;
        const target = this.#endpoints.get(addr);
        if (!target || target.id !== to) return;
        for (let c = 0; c < copies; c++) {
          if (this.#lost(from, to)) {
            this.dropped++;
            continue;
          }
          const batch = messages.map((m) => structuredClone(m)) as RaftMessage[];
          const survives = this.#prng.chance(this.faults.survive);
          // Reaches whatever process listens at `addr` on arrival (held while it is paused).
          const deliver = (): void => {
            const ep = this.#endpoints.get(addr);
            if (!ep || ep.id !== to || (ep.owner !== target.owner && !survives)) return;
            if (this.#world.isPaused(ep.owner)) {
              this.#world.schedule(0, deliver, ep.owner);
              return;
            }
            if (ep.handler.isRetired(from)) {
              // The HTTP 410 answer, travelling back to the sender.
              this.#world.schedule(this.#delay(), () => removed?.(), owner);
              return;
            }
            ep.handler.handleMessages(batch, fromAddr);
          };
          this.#world.schedule(this.#delay(), deliver);
        }
      },
      call: (addr, request, timeoutMs) =>
        new Promise<NodeResponse>((resolve, reject) => {
          let done = false;
          this.#world.schedule(
            timeoutMs,
            () => {
              if (done) return;
              done = true;
              reject(new ClusterTimeoutError(`${request.kind} via ${addr}`, timeoutMs));
            },
            owner,
          );
          const target = this.#endpoints.get(addr);
          if (!target || this.#lost(from, target.id)) return;
          const req = structuredClone(request) as NodeRequest;
          this.#world.schedule(
            this.#delay(),
            () => {
              const ep = this.#endpoints.get(addr);
              if (!ep || ep.owner !== target.owner) return;
              ep.handler.handleRequest(req).then((resp) => {
                if (this.#lost(target.id, from)) return;
                this.#world.schedule(
                  this.#delay(),
                  () => {
                    if (done) return;
                    done = true;
                    resolve(structuredClone(resp));
                  },
                  owner,
                );
              });
            },
            target.owner,
          );
        }),
      close: async () => {},
    };
  }
}

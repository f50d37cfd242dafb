/**
 * Partition ownership over live members by rendezvous (highest-random-weight) hashing, built
 * once on top of {@link Coordination} membership.
 *
 * owner(key) = the member m with the highest hash(m ‖ key); ties go to the larger id.
 * When a member joins, only the keys it now wins move (about 1/N of them, all to it); when one
 * leaves, only its keys move, spread over the others. Every member computes the same owner from
 * the same member list, with no coordination beyond agreeing on who is alive.
 */

import { InvalidArgumentError } from '../errors.js';
import { hash32 } from '../queue/hash.js';
import type { Coordination } from './types.js';

/** The owner of `key` among `members` (ids), or undefined when there are none. */
export function rendezvousOwner(key: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const m of members) {
    const score = hash32(`${m}\u0000${key}`);
    if (score > bestScore || (score === bestScore && best !== undefined && m > best)) {
      best = m;
      bestScore = score;
    }
  }
  return best;
}

export interface PartitionOwnershipOptions {
  /** How often the member list is read again. @default 1000 */
  refreshMs?: number;
}

export function createPartitionOwnership(
  coordination: Coordination,
  options: PartitionOwnershipOptions = {},
): PartitionOwnership {
  return new PartitionOwnership(coordination, options);
}

export class PartitionOwnership {
  readonly refreshMs: number;
  readonly #coordination: Coordination;
  #members: readonly string[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #listeners = new Set<(members: readonly string[]) => void>();

  constructor(coordination: Coordination, options: PartitionOwnershipOptions = {}) {
    this.#coordination = coordination;
    this.refreshMs = options.refreshMs ?? 1_000;
    if (!(this.refreshMs > 0)) throw new InvalidArgumentError(`refreshMs must be > 0, got ${this.refreshMs}`);
  }

  /** Read the members now, then every `refreshMs` (a failed read keeps the last known list). */
  async start(): Promise<void> {
    await this.refresh();
    if (!this.#timer) {
      this.#timer = setInterval(() => {
        this.refresh().catch(() => {});
      }, this.refreshMs);
      this.#timer.unref();
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Read the live members; listeners hear about it when the list changed. */
  async refresh(): Promise<readonly string[]> {
    const ids = (await this.#coordination.members()).map((m) => m.id).sort();
    const changed = ids.length !== this.#members.length || ids.some((id, i) => id !== this.#members[i]);
    this.#members = ids;
    if (changed) for (const listener of this.#listeners) listener(ids);
    return ids;
  }

  /** The live members as of the last refresh, sorted. */
  members(): readonly string[] {
    return this.#members;
  }

  ownerOf(key: string): string | undefined {
    return rendezvousOwner(key, this.#members);
  }

  owns(key: string): boolean {
    return this.ownerOf(key) === this.#coordination.nodeId;
  }

  /** Which of partitions 0 … count-1 this member owns (e.g. NATS `ownedPartitions`). */
  ownedPartitions(count: number): number[] {
    const out: number[] = [];
    for (let p = 0; p < count; p++) if (this.owns(`partition:${p}`)) out.push(p);
    return out;
  }

  /** Called with the new member list whenever it changes. Returns an unsubscribe function. */
  onChange(listener: (members: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

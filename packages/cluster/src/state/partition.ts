/**
 * Partition ownership by rendezvous (highest-random-weight) hashing. Every member scores every
 * partition; the highest score owns it. Adding a member moves only the partitions it now wins,
 * about 1/N of them; removing one moves only its own. Same inputs, same owner, on every node.
 */

/** Default number of partitions keys are hashed into. */
export const DEFAULT_PARTITION_COUNT = 256;

/** FNV-1a, 32 bit, over the UTF-16 code units of `text`. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h ^= c & 0xff;
    h = Math.imul(h, 0x01000193);
    h ^= c >>> 8;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** MurmurHash3's finalizer: spreads FNV's weak low bits so nearby inputs get unrelated scores. */
function mix32(h: number): number {
  let x = h >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The partition (0 ≤ p < count) a key such as an account id belongs to. */
export function partitionOf(key: string, count = DEFAULT_PARTITION_COUNT): number {
  if (!Number.isSafeInteger(count) || count <= 0)
    throw new RangeError('partition count must be a positive integer');
  return mix32(fnv1a32(key)) % count;
}

/** The rendezvous score of `member` for `partition`. */
export function rendezvousScore(member: string, partition: number): number {
  return mix32(fnv1a32(`${member}\u0000${partition}`));
}

/** The member that owns `partition`, or undefined when there are no members. Ties go to the larger id. */
export function rendezvousOwner(partition: number, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const m of members) {
    const s = rendezvousScore(m, partition);
    if (s > bestScore || (s === bestScore && best !== undefined && m > best)) {
      best = m;
      bestScore = s;
    }
  }
  return best;
}

/** Every partition `member` owns among `members`. */
export function partitionsOwnedBy(
  member: string,
  members: readonly string[],
  count = DEFAULT_PARTITION_COUNT,
): number[] {
  const owned: number[] = [];
  for (let p = 0; p < count; p++) if (rendezvousOwner(p, members) === member) owned.push(p);
  return owned;
}

/**
 * The leader's view of one follower (etcd calls it Progress).
 *
 *   probe      ── one AppendEntries at a time until the follower's position is known
 *   replicate  ── optimistic pipelining: `next` runs ahead of `match` by up to `maxInflight` messages
 *   snapshot   ── an InstallSnapshot is in flight; nothing else is sent until it is answered
 */
export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** Probe: an append is out and unanswered. */
  probeSent = false;
  /** Snapshot: the index of the snapshot sent, and ticks since it was sent. */
  pendingSnapshot = 0;
  snapshotTicks = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** Leader ticks since this follower last answered (the dead-voter rule reads it). */
  silentTicks = 0;
  /** Last index of each append in flight, oldest first (replicate state only). */
  readonly inflight: number[] = [];
  readonly maxInflight: number;

  constructor(next: number, maxInflight: number) {
    this.next = next;
    this.maxInflight = maxInflight;
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflight.length >= this.maxInflight;
      case 'snapshot':
        return true;
    }
  }

  becomeProbe(): void {
    if (this.state === 'snapshot') {
      this.next = Math.max(this.match + 1, this.pendingSnapshot + 1);
    } else {
      this.next = this.match + 1;
    }
    this.state = 'probe';
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.inflight.length = 0;
  }

  becomeReplicate(): void {
    this.state = 'replicate';
    this.next = this.match + 1;
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.inflight.length = 0;
  }

  becomeSnapshot(index: number): void {
    this.state = 'snapshot';
    this.pendingSnapshot = index;
    this.snapshotTicks = 0;
    this.probeSent = false;
    this.inflight.length = 0;
  }

  /** A success response for `index`. Returns whether it told us anything new. */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (index > this.match) {
      this.match = index;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * A rejection of an append whose prevIndex was `rejected`. Returns false when the rejection is
   * stale (a reordered or duplicated reply), so it must not move `next` backwards.
   */
  maybeDecrTo(rejected: number, probeFrom: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, probeFrom + 1), this.match + 1, 1);
    this.probeSent = false;
    return true;
  }

  sentEntries(lastIndex: number): void {
    if (this.state === 'replicate') {
      this.next = lastIndex + 1;
      this.inflight.push(lastIndex);
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  freeInflightTo(index: number): void {
    let k = 0;
    while (k < this.inflight.length && this.inflight[k]! <= index) k++;
    if (k > 0) this.inflight.splice(0, k);
  }

  freeFirstInflight(): void {
    this.inflight.shift();
  }
}

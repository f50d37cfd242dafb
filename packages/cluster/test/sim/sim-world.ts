/**
 * Virtual time and the event queue of the simulator: a binary heap ordered by (time, sequence).
 * The world runs one event at a time and then lets every promise reaction it caused settle
 * (`setImmediate` runs only once the microtask queue is empty), so async code inside the nodes
 * runs to its next wait before the next event — the same interleaving on every replay.
 */

interface SimEvent {
  readonly t: number;
  readonly seq: number;
  readonly owner: string | undefined;
  readonly fn: () => void;
}

export class SimWorld {
  now = 0;
  #seq = 0;
  #heap: SimEvent[] = [];
  /** Owners whose events are held (paused nodes): they are replayed on resume. */
  readonly #paused = new Map<string, SimEvent[]>();
  /** Owners whose pending events are void (crashed incarnations). */
  readonly #dead = new Set<string>();
  eventsRun = 0;

  /** Run `fn` at `now + delay`. `owner` ties it to a node incarnation (paused/killed with it). */
  schedule(delay: number, fn: () => void, owner?: string): void {
    const ev: SimEvent = { t: this.now + Math.max(0, delay), seq: this.#seq++, owner, fn };
    this.#push(ev);
  }

  pause(owner: string): void {
    if (!this.#paused.has(owner)) this.#paused.set(owner, []);
  }

  resume(owner: string): void {
    const held = this.#paused.get(owner);
    if (!held) return;
    this.#paused.delete(owner);
    // Everything the node missed happens now, in the order it was due.
    for (const ev of held) this.#push({ ...ev, t: this.now, seq: this.#seq++ });
  }

  isPaused(owner: string): boolean {
    return this.#paused.has(owner);
  }

  kill(owner: string): void {
    this.#dead.add(owner);
    this.#paused.delete(owner);
  }

  get pending(): number {
    return this.#heap.length;
  }

  /** Run the next event; false when there is none. */
  step(): boolean {
    const ev = this.#pop();
    if (!ev) return false;
    this.now = Math.max(this.now, ev.t);
    if (ev.owner !== undefined) {
      if (this.#dead.has(ev.owner)) return true;
      const held = this.#paused.get(ev.owner);
      if (held) {
        held.push(ev);
        return true;
      }
    }
    this.eventsRun++;
    ev.fn();
    return true;
  }

  #push(ev: SimEvent): void {
    const h = this.#heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (before(h[p]!, ev)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = ev;
  }

  #pop(): SimEvent | undefined {
    const h = this.#heap;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        let best = last;
        if (l < h.length && before(h[l]!, best)) {
          m = l;
          best = h[l]!;
        }
        if (r < h.length && before(h[r]!, best)) {
          m = r;
          best = h[r]!;
        }
        if (m === i) break;
        h[i] = h[m]!;
        i = m;
      }
      h[i] = last;
    }
    return top;
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.t < b.t || (a.t === b.t && a.seq < b.seq);
}

/** Let every promise reaction queued so far run (and the ones they queue). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

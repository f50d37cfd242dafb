/**
 * A fixed-size ring buffer of finished requests, stored column-wise so that logging a request
 * allocates nothing: numbers go into typed arrays, strings are references the HTTP parser already
 * made. Objects are only built when a test reads the log.
 *
 *   slot:   0     1     2     3          next = 2, size = 4, total = 6
 *         [ e4 ][ e5 ][ e2 ][ e3 ]       oldest = e2 (slot next), newest = e5 (slot next-1)
 */

export interface RequestLogEntry {
  /** Order in which requests arrived (0, 1, 2… since the site started; not reset by resetStats). */
  seq: number;
  method: string;
  /** Host header as sent (e.g. `127.0.0.2:41234`), or the listener address when there was none. */
  host: string;
  /** Index of the listener the request arrived on (127.0.0.1 → 0, 127.0.0.2 → 1, …). */
  hostIndex: number;
  /** Path and query as requested. */
  url: string;
  /**
   * HTTP status sent; 101 for a WebSocket that upgraded; 0 when the connection was closed before
   * any status line (a dropped connection, a client abort, a refused upgrade).
   */
  status: number;
  /** Arrival time, ms since the epoch (sub-millisecond precision). */
  start: number;
  /** Time the response finished or the connection closed, ms since the epoch. */
  end: number;
  /** True when the whole response was handed to the socket; false when it was cut off. */
  completed: boolean;
}

export class RequestLog {
  readonly capacity: number;
  #next = 0;
  #total = 0;
  readonly #seq: Float64Array;
  readonly #start: Float64Array;
  readonly #end: Float64Array;
  readonly #status: Uint16Array;
  readonly #hostIndex: Uint8Array;
  readonly #completed: Uint8Array;
  readonly #method: string[];
  readonly #host: string[];
  readonly #url: string[];

  constructor(capacity: number) {
    this.capacity = capacity;
    this.#seq = new Float64Array(capacity);
    this.#start = new Float64Array(capacity);
    this.#end = new Float64Array(capacity);
    this.#status = new Uint16Array(capacity);
    this.#hostIndex = new Uint8Array(capacity);
    this.#completed = new Uint8Array(capacity);
    this.#method = new Array<string>(capacity).fill('');
    this.#host = new Array<string>(capacity).fill('');
    this.#url = new Array<string>(capacity).fill('');
  }

  /** Entries written since the last clear, including those already overwritten. */
  get total(): number {
    return this.#total;
  }

  /** Entries overwritten because the buffer was full. */
  get dropped(): number {
    return Math.max(0, this.#total - this.capacity);
  }

  push(
    seq: number,
    method: string,
    host: string,
    hostIndex: number,
    url: string,
    status: number,
    start: number,
    end: number,
    completed: boolean,
  ): void {
    if (this.capacity === 0) {
      this.#total += 1;
      return;
    }
    const i = this.#next;
    this.#seq[i] = seq;
    this.#method[i] = method;
    this.#host[i] = host;
    this.#hostIndex[i] = hostIndex;
    this.#url[i] = url;
    this.#status[i] = status;
    this.#start[i] = start;
    this.#end[i] = end;
    this.#completed[i] = completed ? 1 : 0;
    this.#next = i + 1 === this.capacity ? 0 : i + 1;
    this.#total += 1;
  }

  /** The kept entries, oldest first (in the order requests finished). */
  entries(): RequestLogEntry[] {
    const n = Math.min(this.#total, this.capacity);
    const out: RequestLogEntry[] = [];
    let i = n < this.capacity ? 0 : this.#next;
    for (let k = 0; k < n; k++) {
      out.push({
        seq: this.#seq[i]!,
        method: this.#method[i]!,
        host: this.#host[i]!,
        hostIndex: this.#hostIndex[i]!,
        url: this.#url[i]!,
        status: this.#status[i]!,
        start: this.#start[i]!,
        end: this.#end[i]!,
        completed: this.#completed[i] === 1,
      });
      i = i + 1 === this.capacity ? 0 : i + 1;
    }
    return out;
  }

  clear(): void {
    this.#next = 0;
    this.#total = 0;
    // Drop string references so cleared entries do not pin memory.
    this.#method.fill('');
    this.#host.fill('');
    this.#url.fill('');
  }
}

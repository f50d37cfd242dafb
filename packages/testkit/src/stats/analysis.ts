/**
 * Questions tests ask of the request log: "did we ever exceed N requests per second against this
 * host?", "what was the smallest gap between two requests?", "how many ran at once?".
 */
import type { RequestLogEntry } from './request-log.js';

export interface LogFilter {
  /** Only entries with this Host header (e.g. `new URL(site.hostUrl(1)).host`). */
  host?: string;
  /** Only entries that arrived on this listener (0 = 127.0.0.1, 1 = 127.0.0.2, …). */
  hostIndex?: number;
  /** Only entries whose URL starts with this path prefix. */
  pathPrefix?: string;
}

export function filterLog(log: readonly RequestLogEntry[], filter: LogFilter = {}): RequestLogEntry[] {
  return log.filter(
    (e) =>
      (filter.host === undefined || e.host === filter.host) &&
      (filter.hostIndex === undefined || e.hostIndex === filter.hostIndex) &&
      (filter.pathPrefix === undefined || e.url.startsWith(filter.pathPrefix)),
  );
}

/** Start times of the matching entries, ascending. */
function starts(log: readonly RequestLogEntry[], filter: LogFilter): number[] {
  return filterLog(log, filter)
    .map((e) => e.start)
    .sort((a, b) => a - b);
}

/**
 * The largest number of matching requests that arrived within any window of `windowMs`
 * milliseconds (windows are half-open: `[t, t + windowMs)`). A limit of "at most 2 per second"
 * holds when `maxRequestsInWindow(log, 1000) <= 2`.
 */
export function maxRequestsInWindow(
  log: readonly RequestLogEntry[],
  windowMs: number,
  filter: LogFilter = {},
): number {
  const t = starts(log, filter);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < t.length; hi++) {
    while (t[hi]! - t[lo]! >= windowMs) lo += 1;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

/** The smallest gap in ms between two consecutive matching arrivals; `Infinity` with fewer than two. */
export function minStartInterval(log: readonly RequestLogEntry[], filter: LogFilter = {}): number {
  const t = starts(log, filter);
  let best = Number.POSITIVE_INFINITY;
  for (let i = 1; i < t.length; i++) best = Math.min(best, t[i]! - t[i - 1]!);
  return best;
}

/** The most matching requests in flight at once, rebuilt from the log's start and end times. */
export function maxConcurrency(log: readonly RequestLogEntry[], filter: LogFilter = {}): number {
  const events: Array<[number, number]> = [];
  for (const e of filterLog(log, filter)) events.push([e.start, 1], [e.end, -1]);
  // At equal times, count ends before starts: a request that ended as another began did not overlap it.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let current = 0;
  let best = 0;
  for (const [, delta] of events) {
    current += delta;
    best = Math.max(best, current);
  }
  return best;
}

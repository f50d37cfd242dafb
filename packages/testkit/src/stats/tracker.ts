/**
 * The fixture server's own counters, which tests assert against: requests per host and per path,
 * current and maximum in-flight requests per host, and a bounded log of finished requests.
 *
 * Every request is counted from its arrival (before any injected latency) until its response
 * finishes or its connection closes, whichever comes first. Control routes (`/__fixture/…`) are
 * not counted.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { RequestLog, type RequestLogEntry } from './request-log.js';

export interface HostStats {
  /** Host header value, e.g. `127.0.0.2:41234`. */
  host: string;
  /** Requests that arrived since the last reset. */
  requests: number;
  /** Requests in flight now. */
  inFlight: number;
  /** Most requests in flight at the same time since the last reset. */
  maxInFlight: number;
}

export interface FixtureStats {
  /** Requests that arrived since the last reset (all hosts). */
  requests: number;
  /** Requests in flight now (all hosts). */
  inFlight: number;
  /** Most requests in flight at once since the last reset (all hosts together). */
  maxInFlight: number;
  /** Per Host header. */
  hosts: Record<string, HostStats>;
  /** Requests per path (query excluded), for the first `maxTrackedPaths` distinct paths. */
  paths: Record<string, number>;
  /** Requests whose path was not counted in `paths` because the path table was full. */
  untrackedPathRequests: number;
  /** Finished requests, oldest first; at most `requestLogSize` (older ones are dropped). */
  log: RequestLogEntry[];
  /** Log entries dropped because the ring buffer was full. */
  logDropped: number;
  /** When the counters were last reset, ms since the epoch. */
  since: number;
}

/** Published on `mocra:testkit:request` with the finished request's log entry, when subscribed. */
export const requestChannel = diagnosticsChannel.channel('mocra:testkit:request');

const kStart = Symbol('fixture.start');
const kSeq = Symbol('fixture.seq');
const kHost = Symbol('fixture.host');
const kEpoch = Symbol('fixture.epoch');
const kRawStatus = Symbol('fixture.rawStatus');
const kHostIndex = Symbol('fixture.hostIndex');

/** What the tracker needs of a response; a ServerResponse, or a stand-in for a WebSocket upgrade. */
interface TrackedResponse {
  readonly req: IncomingMessage;
  readonly headersSent: boolean;
  readonly statusCode: number;
  readonly writableFinished: boolean;
  [kStart]: number;
  [kSeq]: number;
  [kHost]: HostStats;
  [kEpoch]: number;
  [kRawStatus]: number;
  [kHostIndex]: number;
}

const timeOrigin = performance.timeOrigin;

/** Wall-clock ms with sub-ms precision, monotonic within the process. */
export function now(): number {
  return timeOrigin + performance.now();
}

/**
 * Records the status of a response written straight to the socket (broken chunking, truncation),
 * which Node's response object never saw.
 */
export function markRawStatus(res: ServerResponse, status: number): void {
  (res as unknown as TrackedResponse)[kRawStatus] = status;
}

function hostIndexOfSocket(req: IncomingMessage): number {
  const address = req.socket.localAddress;
  if (address === undefined) return 0;
  const dot = address.lastIndexOf('.');
  const octet = Number(address.slice(dot + 1));
  return address.includes('127.0.0.') && octet >= 1 ? octet - 1 : 0;
}

export class RequestTracker {
  readonly #log: RequestLog;
  readonly #maxPaths: number;
  readonly #hosts = new Map<string, HostStats>();
  #paths = new Map<string, number>();
  #untracked = 0;
  #requests = 0;
  #inFlight = 0;
  #maxInFlight = 0;
  #seq = 0;
  #epoch = 0;
  #since = Date.now();
  readonly #onClose: (this: TrackedResponse) => void;

  constructor(logSize: number, maxPaths: number) {
    this.#log = new RequestLog(logSize);
    this.#maxPaths = maxPaths;
    const tracker = this;
    // One shared listener (no closure per request): the response carries its own state.
    this.#onClose = function onClose(this: TrackedResponse) {
      tracker.#finish(this);
    };
  }

  /** Call when a request arrives. Counting ends by itself when the response closes. */
  begin(req: IncomingMessage, res: ServerResponse): void {
    this.#start(req, res as unknown as TrackedResponse);
    res.once('close', this.#onClose);
  }

  /**
   * Counts a WebSocket upgrade request (which has no ServerResponse of ours) from its arrival
   * until its socket closes; `upgraded()` tells then whether the protocol switched (status 101).
   */
  beginUpgrade(
    req: IncomingMessage,
    socket: { once(event: 'close', fn: () => void): unknown },
    upgraded: () => boolean,
  ): void {
    const standIn = { req, headersSent: false, statusCode: 0, writableFinished: false } as TrackedResponse;
    this.#start(req, standIn);
    socket.once('close', () => {
      standIn[kRawStatus] = upgraded() ? 101 : 0;
      this.#finish(standIn);
    });
  }

  #start(req: IncomingMessage, t: TrackedResponse): void {
    const hostHeader = req.headers.host ?? `${req.socket.localAddress}:${req.socket.localPort}`;
    let host = this.#hosts.get(hostHeader);
    if (host === undefined) {
      host = { host: hostHeader, requests: 0, inFlight: 0, maxInFlight: 0 };
      this.#hosts.set(hostHeader, host);
    }
    t[kStart] = now();
    t[kSeq] = this.#seq++;
    t[kHost] = host;
    t[kEpoch] = this.#epoch;
    t[kRawStatus] = 0;
    // Read now: a closed socket no longer knows its local address.
    t[kHostIndex] = hostIndexOfSocket(req);
    this.#requests += 1;
    host.requests += 1;
    if (++host.inFlight > host.maxInFlight) host.maxInFlight = host.inFlight;
    if (++this.#inFlight > this.#maxInFlight) this.#maxInFlight = this.#inFlight;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const count = this.#paths.get(path);
    if (count !== undefined) this.#paths.set(path, count + 1);
    else if (this.#paths.size < this.#maxPaths) this.#paths.set(path, 1);
    else this.#untracked += 1;
  }

  #finish(res: TrackedResponse): void {
    const end = now();
    const host = res[kHost];
    host.inFlight -= 1;
    this.#inFlight -= 1;
    if (res[kEpoch] !== this.#epoch) return;
    const req = res.req;
    const status = res.headersSent ? res.statusCode : res[kRawStatus];
    const completed = res.writableFinished;
    this.#log.push(
      res[kSeq],
      req.method ?? 'GET',
      host.host,
      res[kHostIndex],
      req.url ?? '/',
      status,
      res[kStart],
      end,
      completed,
    );
    if (requestChannel.hasSubscribers) {
      requestChannel.publish({
        seq: res[kSeq],
        method: req.method ?? 'GET',
        host: host.host,
        hostIndex: res[kHostIndex],
        url: req.url ?? '/',
        status,
        start: res[kStart],
        end,
        completed,
      } satisfies RequestLogEntry);
    }
  }

  snapshot(includeLog = true): FixtureStats {
    const hosts: Record<string, HostStats> = {};
    for (const [key, h] of this.#hosts) if (h.requests > 0 || h.inFlight > 0) hosts[key] = { ...h };
    return {
      requests: this.#requests,
      inFlight: this.#inFlight,
      maxInFlight: this.#maxInFlight,
      hosts,
      paths: Object.fromEntries(this.#paths),
      untrackedPathRequests: this.#untracked,
      log: includeLog ? this.#log.entries() : [],
      logDropped: this.#log.dropped,
      since: this.#since,
    };
  }

  hostStats(host: string): HostStats {
    const h = this.#hosts.get(host);
    return h === undefined ? { host, requests: 0, inFlight: 0, maxInFlight: 0 } : { ...h };
  }

  /** Zeroes counters and clears the log. Requests in flight stay counted as in flight. */
  reset(): void {
    this.#epoch += 1;
    this.#requests = 0;
    this.#maxInFlight = this.#inFlight;
    for (const h of this.#hosts.values()) {
      h.requests = 0;
      h.maxInFlight = h.inFlight;
    }
    this.#paths = new Map();
    this.#untracked = 0;
    this.#log.clear();
    this.#since = Date.now();
  }
}

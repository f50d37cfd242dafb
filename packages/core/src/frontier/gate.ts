/**
 * The download gate: the one place between the `request` topic and the downloader where
 * politeness plugs in (per-host concurrency and delay, robots.txt, Retry-After backoff for a
 * host). The engine calls `enter` before every download and `leave` after it, whatever the
 * outcome. The default gate lets everything through without allocating a promise.
 */
import type { Request } from '../model/request.js';

/**
 * What the gate says about a request:
 *   - `undefined`: download it now;
 *   - `{ deferMs }`: not yet — the engine puts it back on the `request` topic with that delay
 *     (not an error, no retry counted);
 *   - `{ drop }`: never (e.g. disallowed by robots.txt) — acked, counted as dropped, reported
 *     on `mocra:frontier:drop`.
 */
export type GateDecision = undefined | { deferMs: number } | { drop: string };

export interface DownloadOutcome {
  /** HTTP status when a response arrived. */
  status?: number;
  /** The error when the download failed. */
  error?: unknown;
  durationMs?: number;
  /** Response headers, when a response arrived (a politeness gate reads Retry-After). */
  headers?: Readonly<Record<string, string | string[] | undefined>>;
}

export interface DownloadGate {
  enter(request: Request, signal: AbortSignal): GateDecision | Promise<GateDecision>;
  /** Called once per `enter` that returned `undefined`, after the download settled. */
  leave(request: Request, outcome: DownloadOutcome): void;
}

/** Lets every request through at once. */
export const OPEN_GATE: DownloadGate = Object.freeze({
  enter: () => undefined,
  leave: () => {},
});

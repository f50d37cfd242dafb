/**
 * How a dead letter is shown by `GET /dlq`: a one-line summary of the work, and the payload
 * made JSON-safe and small (a dead `Response` holds a whole page body; a payload may hold
 * cycles, BigInts, binary data). Nothing here is used to replay — replay works on the stored
 * payload, never on this view.
 */

import { redactUrlCredentials } from '../redact.js';

const MAX_STRING = 500;
const MAX_ARRAY = 20;
const MAX_KEYS = 40;
const MAX_DEPTH = 5;

/** A JSON-safe, size-capped copy of `value`. */
export function safeJson(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (value === null || value === undefined) return value ?? null;
  switch (typeof value) {
    case 'string': {
      const shown = redactUrlCredentials(value);
      return shown.length > MAX_STRING ? `${shown.slice(0, MAX_STRING)}… (${shown.length} chars)` : shown;
    }
    case 'number':
      return Number.isFinite(value) ? value : String(value);
    case 'boolean':
      return value;
    case 'bigint':
      return `${value}n`;
    case 'function':
    case 'symbol':
      return undefined;
    default:
      break;
  }
  const object = value as object;
  if (seen.has(object)) return '[circular]';
  if (object instanceof Uint8Array) return `[${object.byteLength} bytes]`;
  if (object instanceof Date) return object.toISOString();
  if (object instanceof Error) {
    const code = (object as Error & { code?: unknown }).code;
    return {
      name: object.name,
      message: redactUrlCredentials(object.message),
      ...(typeof code === 'string' ? { code } : {}),
    };
  }
  if (depth >= MAX_DEPTH) return Array.isArray(object) ? `[array of ${object.length}]` : '[object]';
  seen.add(object);
  try {
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function' && !Array.isArray(object)) {
      // Request/Response serialize themselves (what a serializing queue would store).
      return safeJson((toJSON as () => unknown).call(object), depth + 1, seen);
    }
    if (Array.isArray(object)) {
      const out = object.slice(0, MAX_ARRAY).map((v) => safeJson(v, depth + 1, seen));
      if (object.length > MAX_ARRAY) out.push(`… ${object.length - MAX_ARRAY} more`);
      return out;
    }
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const [k, v] of Object.entries(object)) {
      if (n++ >= MAX_KEYS) {
        out['…'] = 'more keys';
        break;
      }
      const safe = safeJson(v, depth + 1, seen);
      if (safe !== undefined) out[k] = safe;
    }
    return out;
  } finally {
    seen.delete(object);
  }
}

type Loose = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** One line naming a piece of work: `GET https://…`, `task catalog`, `follow-up catalog/detail (3 requests)`. */
export function describeWork(payload: unknown): string {
  if (payload === null || typeof payload !== 'object') return String(payload);
  const p = payload as Loose;
  const request = p.request as Loose | undefined;
  if (request !== undefined && typeof request === 'object' && str(request.url) !== undefined) {
    return `response ${typeof p.status === 'number' ? `${p.status} ` : ''}${str(request.url)}`;
  }
  if (str(p.url) !== undefined) return `${str(p.method) ?? 'GET'} ${str(p.url)}`;
  if (Array.isArray(p.requests) && str(p.module) !== undefined) {
    return `follow-up ${str(p.module)}/${str(p.node) ?? '?'} (${p.requests.length} request${p.requests.length === 1 ? '' : 's'})`;
  }
  if (str(p.module) !== undefined)
    return `task ${str(p.module)}${str(p.account) === undefined ? '' : ` (${str(p.account)})`}`;
  return 'message';
}

/** Summary of a dead letter: for an error event (the error topic's DLQ), the failure and the work it was about. */
export function summarizeDeadLetter(topic: string, payload: unknown): string {
  return redactUrlCredentials(summarize(topic, payload));
}

function summarize(topic: string, payload: unknown): string {
  if (topic === 'error' && payload !== null && typeof payload === 'object') {
    const event = payload as Loose;
    const code = str(event.code)?.replace(/^MOCRA_ERR_/, '') ?? 'failure';
    return `${str(event.stage) ?? 'stage'} ${code}: ${describeWork(event.payload)}`;
  }
  return describeWork(payload);
}

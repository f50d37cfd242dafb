/**
 * Commands of the control state machine, as they sit in the Raft log, and their results.
 *
 * Every client command travels in an {@link CommandEnvelope}: the client's id and sequence number
 * (so a retried request is applied once, Raft thesis §6.3), the sequence below which the client
 * has all its answers (so the session can forget them), and the leader's two clock readings when it
 * appended the command: `m` (monotonic) moves cluster time, `t` (wall clock) only gives a new
 * cluster's time its start. The state machine never reads a clock: lock expiry, key TTLs and
 * member liveness are judged against cluster time only, so every replica computes the same thing.
 */

export type Operation =
  | { readonly type: 'set'; readonly key: string; readonly value: string; readonly ttlMs?: number }
  | { readonly type: 'delete'; readonly key: string }
  | {
      readonly type: 'cas';
      readonly key: string;
      /** null = the key must be absent. */
      readonly expected: string | null;
      /** null = delete. */
      readonly next: string | null;
      readonly ttlMs?: number;
    }
  | { readonly type: 'incr'; readonly key: string; readonly by: number }
  | { readonly type: 'lock-acquire'; readonly name: string; readonly owner: string; readonly ttlMs: number }
  | { readonly type: 'lock-renew'; readonly name: string; readonly token: number; readonly ttlMs: number }
  | { readonly type: 'lock-release'; readonly name: string; readonly token: number }
  | {
      readonly type: 'fenced';
      readonly key: string;
      readonly token: number;
      /** Absent: a fenced read (it still raises the key's highest token). */
      readonly value?: string;
    }
  | {
      readonly type: 'member-register';
      readonly id: string;
      readonly addr?: string;
      readonly meta: Readonly<Record<string, string>>;
      readonly ttlMs: number;
    }
  | { readonly type: 'member-heartbeat'; readonly id: string }
  | { readonly type: 'member-leave'; readonly id: string }
  /** Proposed by the leader: drop everything that has expired by `t`. */
  | { readonly type: 'sweep' };

export type OperationType = Operation['type'];

export interface CommandEnvelope {
  /** Client id; empty for leader-internal commands (no session, no dedup). */
  readonly c: string;
  /** Client sequence number, ≥ 1 (0 for leader-internal commands). */
  readonly s: number;
  /** Every sequence number below this one has been answered; the session may forget them. */
  readonly f: number;
  /** Leader wall-clock time (epoch ms) when the command was appended. */
  readonly t: number;
  /** Leader monotonic clock (ms, any origin) when the command was appended. */
  readonly m: number;
  readonly op: Operation;
}

export type CommandResult =
  | { readonly type: 'ok' }
  | { readonly type: 'existed'; readonly existed: boolean }
  | { readonly type: 'swapped'; readonly swapped: boolean }
  | { readonly type: 'value'; readonly value: number }
  | {
      readonly type: 'lock';
      readonly acquired: boolean;
      readonly owner: string;
      readonly token: number;
      readonly expiresAt: number;
    }
  | { readonly type: 'renewed'; readonly renewed: boolean; readonly expiresAt: number }
  | { readonly type: 'released'; readonly released: boolean }
  | {
      readonly type: 'fenced';
      readonly accepted: boolean;
      readonly maxToken: number;
      readonly value: string | null;
    }
  | { readonly type: 'known'; readonly known: boolean }
  | { readonly type: 'swept'; readonly removed: number }
  | {
      readonly type: 'error';
      readonly code: 'not-integer' | 'stale-request' | 'invalid-command';
      readonly message: string;
    };

const KEY_MAX = 1024;
const VALUE_MAX = 1024 * 1024;
const TTL_MAX = 365 * 24 * 3600 * 1000;

/** Why `value` is not a valid {@link Operation}, or undefined when it is one. */
export function validateOperation(value: unknown): string | undefined {
  if (!isRecord(value) || typeof value.type !== 'string') return 'operation must be an object with a type';
  switch (value.type) {
    case 'set':
      return checkKey(value.key) ?? checkValue(value.value) ?? checkOptionalTtl(value.ttlMs);
    case 'delete':
      return checkKey(value.key);
    case 'cas':
      return (
        checkKey(value.key) ??
        (value.expected === null ? undefined : checkValue(value.expected)) ??
        (value.next === null ? undefined : checkValue(value.next)) ??
        checkOptionalTtl(value.ttlMs)
      );
    case 'incr':
      return (
        checkKey(value.key) ??
        (typeof value.by === 'number' && Number.isSafeInteger(value.by)
          ? undefined
          : 'by must be a safe integer')
      );
    case 'lock-acquire':
      return checkKey(value.name) ?? checkKey(value.owner, 'owner') ?? checkTtl(value.ttlMs);
    case 'lock-renew':
      return checkKey(value.name) ?? checkToken(value.token) ?? checkTtl(value.ttlMs);
    case 'lock-release':
      return checkKey(value.name) ?? checkToken(value.token);
    case 'fenced':
      return (
        checkKey(value.key) ??
        checkToken(value.token) ??
        (value.value === undefined ? undefined : checkValue(value.value))
      );
    case 'member-register': {
      const bad = checkKey(value.id, 'id') ?? checkTtl(value.ttlMs);
      if (bad) return bad;
      if (value.addr !== undefined && typeof value.addr !== 'string') return 'addr must be a string';
      if (!isRecord(value.meta)) return 'meta must be an object of strings';
      for (const v of Object.values(value.meta))
        if (typeof v !== 'string') return 'meta must be an object of strings';
      return undefined;
    }
    case 'member-heartbeat':
    case 'member-leave':
      return checkKey(value.id, 'id');
    case 'sweep':
      return undefined;
    default:
      return `unknown operation type ${JSON.stringify(value.type)}`;
  }
}

/** Why `value` is not a valid {@link CommandEnvelope}, or undefined when it is one. */
export function validateEnvelope(value: unknown): string | undefined {
  if (!isRecord(value)) return 'command must be an object';
  if (typeof value.c !== 'string' || value.c.length > 256) return 'c (client id) must be a string';
  for (const k of ['s', 'f', 't', 'm'] as const) {
    const n = value[k];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      return `${k} must be a non-negative integer`;
  }
  return validateOperation(value.op);
}

function checkKey(key: unknown, what = 'key'): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return `${what} must be a non-empty string`;
  if (key.length > KEY_MAX) return `${what} is longer than ${KEY_MAX} characters`;
  return undefined;
}

function checkValue(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'value must be a string';
  if (value.length > VALUE_MAX) return `value is longer than ${VALUE_MAX} characters`;
  return undefined;
}

function checkTtl(ttl: unknown): string | undefined {
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0 || ttl > TTL_MAX) {
    return `ttlMs must be an integer between 1 and ${TTL_MAX}`;
  }
  return undefined;
}

function checkOptionalTtl(ttl: unknown): string | undefined {
  return ttl === undefined ? undefined : checkTtl(ttl);
}

function checkToken(token: unknown): string | undefined {
  if (typeof token !== 'number' || !Number.isSafeInteger(token) || token <= 0)
    return 'token must be a positive integer';
  return undefined;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The recent-logs ring behind `/observability/logs` and the dashboard's logs panel.
 *
 * It is a pino destination: give `buffer.destination` to `pino.multistream` next to stderr and
 * every JSON line pino writes lands here as a {@link LogRecord}. The ring is bounded twice —
 * by record count (`capacity`, the oldest record is overwritten) and by record size (messages,
 * stacks and extra fields are cut) — so a chatty crawl cannot grow it.
 *
 * ```
 *   write ─▶ [ r5 r6 r7 r8 r1 r2 r3 r4 ]   head = next slot; the oldest is overwritten
 *                         ▲ head
 * ```
 *
 * `MOCRA_DISABLE_LOGS` silences logging everywhere, this ring included: it then records nothing.
 */
import type pinoModule from 'pino';
import { InvalidArgumentError } from '../errors.js';
import { LOG_HOOKS, type Logger, type LogLevel, loadPino, resolveLogLevel } from './logger.js';

/** pino's level names, lowest first. */
export const LOG_RECORD_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogRecordLevel = (typeof LOG_RECORD_LEVELS)[number];

const LEVEL_BY_NUMBER: Readonly<Record<number, LogRecordLevel>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};
const RANK: Readonly<Record<LogRecordLevel, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

/** One log line, as the API serves it. Ids are present when the log call carried them. */
export interface LogRecord {
  /** Sequence number within this buffer (strictly increasing; lets a client ask only for newer ones). */
  seq: number;
  /** Epoch ms. */
  time: number;
  level: LogRecordLevel;
  /** The component that logged: the record's `module`, else `component`, else the logger `name`. */
  module: string;
  message: string;
  runId?: string;
  taskId?: string;
  requestId?: string;
  traceId?: string;
  stage?: string;
  code?: string;
  url?: string;
  status?: number;
  attempt?: number;
  /** The error's stack, cut to a few lines. */
  traceback?: string;
  /** Other primitive fields of the record (bounded in count and length). */
  fields?: Record<string, string | number | boolean>;
}

export interface LogQuery {
  /** Newest records first, at most this many. @default 200 (at most the capacity) */
  limit?: number;
  /** Only records at or above this level. */
  level?: LogRecordLevel;
  /** Only records whose module contains this text (case-insensitive). */
  module?: string;
  /** Only records with a sequence number above this one. */
  after?: number;
}

export interface LogBufferOptions {
  /** Records kept. @default 1000 */
  capacity?: number;
  /** Longer messages are cut. @default 2000 */
  maxMessageLength?: number;
  /** Record nothing (defaults from `MOCRA_DISABLE_LOGS`). */
  disabled?: boolean;
  /** Called for every record kept (for `mocra_log_events_total`). */
  onRecord?: (level: LogRecordLevel) => void;
  /** Called for every line that could not be kept (not JSON, no level). */
  onDrop?: (reason: string) => void;
}

export const DEFAULT_LOG_LIMIT = 200;

/** Fields that become named properties of the record, or are pino bookkeeping: not copied to `fields`. */
const RESERVED = new Set([
  'level',
  'time',
  'msg',
  'message',
  'name',
  'module',
  'component',
  'pid',
  'hostname',
  'v',
  'err',
  'error',
  'runId',
  'taskId',
  'requestId',
  'traceId',
  'stage',
  'code',
  'url',
  'status',
  'attempt',
]);
const MAX_FIELDS = 12;
const MAX_FIELD_LENGTH = 200;
const MAX_TRACEBACK_LINES = 12;

/** Whether `MOCRA_DISABLE_LOGS` asks for no logs (any value but empty, `0` or `false`). */
export function logsDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env.MOCRA_DISABLE_LOGS;
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

export function createLogBuffer(options: LogBufferOptions = {}): LogBuffer {
  return new LogBuffer(options);
}

export class LogBuffer {
  readonly capacity: number;
  readonly disabled: boolean;
  /** A pino destination (`pino(opts, buffer.destination)` or an entry of `pino.multistream`). */
  readonly destination: { write(chunk: string): void };
  readonly #ring: (LogRecord | undefined)[];
  readonly #maxMessageLength: number;
  readonly #onRecord: ((level: LogRecordLevel) => void) | undefined;
  readonly #onDrop: ((reason: string) => void) | undefined;
  #head = 0;
  #size = 0;
  #seq = 0;

  constructor(options: LogBufferOptions = {}) {
    const capacity = options.capacity ?? 1000;
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new InvalidArgumentError(`log buffer capacity must be a positive integer, got ${capacity}`);
    }
    this.capacity = capacity;
    this.disabled = options.disabled ?? logsDisabled();
    this.#ring = new Array<LogRecord | undefined>(capacity);
    this.#maxMessageLength = options.maxMessageLength ?? 2000;
    this.#onRecord = options.onRecord;
    this.#onDrop = options.onDrop;
    this.destination = { write: (chunk: string) => this.write(chunk) };
  }

  /** Records currently held. */
  get size(): number {
    return this.#size;
  }

  /** Sequence number of the newest record (0 before any). */
  get lastSeq(): number {
    return this.#seq;
  }

  /** Take one or more newline-separated pino JSON lines. */
  write(chunk: string): void {
    if (this.disabled) return;
    for (const line of chunk.split('\n')) {
      if (line.trim() === '') continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        this.#onDrop?.('invalid');
        continue;
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        this.#onDrop?.('invalid');
        continue;
      }
      this.push(parsed as Record<string, unknown>);
    }
  }

  /** Take one record object (pino's shape: numeric or named `level`, `time`, `msg`, extra fields). */
  push(raw: Readonly<Record<string, unknown>>): void {
    if (this.disabled) return;
    const level = toLevel(raw.level);
    if (level === undefined) {
      this.#onDrop?.('invalid');
      return;
    }
    const record: LogRecord = {
      seq: ++this.#seq,
      time: typeof raw.time === 'number' ? raw.time : Date.now(),
      level,
      module: firstString(raw.module, raw.component, raw.name) ?? 'mocra',
      message: cut(
        firstString(raw.msg, raw.message) ?? errorMessage(raw.err ?? raw.error) ?? '',
        this.#maxMessageLength,
      ),
    };
    copyString(record, 'runId', raw.runId);
    copyString(record, 'taskId', raw.taskId);
    copyString(record, 'requestId', raw.requestId);
    copyString(record, 'traceId', raw.traceId);
    copyString(record, 'stage', raw.stage);
    copyString(record, 'code', raw.code ?? errorCode(raw.err ?? raw.error));
    copyString(record, 'url', raw.url);
    if (typeof raw.status === 'number') record.status = raw.status;
    if (typeof raw.attempt === 'number') record.attempt = raw.attempt;
    const stack = errorStack(raw.err ?? raw.error);
    if (stack !== undefined) record.traceback = stack;
    const fields = extraFields(raw);
    if (fields !== undefined) record.fields = fields;

    this.#ring[this.#head] = record;
    this.#head = (this.#head + 1) % this.capacity;
    if (this.#size < this.capacity) this.#size++;
    this.#onRecord?.(level);
  }

  /** Newest first, filtered. */
  query(query: LogQuery = {}): LogRecord[] {
    const limit = Math.max(0, Math.min(query.limit ?? DEFAULT_LOG_LIMIT, this.capacity));
    const minRank = query.level === undefined ? 0 : RANK[query.level];
    const module = query.module?.toLowerCase();
    const after = query.after ?? 0;
    const out: LogRecord[] = [];
    for (let i = 1; i <= this.#size && out.length < limit; i++) {
      const record = this.#ring[(this.#head - i + this.capacity) % this.capacity];
      if (record === undefined) continue;
      if (record.seq <= after) break;
      if (RANK[record.level] < minRank) continue;
      if (module !== undefined && module !== '' && !record.module.toLowerCase().includes(module)) continue;
      out.push(record);
    }
    return out;
  }

  clear(): void {
    this.#ring.fill(undefined);
    this.#head = 0;
    this.#size = 0;
  }
}

function toLevel(level: unknown): LogRecordLevel | undefined {
  if (typeof level === 'number') return LEVEL_BY_NUMBER[level];
  if (typeof level === 'string' && (LOG_RECORD_LEVELS as readonly string[]).includes(level)) {
    return level as LogRecordLevel;
  }
  return undefined;
}

function firstString(...values: unknown[]): string | undefined {
  for (const value of values) if (typeof value === 'string' && value !== '') return value;
  return undefined;
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

type StringKeys = 'runId' | 'taskId' | 'requestId' | 'traceId' | 'stage' | 'code' | 'url';

function copyString(record: LogRecord, key: StringKeys, value: unknown): void {
  if (typeof value === 'string' && value !== '') record[key] = cut(value, 500);
  else if (typeof value === 'number') record[key] = String(value);
}

function asObject(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
}

function errorMessage(err: unknown): string | undefined {
  const message = asObject(err)?.message;
  return typeof message === 'string' ? message : undefined;
}

function errorCode(err: unknown): unknown {
  return asObject(err)?.code;
}

function errorStack(err: unknown): string | undefined {
  const stack = asObject(err)?.stack;
  if (typeof stack !== 'string') return undefined;
  return cut(stack.split('\n').slice(0, MAX_TRACEBACK_LINES).join('\n'), 4000);
}

function extraFields(
  raw: Readonly<Record<string, unknown>>,
): Record<string, string | number | boolean> | undefined {
  let fields: Record<string, string | number | boolean> | undefined;
  let count = 0;
  for (const [key, value] of Object.entries(raw)) {
    if (RESERVED.has(key)) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    fields ??= {};
    fields[key] = typeof value === 'string' ? cut(value, MAX_FIELD_LENGTH) : value;
    if (++count >= MAX_FIELDS) break;
  }
  return fields;
}

export interface BufferedLoggerOptions {
  /** The ring the logs panel reads. */
  buffer: LogBuffer;
  /** Level of the stderr stream (resolved like `createLogger`: MOCRA_DISABLE_LOGS, MOCRA_LOG_LEVEL…). @default 'warn' */
  level?: LogLevel;
  /**
   * Lowest level the ring records. The engine logs each download at `debug`, which is what
   * makes the dashboard's logs panel useful; it costs one JSON line per page. @default 'debug'
   */
  bufferLevel?: LogRecordLevel;
}

/**
 * A pino logger writing to stderr at `level` and to the ring at `bufferLevel` (one JSON line
 * built per record, fanned out by pino.multistream). With MOCRA_DISABLE_LOGS both are off.
 */
export function createBufferedLogger(options: BufferedLoggerOptions): Logger {
  const consoleLevel = resolveLogLevel(options.level);
  const bufferLevel = options.bufferLevel ?? 'debug';
  const pino = loadPino();
  const streams: pinoModule.StreamEntry[] = [];
  if (consoleLevel !== 'silent')
    streams.push({ level: consoleLevel, stream: pino.destination({ fd: 2, sync: true }) });
  if (!options.buffer.disabled) streams.push({ level: bufferLevel, stream: options.buffer.destination });
  if (streams.length === 0) return pino({ name: 'mocra', level: 'silent' });
  const lowest = streams.reduce(
    (min, s) => Math.min(min, pino.levels.values[s.level ?? 'info'] ?? 30),
    Number.POSITIVE_INFINITY,
  );
  const level = pino.levels.labels[lowest] ?? 'info';
  return pino({ name: 'mocra', level, hooks: LOG_HOOKS }, pino.multistream(streams));
}

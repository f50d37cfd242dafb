/**
 * Cron schedules on croner: 6 fields (seconds first) or 5 (minute precision), an optional time
 * zone, and `every(...)` interval helpers:
 *
 * ```ts
 * cron('0 *\/5 * * * *')                         // every 5 minutes, at second 0
 * every.minutes(15).build()                     // '0 *\/15 * * * *'
 * every.days(1).at(3, 30).build()               // '0 30 3 *\/1 * *'
 * every.weekdays([1, 3, 5]).at(9).build()       // Mon, Wed, Fri at 09:00
 * every.hours(2).runNowAndSchedule().build()    // fire at start, then every 2 hours
 * runNow()                                      // fire once at start, never again
 * ```
 */
import type { Cron } from 'croner';
import { InvalidCronError } from '../errors.js';
import { lazyRequire } from '../optional-dependency.js';

/** A validated schedule. Build one with {@link cron}, {@link every} or {@link runNow}. */
export interface CronSchedule {
  /** 5 or 6 fields; undefined for a schedule that only runs once at start. */
  readonly expression: string | undefined;
  /** IANA time zone the expression is read in. @default the process's zone */
  readonly timezone: string | undefined;
  /** Fire once as soon as the scheduler starts (or the job is added to a running one). */
  readonly runNow: boolean;
  /** A disabled schedule never fires. */
  readonly enabled: boolean;
}

export interface CronOptions {
  timezone?: string;
  /** Also fire once at start. @default false */
  runNowAndSchedule?: boolean;
  /** @default true */
  enabled?: boolean;
}

/** Anything a module's or spider's `cron` may be: an expression, a built schedule, or a builder. */
export type CronInput = string | CronSchedule | CronBuilder;

/** Validates `expression` (5 or 6 fields) and returns a schedule. Throws InvalidCronError. */
export function cron(expression: string, options: CronOptions = {}): CronSchedule {
  if (typeof expression !== 'string') throw new InvalidCronError(String(expression), 'not a string');
  const trimmed = expression.trim().replace(/\s+/g, ' ');
  compile(trimmed, options.timezone);
  return Object.freeze({
    expression: trimmed,
    timezone: options.timezone,
    runNow: options.runNowAndSchedule ?? false,
    enabled: options.enabled ?? true,
  });
}

/** A schedule that fires once at start and never again. */
export function runNow(): CronSchedule {
  return Object.freeze({ expression: undefined, timezone: undefined, runNow: true, enabled: true });
}

/** Turns any {@link CronInput} into a validated schedule. */
export function toCronSchedule(input: CronInput): CronSchedule {
  if (typeof input === 'string') return cron(input);
  if (input instanceof CronBuilder) return input.build();
  if (typeof input !== 'object' || input === null)
    throw new InvalidCronError(String(input), 'not a cron schedule');
  if (input.expression !== undefined) {
    return cron(input.expression, {
      ...(input.timezone === undefined ? {} : { timezone: input.timezone }),
      runNowAndSchedule: input.runNow === true,
      enabled: input.enabled !== false,
    });
  }
  if (input.runNow !== true) throw new InvalidCronError('(none)', 'a schedule needs an expression or runNow');
  return Object.freeze({
    expression: undefined,
    timezone: undefined,
    runNow: true,
    enabled: input.enabled !== false,
  });
}

/** Loaded with the first schedule: a crawl without cron never needs it. */
const croner = lazyRequire<typeof import('croner')>('croner');

const compiled = new Map<string, Cron>();

function compile(expression: string, timezone: string | undefined): Cron {
  const key = `${timezone ?? ''}\u0000${expression}`;
  let job = compiled.get(key);
  if (job) return job;
  try {
    job = new (croner().Cron)(expression, {
      paused: true,
      mode: '5-or-6-parts',
      ...(timezone ? { timezone } : {}),
    });
    // Resolving one run also checks the time zone (croner only reads it then).
    job.nextRun(new Date(0));
  } catch (err) {
    const reason = err instanceof Error ? err.message.replace(/^Cron(Pattern|Date): /, '') : String(err);
    throw new InvalidCronError(expression, reason, { cause: err });
  }
  if (compiled.size > 1_000) compiled.clear();
  compiled.set(key, job);
  return job;
}

/** The first firing strictly after `after` (epoch ms), or undefined when there is none. */
export function nextFireTime(schedule: CronSchedule, after: number): number | undefined {
  if (schedule.expression === undefined) return undefined;
  return compile(schedule.expression, schedule.timezone).nextRun(new Date(after))?.getTime();
}

/** The last firing at or before `at` (epoch ms), or undefined when there is none. */
export function previousFireTime(schedule: CronSchedule, at: number): number | undefined {
  if (schedule.expression === undefined) return undefined;
  // previousRuns looks strictly before its reference; one ms later includes `at` itself.
  return compile(schedule.expression, schedule.timezone)
    .previousRuns(1, new Date(at + 1))[0]
    ?.getTime();
}

type Field = 'second' | 'minute' | 'hour' | 'day' | 'month' | 'weekday';
const FIELDS: readonly Field[] = ['second', 'minute', 'hour', 'day', 'month', 'weekday'];
const RANGES: Record<Field, [number, number]> = {
  second: [0, 59],
  minute: [0, 59],
  hour: [0, 23],
  day: [1, 31],
  month: [1, 12],
  weekday: [0, 7],
};

/**
 * Builds an expression field by field. `every.*` starts one; `at`, `atHour`, `atMinute`,
 * `atSecond` and `onDay` pin the finer fields; `build()` validates.
 */
export class CronBuilder {
  readonly #fields: Record<Field, string>;
  readonly #label: string;
  #timezone: string | undefined;
  #runNow = false;

  /** @internal use {@link every} */
  constructor(fields: Record<Field, string>, label: string) {
    this.#fields = { ...fields };
    this.#label = label;
  }

  /** Fire at `hour`:`minute` (0 seconds). */
  at(hour: number, minute = 0): this {
    return this.atHour(hour).atMinute(minute).atSecond(0);
  }

  atHour(hour: number): this {
    return this.#set('hour', hour);
  }

  atMinute(minute: number): this {
    return this.#set('minute', minute);
  }

  atSecond(second: number): this {
    return this.#set('second', second);
  }

  /** Day of the month (1–31). */
  onDay(day: number): this {
    return this.#set('day', day);
  }

  timezone(zone: string): this {
    this.#timezone = zone;
    return this;
  }

  /** Also fire once at start. */
  runNowAndSchedule(): this {
    this.#runNow = true;
    return this;
  }

  /** The 6-field expression this builder stands for. */
  get expression(): string {
    return FIELDS.map((f) => this.#fields[f]).join(' ');
  }

  build(): CronSchedule {
    return cron(this.expression, {
      ...(this.#timezone === undefined ? {} : { timezone: this.#timezone }),
      runNowAndSchedule: this.#runNow,
    });
  }

  #set(field: Field, value: number): this {
    const [min, max] = RANGES[field];
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new InvalidCronError(this.#label, `${field} must be an integer ${min}–${max}, got ${value}`);
    }
    this.#fields[field] = String(value);
    return this;
  }
}

function step(unit: string, n: number, max: number): string {
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new InvalidCronError(`every ${n} ${unit}`, `the interval must be an integer 1–${max}`);
  }
  return `*/${n}`;
}

/**
 * Interval helpers. Steps count within the enclosing unit, as in cron:
 * `every.minutes(7)` fires at :00, :07 … :56 of each hour, then :00 again.
 */
export const every = {
  seconds: (n: number) =>
    new CronBuilder(
      { second: step('seconds', n, 59), minute: '*', hour: '*', day: '*', month: '*', weekday: '*' },
      `every ${n} seconds`,
    ),
  minutes: (n: number) =>
    new CronBuilder(
      { second: '0', minute: step('minutes', n, 59), hour: '*', day: '*', month: '*', weekday: '*' },
      `every ${n} minutes`,
    ),
  hours: (n: number) =>
    new CronBuilder(
      { second: '0', minute: '0', hour: step('hours', n, 23), day: '*', month: '*', weekday: '*' },
      `every ${n} hours`,
    ),
  days: (n: number) =>
    new CronBuilder(
      { second: '0', minute: '0', hour: '0', day: step('days', n, 31), month: '*', weekday: '*' },
      `every ${n} days`,
    ),
  /** On these days of the week (0 or 7 = Sunday … 6 = Saturday), at midnight unless `at(...)`. */
  weekdays: (days: readonly number[]) => {
    if (
      !Array.isArray(days) ||
      days.length === 0 ||
      days.some((d) => !Number.isInteger(d) || d < 0 || d > 7)
    ) {
      throw new InvalidCronError(
        `every week on ${String(days)}`,
        'days must be a non-empty list of integers 0–7',
      );
    }
    return new CronBuilder(
      {
        second: '0',
        minute: '0',
        hour: '0',
        day: '*',
        month: '*',
        weekday: [...new Set(days)].sort().join(','),
      },
      `every week on ${days.join(',')}`,
    );
  },
  /** On the first day of every `n`th month at midnight, unless `onDay(...)`/`at(...)`. */
  months: (n: number) =>
    new CronBuilder(
      { second: '0', minute: '0', hour: '0', day: '1', month: step('months', n, 12), weekday: '*' },
      `every ${n} months`,
    ),
} as const;

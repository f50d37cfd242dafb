/**
 * What one page render waits for, blocks and captures. The same shape is accepted from code
 * (the downloader's defaults) and from a request's `meta.browser`, which crosses queues and so
 * is untrusted: {@link parseRenderOptions} validates it field by field.
 */
import { InvalidArgumentError } from '../../errors.js';

/** Playwright's navigation milestones. */
export type WaitUntil = 'load' | 'domcontentloaded' | 'networkidle' | 'commit';

/** Chromium resource types that can be blocked (Playwright's `request.resourceType()` names). */
export type BlockableResource =
  | 'image'
  | 'font'
  | 'media'
  | 'stylesheet'
  | 'script'
  | 'xhr'
  | 'fetch'
  | 'websocket'
  | 'manifest'
  | 'texttrack'
  | 'eventsource'
  | 'other';

const WAIT_UNTIL: ReadonlySet<string> = new Set(['load', 'domcontentloaded', 'networkidle', 'commit']);
const BLOCKABLE: ReadonlySet<string> = new Set([
  'image',
  'font',
  'media',
  'stylesheet',
  'script',
  'xhr',
  'fetch',
  'websocket',
  'manifest',
  'texttrack',
  'eventsource',
  'other',
]);

export interface ScrollOptions {
  /** Stop once this selector matches (e.g. a "no more results" marker). */
  until?: string;
  /** Scroll steps at most. @default 50 */
  maxScrolls?: number;
  /** After a step, how long to wait for the page to grow before calling it finished. @default 1000 */
  settleMs?: number;
}

export interface ScreenshotOptions {
  /** The whole scrollable page instead of the viewport. @default false */
  fullPage?: boolean;
  /** @default 'png' */
  type?: 'png' | 'jpeg';
  /** JPEG quality 0–100 (ignored for PNG). */
  quality?: number;
}

export interface RenderOptions {
  /** The navigation milestone `goto` waits for. @default 'load' */
  waitUntil?: WaitUntil;
  /** Then wait until this CSS selector is attached to the DOM. */
  waitForSelector?: string;
  /**
   * Then wait until this returns something truthy in the page: a JavaScript expression (a
   * string, which can travel in `meta.browser`) or, from code, a function.
   */
  waitForFunction?: string | (() => unknown);
  /** Then scroll to the bottom repeatedly until the page stops growing (infinite scroll). `true` = defaults. */
  scroll?: boolean | ScrollOptions;
  /** Requests of these types are aborted before they leave the browser. @default ['image', 'font', 'media'] */
  blockResources?: BlockableResource[];
  /** Take a screenshot after rendering. `true` = a PNG of the viewport. @default false */
  screenshot?: boolean | ScreenshotOptions;
  /** Budget for the whole render: navigation, waits, scrolling and the screenshot. @default 30000 */
  timeoutMs?: number;
}

export interface ResolvedRenderOptions {
  waitUntil: WaitUntil;
  waitForSelector: string | undefined;
  waitForFunction: string | (() => unknown) | undefined;
  scroll: (Required<Omit<ScrollOptions, 'until'>> & { until: string | undefined }) | undefined;
  blockResources: ReadonlySet<string>;
  screenshot: { fullPage: boolean; type: 'png' | 'jpeg'; quality: number | undefined } | undefined;
  timeoutMs: number;
}

export const DEFAULT_BLOCKED_RESOURCES: readonly BlockableResource[] = Object.freeze([
  'image',
  'font',
  'media',
]);

/**
 * Merge `override` onto `base` (both already shaped like RenderOptions) and fill in defaults.
 * Throws InvalidArgumentError naming the field for anything that does not fit.
 */
export function resolveRenderOptions(
  base: RenderOptions = {},
  override: RenderOptions = {},
): ResolvedRenderOptions {
  const merged: RenderOptions = { ...base, ...stripUndefined(override) };
  const scroll = merged.scroll === true ? {} : merged.scroll === false ? undefined : merged.scroll;
  const screenshot =
    merged.screenshot === true ? {} : merged.screenshot === false ? undefined : merged.screenshot;
  const timeoutMs = merged.timeoutMs ?? 30_000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new InvalidArgumentError(`browser.timeoutMs must be a number > 0, got ${String(timeoutMs)}`);
  return {
    waitUntil: merged.waitUntil ?? 'load',
    waitForSelector: merged.waitForSelector,
    waitForFunction: merged.waitForFunction,
    scroll:
      scroll === undefined
        ? undefined
        : {
            until: scroll.until,
            maxScrolls: scroll.maxScrolls ?? 50,
            settleMs: scroll.settleMs ?? 1000,
          },
    blockResources: new Set(merged.blockResources ?? DEFAULT_BLOCKED_RESOURCES),
    screenshot:
      screenshot === undefined
        ? undefined
        : {
            fullPage: screenshot.fullPage ?? false,
            type: screenshot.type ?? 'png',
            quality: screenshot.quality,
          },
    timeoutMs,
  };
}

/**
 * Validate untrusted render options (a request's `meta.browser`, a config table). Functions are
 * not accepted here: they cannot cross a queue.
 */
export function parseRenderOptions(input: unknown, where = 'meta.browser'): RenderOptions {
  if (input === undefined || input === null) return {};
  if (!isRecord(input)) throw bad(where, 'must be an object');
  const out: RenderOptions = {};
  for (const [key, value] of Object.entries(input)) {
    const at = `${where}.${key}`;
    if (value === undefined) continue;
    switch (key) {
      case 'waitUntil':
        if (typeof value !== 'string' || !WAIT_UNTIL.has(value))
          throw bad(at, `must be one of ${[...WAIT_UNTIL].join(', ')}`);
        out.waitUntil = value as WaitUntil;
        break;
      case 'waitForSelector':
        out.waitForSelector = nonEmptyString(at, value);
        break;
      case 'waitForFunction':
        out.waitForFunction = nonEmptyString(at, value);
        break;
      case 'scroll':
        out.scroll = typeof value === 'boolean' ? value : parseScroll(at, value);
        break;
      case 'blockResources':
        if (!Array.isArray(value)) throw bad(at, 'must be an array of resource types');
        for (const type of value)
          if (typeof type !== 'string' || !BLOCKABLE.has(type))
            throw bad(
              at,
              `unknown resource type ${JSON.stringify(type)} (one of ${[...BLOCKABLE].join(', ')})`,
            );
        out.blockResources = value as BlockableResource[];
        break;
      case 'screenshot':
        out.screenshot = typeof value === 'boolean' ? value : parseScreenshot(at, value);
        break;
      case 'timeoutMs':
        out.timeoutMs = positiveNumber(at, value);
        break;
      default:
        throw bad(
          at,
          'unknown key (expected waitUntil, waitForSelector, waitForFunction, scroll, blockResources, screenshot, timeoutMs)',
        );
    }
  }
  return out;
}

function parseScroll(at: string, value: unknown): ScrollOptions {
  if (!isRecord(value)) throw bad(at, 'must be true, false or { until, maxScrolls, settleMs }');
  const out: ScrollOptions = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (key === 'until') out.until = nonEmptyString(`${at}.until`, v);
    else if (key === 'maxScrolls') out.maxScrolls = positiveInteger(`${at}.maxScrolls`, v);
    else if (key === 'settleMs') out.settleMs = positiveNumber(`${at}.settleMs`, v);
    else throw bad(`${at}.${key}`, 'unknown key (expected until, maxScrolls, settleMs)');
  }
  return out;
}

function parseScreenshot(at: string, value: unknown): ScreenshotOptions {
  if (!isRecord(value)) throw bad(at, 'must be true, false or { fullPage, type, quality }');
  const out: ScreenshotOptions = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (key === 'fullPage') {
      if (typeof v !== 'boolean') throw bad(`${at}.fullPage`, 'must be a boolean');
      out.fullPage = v;
    } else if (key === 'type') {
      if (v !== 'png' && v !== 'jpeg') throw bad(`${at}.type`, "must be 'png' or 'jpeg'");
      out.type = v;
    } else if (key === 'quality') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 100)
        throw bad(`${at}.quality`, 'must be an integer 0–100');
      out.quality = v;
    } else throw bad(`${at}.${key}`, 'unknown key (expected fullPage, type, quality)');
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmptyString(at: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw bad(at, 'must be a non-empty string');
  return value;
}

function positiveNumber(at: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw bad(at, 'must be a number > 0');
  return value;
}

function positiveInteger(at: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0)
    throw bad(at, 'must be an integer > 0');
  return value;
}

function bad(at: string, message: string): InvalidArgumentError {
  return new InvalidArgumentError(`${at}: ${message}`);
}

function stripUndefined(value: RenderOptions): RenderOptions {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = v;
  return out as RenderOptions;
}

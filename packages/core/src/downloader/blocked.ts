/**
 * Whether a response means "the target refused this exit": a 403 or 429, or a captcha /
 * challenge page served with 200. The proxy pool cannot know — it never sees bodies — so the
 * engine judges and reports `blocked`, which scores the proxy down and moves the host up a tier.
 * The response itself still reaches parse (and the retry policy, for retried statuses).
 */
import { InvalidArgumentError } from '../errors.js';
import type { Response } from '../model/response.js';

export interface BlockedDetectionOptions {
  /** Statuses that mean the target refused this exit. @default [403, 429] */
  statuses?: number[];
  /**
   * Patterns searched in HTML bodies (the first 64 KiB) that mean a block or captcha page.
   * Strings match case-insensitively as substrings. @default DEFAULT_BLOCK_PATTERNS
   */
  patterns?: Array<RegExp | string>;
  /**
   * Your own judgement, asked first: `true` blocked, `false` not blocked, `undefined` fall back
   * to `statuses` and `patterns`.
   */
  detect?: (response: Response) => boolean | undefined;
  /**
   * Retry a blocked response instead of handing it to parse: the download fails with
   * BlockedResponseError (retryable), the failure policy retries it, and the retry goes out on
   * another exit — a higher tier once the host escalated. After the last retry the request is
   * dead-lettered. @default false (blocked pages are reported to the pool and still reach parse)
   */
  retry?: boolean;
}

/**
 * Titles of the interstitials that anti-bot services and captcha walls serve with 200. Only the
 * `<title>` is searched by default: a page that merely embeds a captcha widget (a login form)
 * is not a block.
 */
export const DEFAULT_BLOCK_PATTERNS: readonly RegExp[] = Object.freeze([
  /<title>[^<]*(captcha|attention required|just a moment|access denied|are you a robot|verify you are human)[^<]*<\/title>/i,
]);

export const DEFAULT_BLOCK_STATUSES: readonly number[] = Object.freeze([403, 429]);

const SCAN_BYTES = 64 * 1024;

export type BlockedDetector = (response: Response) => boolean;

/** Build a detector; `false` turns detection off (only errors count as failures). */
export function createBlockedDetector(options: BlockedDetectionOptions | false = {}): BlockedDetector {
  if (options === false) return () => false;
  const statuses = new Set(options.statuses ?? DEFAULT_BLOCK_STATUSES);
  for (const status of statuses)
    if (!Number.isInteger(status) || status < 100 || status > 599)
      throw new InvalidArgumentError(`blocked.statuses: ${status} is not an HTTP status`);
  const patterns = (options.patterns ?? DEFAULT_BLOCK_PATTERNS).map((p) => {
    if (p instanceof RegExp) return p;
    if (typeof p === 'string' && p !== '') return new RegExp(escapeRegExp(p), 'i');
    throw new InvalidArgumentError('blocked.patterns: each pattern must be a RegExp or a non-empty string');
  });
  const detect = options.detect;
  return (response) => {
    const own = detect?.(response);
    if (own !== undefined) return own;
    if (statuses.has(response.status)) return true;
    if (patterns.length === 0 || response.body.length === 0) return false;
    const type = response.contentType;
    if (type !== undefined && type !== 'text/html' && type !== 'application/xhtml+xml') return false;
    const head = Buffer.from(
      response.body.buffer,
      response.body.byteOffset,
      Math.min(response.body.length, SCAN_BYTES),
    ).toString('latin1');
    return patterns.some((p) => {
      p.lastIndex = 0; // a /g pattern remembers where its last match ended
      return p.test(head);
    });
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

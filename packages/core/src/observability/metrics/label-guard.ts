/**
 * Keeps label values bounded. A Prometheus series lives as long as the process, so a label fed
 * from open-ended input (hosts, module names, error codes from user code) would grow memory
 * and the scrape without limit. Each guarded label admits its first `limit` distinct values;
 * every later value is reported as {@link OVERFLOW_LABEL_VALUE}.
 *
 * First-seen admission (not a running top-N) is deliberate: a counter's series must never
 * change its label set mid-life, or rates computed over it break. The crawl's biggest hosts are
 * almost always among the first ones seen; the per-host table of the API is not limited this
 * way, only the metric series are.
 */

/** The value a label takes once its limit of distinct values is reached. */
export const OVERFLOW_LABEL_VALUE = 'other';

/** Longest label value kept; longer ones are cut (a value is a name, not a payload). */
export const MAX_LABEL_VALUE_LENGTH = 128;

export interface LabelGuardOptions {
  /** Distinct values admitted per guarded label name. Names not listed are not guarded. */
  limits: Readonly<Record<string, number>>;
  /** Called once per value that was folded into `other` (for the overflow counter). */
  onOverflow?: (label: string) => void;
}

export class LabelGuard {
  readonly #limits: ReadonlyMap<string, number>;
  readonly #seen = new Map<string, Set<string>>();
  readonly #onOverflow: ((label: string) => void) | undefined;

  constructor(options: LabelGuardOptions) {
    this.#limits = new Map(Object.entries(options.limits));
    this.#onOverflow = options.onOverflow;
  }

  /** The value to use for `label`: `raw` itself while the label has room, else `other`. */
  value(label: string, raw: string): string {
    const value = raw.length > MAX_LABEL_VALUE_LENGTH ? raw.slice(0, MAX_LABEL_VALUE_LENGTH) : raw;
    const limit = this.#limits.get(label);
    if (limit === undefined) return value;
    let seen = this.#seen.get(label);
    if (seen === undefined) {
      seen = new Set();
      this.#seen.set(label, seen);
    }
    if (seen.has(value)) return value;
    if (seen.size < limit) {
      seen.add(value);
      return value;
    }
    this.#onOverflow?.(label);
    return OVERFLOW_LABEL_VALUE;
  }

  /** How many distinct values `label` has admitted. */
  admitted(label: string): number {
    return this.#seen.get(label)?.size ?? 0;
  }
}

/**
 * The host label of a URL: lowercase host with a non-default port, never a path or query.
 * Unparseable input gives `invalid` (so a bad URL cannot mint a series).
 */
export function hostLabel(url: string | URL): string {
  try {
    const parsed = typeof url === 'string' ? new URL(url) : url;
    return parsed.host.toLowerCase() || 'invalid';
  } catch {
    return 'invalid';
  }
}

/** `2xx` … `5xx` for an HTTP status, `other` for anything outside 100–599. */
export function statusClass(status: number): string {
  if (!Number.isInteger(status) || status < 100 || status > 599) return OVERFLOW_LABEL_VALUE;
  return `${Math.floor(status / 100)}xx`;
}

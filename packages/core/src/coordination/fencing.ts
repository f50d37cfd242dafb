import { FencingTokenRejectedError } from '../errors.js';

/**
 * The resource side of fencing: remembers the highest token seen per resource
 * and refuses a lower one, so a holder whose lock lapsed while it was paused cannot overwrite
 * the work of the holder that came after it. Use it where the writes land (a sink, a store).
 */
export class FencingGuard {
  readonly #highest = new Map<string, number>();

  /** Accept `token` for `resource` (equal or higher than any seen), or throw FencingTokenRejectedError. */
  check(resource: string, token: number): void {
    const highest = this.#highest.get(resource) ?? Number.NEGATIVE_INFINITY;
    if (token < highest) throw new FencingTokenRejectedError(resource, token, highest);
    this.#highest.set(resource, token);
  }

  highest(resource: string): number | undefined {
    return this.#highest.get(resource);
  }
}

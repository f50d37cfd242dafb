/**
 * API-key checks for the authenticated endpoints. The key comes as `Authorization: Bearer <key>`
 * or `x-api-key: <key>`. Keys are compared as SHA-256 digests with `timingSafeEqual`, so the
 * comparison takes the same time whatever prefix of the key a caller guessed right.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export type KeyCheck =
  /** No key is configured: authenticated endpoints are disabled (403). */
  | { kind: 'not-configured' }
  /** No key, or a wrong one (401). */
  | { kind: 'rejected'; presented: boolean }
  /** `id` names the key without revealing it (for the per-key rate limit). */
  | { kind: 'accepted'; id: string };

export class ApiKeyChecker {
  readonly #digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.#digests = keys.filter((k) => k !== '').map(digest);
  }

  get configured(): boolean {
    return this.#digests.length > 0;
  }

  check(headers: Readonly<Record<string, string | string[] | undefined>>): KeyCheck {
    if (!this.configured) return { kind: 'not-configured' };
    const presented = presentedKey(headers);
    if (presented === undefined) return { kind: 'rejected', presented: false };
    const candidate = digest(presented);
    // Compare against every key (no early exit) so timing does not tell which one matched.
    let matched: number | undefined;
    this.#digests.forEach((d, i) => {
      if (timingSafeEqual(d, candidate) && matched === undefined) matched = i;
    });
    if (matched === undefined) return { kind: 'rejected', presented: true };
    return { kind: 'accepted', id: `key:${candidate.subarray(0, 8).toString('hex')}` };
  }
}

function presentedKey(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const auth = single(headers.authorization);
  if (auth !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (match?.[1] !== undefined) return match[1].trim();
  }
  const key = single(headers['x-api-key']);
  return key === undefined || key.trim() === '' ? undefined : key.trim();
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

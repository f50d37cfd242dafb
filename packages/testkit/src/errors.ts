/**
 * Every error @mocra/testkit raises. The fixture site is a standalone dev/test package and imports
 * no other mocra package, so it has its own base class; the shape (`code`, `cause`, readonly
 * context) matches `MocraError` in @mocra/core, and `isMocraError` there recognises these too.
 */

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const TESTKIT_ERROR_CODES = {
  MOCRA_ERR_TESTKIT_INVALID_OPTION:
    'An option of `startFixtureSite` or of a fixture helper is missing, of the wrong type or out of range.',
  MOCRA_ERR_TESTKIT_LISTEN_FAILED: 'The fixture site could not listen on the requested address or port.',
  MOCRA_ERR_TESTKIT_UNKNOWN_HOST:
    '`site.hostUrl(i)` or a per-host setter named a host the site does not serve.',
} as const;

export type TestkitErrorCode = keyof typeof TESTKIT_ERROR_CODES;

/** Base class of every error @mocra/testkit raises. `code` is stable across versions; `message` is not. */
export class TestkitError extends Error {
  override readonly name: string = 'TestkitError';
  readonly code: TestkitErrorCode;

  constructor(code: TestkitErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}

/** An option was missing, of the wrong type or out of range. `option` names it as the caller wrote it. */
export class FixtureOptionError extends TestkitError {
  override readonly name = 'FixtureOptionError';
  readonly option: string;
  constructor(option: string, message: string) {
    super('MOCRA_ERR_TESTKIT_INVALID_OPTION', `${option}: ${message}`);
    this.option = option;
  }
}

/** A listener could not be opened (port taken, address not local, permission denied). */
export class FixtureListenError extends TestkitError {
  override readonly name = 'FixtureListenError';
  readonly address: string;
  readonly port: number;
  constructor(address: string, port: number, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super('MOCRA_ERR_TESTKIT_LISTEN_FAILED', `cannot listen on ${address}:${port}: ${reason}`, { cause });
    this.address = address;
    this.port = port;
  }
}

/** A host index outside `0 … hosts-1` was used. */
export class UnknownHostError extends TestkitError {
  override readonly name = 'UnknownHostError';
  readonly index: number;
  readonly hosts: number;
  constructor(index: number, hosts: number) {
    super(
      'MOCRA_ERR_TESTKIT_UNKNOWN_HOST',
      `host index ${index} is not served: the site has ${hosts} host(s), 0…${hosts - 1}`,
    );
    this.index = index;
    this.hosts = hosts;
  }
}

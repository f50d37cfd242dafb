/**
 * Errors the `mocra` facade raises itself (everything else comes from @mocra/core and is
 * re-exported by the prelude). Codes are listed in docs/errors.md under `## mocra`.
 */
import { MocraError } from '@mocra/core';

export const MOCRA_ERROR_CODES = {
  MOCRA_ERR_SINK_CLOSED: 'An item was written to a channel sink whose reader has stopped reading.',
} as const;

export type MocraErrorCode = keyof typeof MOCRA_ERROR_CODES;

/** The reader of a channel sink went away (`break` out of the `for await`); the item was not delivered. */
export class SinkClosedError extends MocraError {
  override readonly name = 'SinkClosedError';
  constructor(message = 'the channel sink is closed: its reader stopped reading') {
    super('MOCRA_ERR_SINK_CLOSED', message, { retryable: false });
  }
}

// Public entry of @mocra/core. Each folder names what it exports; this file lists them
// explicitly (no `export *`) so the public surface is reviewed, not accidental.

export type {
  Coordination,
  CoordinationKind,
  LockLease,
  Member,
} from './coordination/types.js';
export type { CoreErrorCode, MocraErrorOptions } from './errors.js';
export {
  CORE_ERROR_CODES,
  CriticalError,
  FencingTokenRejectedError,
  InternalError,
  InvalidArgumentError,
  isMocraError,
  LeaseExpiredError,
  LockLostError,
  MissingDependencyError,
  MocraError,
  NonRetryableError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDecodeError,
  RetryLaterError,
  SessionExpiredError,
} from './errors.js';
export type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  PublishMessage,
  QueueBackend,
  QueueBackendKind,
  QueueStats,
  TopicOptions,
} from './queue/types.js';
export { DEFAULT_TOPIC_OPTIONS } from './queue/types.js';

/**
 * Diagnostics channels of the queue backends (`node:diagnostics_channel`). Subscribing costs
 * nothing when no one listens.
 *
 * - `mocra:queue:dead-letter` — `{ backend, topic, messageId, reason, attempts }` when a message
 *   enters a dead-letter queue (nack past `maxDeliveries`, lapse on the last delivery,
 *   `deadLetter()`, or poison).
 * - `mocra:queue:poison` — `{ backend, topic, messageId, error }` when a payload cannot be
 *   decoded (it is dead-lettered too).
 * - `mocra:queue:backpressure` — `{ backend, topic, queue }` when a publish has to wait for room
 *   on a topic at capacity (once per waiting publish; `queue` is the topic object, so a
 *   subscriber can tell its own engine's topics apart).
 * - `mocra:backend:connection` — `{ backend, server, state, error?, downMs? }` when a connection
 *   to a server a crawl depends on (Redis) is lost (`state: 'lost'`, with the error) and when it
 *   is back (`'restored'`, with how long it was down). Commands wait for the reconnect meanwhile.
 *   `'emptied'` (with a QueueDataLostError or CoordinationDataLostError): it came back without
 *   the crawl's data.
 */
import diagnostics from 'node:diagnostics_channel';

export const deadLetterChannel = diagnostics.channel('mocra:queue:dead-letter');
export const poisonChannel = diagnostics.channel('mocra:queue:poison');
export const backpressureChannel = diagnostics.channel('mocra:queue:backpressure');
export const connectionChannel = diagnostics.channel('mocra:backend:connection');

export interface ConnectionEvent {
  /** What uses the connection ("the Redis queue backend"). */
  backend: string;
  /** The server, without credentials (`redis://host:port/db`). */
  server: string;
  state: 'lost' | 'restored' | 'emptied';
  error?: unknown;
  downMs?: number;
}

export function publishConnection(event: ConnectionEvent): void {
  if (connectionChannel.hasSubscribers) connectionChannel.publish(event);
}

export interface DeadLetterEvent {
  backend: string;
  topic: string;
  messageId: string;
  reason: string;
  attempts: number;
}

export function publishDeadLetter(event: DeadLetterEvent): void {
  if (deadLetterChannel.hasSubscribers) deadLetterChannel.publish(event);
}

export function publishPoison(event: {
  backend: string;
  topic: string;
  messageId: string;
  error: unknown;
}): void {
  if (poisonChannel.hasSubscribers) poisonChannel.publish(event);
}

export interface BackpressureEvent {
  backend: string;
  topic: string;
  queue: object;
}

export function publishBackpressure(event: BackpressureEvent): void {
  if (backpressureChannel.hasSubscribers) backpressureChannel.publish(event);
}

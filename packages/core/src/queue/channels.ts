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
 */
import diagnostics from 'node:diagnostics_channel';

export const deadLetterChannel = diagnostics.channel('mocra:queue:dead-letter');
export const poisonChannel = diagnostics.channel('mocra:queue:poison');
export const backpressureChannel = diagnostics.channel('mocra:queue:backpressure');

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

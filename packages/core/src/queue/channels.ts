/**
 * Diagnostics channels of the queue backends (`node:diagnostics_channel`). Subscribing costs
 * nothing when no one listens.
 *
 * - `mocra:queue:dead-letter` — `{ backend, topic, messageId, reason, attempts }` when a message
 *   enters a dead-letter queue (nack past `maxDeliveries`, lapse on the last delivery,
 *   `deadLetter()`, or poison).
 * - `mocra:queue:poison` — `{ backend, topic, messageId, error }` when a payload cannot be
 *   decoded (it is dead-lettered too).
 */
import diagnostics from 'node:diagnostics_channel';

export const deadLetterChannel = diagnostics.channel('mocra:queue:dead-letter');
export const poisonChannel = diagnostics.channel('mocra:queue:poison');

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

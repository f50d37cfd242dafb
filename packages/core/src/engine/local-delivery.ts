/**
 * A delivery that was never published: work one stage hands straight to the next stage of the
 * same process (`StageRunner.runHere`), such as a response parsed where it was downloaded.
 *
 * It has no broker entry, so there is nothing to ack and no lease to keep: the upstream
 * delivery it came from stays leased until `settled` resolves, and a crash before then
 * redelivers that one. Settling it any other way than ack puts the payload on the topic, where
 * it becomes an ordinary message (a retry later, a dead letter after that). `settled` rejects
 * only when that put-back failed: the upstream delivery is then nacked, so nothing is lost.
 */
import type { Delivery, LeaseQueue } from '../queue/types.js';

export interface LocalDeliveryFields<T> {
  /** Stable across redeliveries of the upstream message (admission claims use it). */
  id: string;
  payload: T;
  priority: number;
  key: string | undefined;
  /** @default {} */
  headers?: Readonly<Record<string, string>>;
  /**
   * The headers of the message a put-back publishes: the handler has run once by then, which
   * the next one may need to know (a claim's marks to look up again).
   * @default headers
   */
  putBackHeaders?: Readonly<Record<string, string>>;
}

export class LocalDelivery<T> implements Delivery<T> {
  readonly id: string;
  readonly topic: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly attempt = 1;
  readonly publishedAt = Date.now();
  readonly headers: Readonly<Record<string, string>>;
  readonly leaseDeadline = Number.POSITIVE_INFINITY;
  /** Resolves once the handler's outcome is settled; rejects if a put-back failed. */
  readonly settled: Promise<void>;
  readonly #topic: LeaseQueue<T>;
  readonly #putBackHeaders: Readonly<Record<string, string>>;
  #resolve!: () => void;
  #reject!: (err: unknown) => void;

  constructor(topic: LeaseQueue<T>, fields: LocalDeliveryFields<T>) {
    this.#topic = topic;
    this.topic = topic.name;
    this.id = fields.id;
    this.payload = fields.payload;
    this.priority = fields.priority;
    this.key = fields.key;
    this.headers = fields.headers ?? {};
    this.#putBackHeaders = fields.putBackHeaders ?? this.headers;
    this.settled = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Whoever handed it off awaits `settled`; a put-back that failed with nobody waiting must
    // not crash the process as an unhandled rejection.
    this.settled.catch(() => {});
  }

  ack(): Promise<void> {
    this.#resolve();
    return Promise.resolve();
  }

  nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    return this.#putBack(options.delayMs ?? 0);
  }

  /**
   * Published rather than dead-lettered: there is no message to move yet. The topic's own
   * delivery of it is dead-lettered by the broker if it keeps failing.
   */
  deadLetter(): Promise<void> {
    return this.#putBack(0);
  }

  extendLease(): Promise<void> {
    return Promise.resolve();
  }

  async #putBack(delayMs: number): Promise<void> {
    try {
      await this.#topic.publish([
        {
          payload: this.payload,
          priority: this.priority,
          headers: { ...this.#putBackHeaders },
          ...(delayMs > 0 ? { delayMs } : {}),
          ...(this.key === undefined ? {} : { key: this.key }),
        },
      ]);
      this.#resolve();
    } catch (err) {
      this.#reject(err);
      throw err;
    }
  }
}

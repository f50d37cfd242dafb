/**
 * Items and where they go. Every item carries a stable `itemId`:
 *
 *   itemId = <fingerprint of the request whose response was parsed> ':' <position of the item in that parse>
 *
 * A parse that runs again (a retry, a redelivery after a crash) emits the same items in the
 * same order and so the same ids: a sink that upserts on `itemId` gets each item exactly once,
 * although delivery itself is at-least-once.
 */

/** What a sink learns about an item besides the item itself. */
export interface ItemMeta {
  /** Stable id (see above): dedupe on it for exactly-once effects. */
  readonly itemId: string;
  /** Position of the item among the items of its parse (0-based). */
  readonly index: number;
  /** Final URL of the response it was parsed from. */
  readonly url: string;
  readonly module: string;
  readonly node: string;
  readonly runId: string;
}

/**
 * Where items go. `write` runs inline in the parse stage, before the response is acknowledged:
 * a slow `write` slows the crawl (backpressure), and a `write` that throws fails the parse
 * (SinkFailedError, retried by the policy).
 */
export interface DataSink<TItem> {
  write(item: TItem, meta: ItemMeta): void | Promise<void>;
  /** The run has ended (idle, stopped or failed): flush and release. Called once. */
  close?(): void | Promise<void>;
}

import type { DataSink, ItemMeta } from '@mocra/core';

/**
 * A sink from a function: called once per item, awaited before the page is acknowledged
 * (a slow function slows the crawl; one that throws fails the parse, which is retried).
 */
export function onItem<TItem>(fn: (item: TItem, meta: ItemMeta) => void | Promise<void>): DataSink<TItem> {
  if (typeof fn !== 'function') throw new TypeError('onItem needs a function');
  return { write: fn };
}

/**
 * Routing by label, for spiders whose pages are of several kinds (a listing, a detail page):
 * each request carries `meta.label` (`cx.follow(url, { label })`, `cx.enqueueLinks({ label })`,
 * `seeds.get(url).meta.label = …`), and the router hands its response to the handler of that
 * label — no `if` on `cx.meta.label` in `parse`. A request without a label goes to the default
 * handler. A label that has no handler is an error (a typo would otherwise send pages to the
 * default handler unnoticed).
 */
import { InvalidArgumentError, NonRetryableError, type Response } from '@mocra/core';
import type { Ctx } from './spider.js';

/** What handles the responses of one label: a spider's `parse`, for those pages. */
export type RouteHandler<TItem = unknown> = (res: Response, cx: Ctx<TItem>) => void | Promise<void>;

/** A spider's `parse` that dispatches on `request.meta.label`. */
export interface Router<TItem = unknown> {
  (res: Response, cx: Ctx<TItem>): Promise<void>;
  /** Handle the responses of requests labelled `label`. Throws for a label that has one. */
  addHandler(label: string, handler: RouteHandler<TItem>): this;
  /** Handle the responses of requests without a label. Throws when there is one already. */
  addDefaultHandler(handler: RouteHandler<TItem>): this;
  /** The labels that have a handler. */
  readonly labels: readonly string[];
}

/**
 * A router to pass as a spider's `parse`:
 *
 * ```ts
 * const router = createRouter<Book>();
 * router.addDefaultHandler((res, cx) => cx.enqueueLinks({ selector: 'h3 a', label: 'detail' }));
 * router.addHandler('detail', (res, cx) => cx.emit({ title: res.$('h1').text() }));
 * defineSpider({ name: 'books', startUrls: [url], parse: router });
 * ```
 */
export function createRouter<TItem = unknown>(
  routes: Record<string, RouteHandler<TItem>> = {},
): Router<TItem> {
  const handlers = new Map<string, RouteHandler<TItem>>();
  let fallback: RouteHandler<TItem> | undefined;
  const checked = (what: string, handler: unknown): RouteHandler<TItem> => {
    if (typeof handler !== 'function')
      throw new InvalidArgumentError(`${what}: the handler must be a function`);
    return handler as RouteHandler<TItem>;
  };
  const router = (async (res: Response, cx: Ctx<TItem>) => {
    const label = res.request.meta.label;
    if (label === undefined || label === null) {
      if (fallback === undefined) {
        throw new NonRetryableError(
          `no default handler for a request without a label (${res.request.url}); add one with router.addDefaultHandler()`,
        );
      }
      return fallback(res, cx);
    }
    const handler = typeof label === 'string' ? handlers.get(label) : undefined;
    if (handler === undefined) {
      const known = [...handlers.keys()].map((l) => `'${l}'`).join(', ') || 'none';
      throw new NonRetryableError(
        `no handler for label ${JSON.stringify(label)} (${res.request.url}); labels with a handler: ${known}`,
      );
    }
    return handler(res, cx);
  }) as Router<TItem>;
  Object.defineProperties(router, {
    addHandler: {
      value(label: string, handler: RouteHandler<TItem>) {
        if (typeof label !== 'string' || label === '') {
          throw new InvalidArgumentError('router.addHandler: the label must be a non-empty string');
        }
        if (handlers.has(label))
          throw new InvalidArgumentError(`router.addHandler: label '${label}' has a handler already`);
        handlers.set(label, checked(`router.addHandler('${label}')`, handler));
        return router;
      },
    },
    addDefaultHandler: {
      value(handler: RouteHandler<TItem>) {
        if (fallback !== undefined)
          throw new InvalidArgumentError('router.addDefaultHandler: there is a default handler already');
        fallback = checked('router.addDefaultHandler', handler);
        return router;
      },
    },
    labels: { get: () => [...handlers.keys()] },
  });
  for (const [label, handler] of Object.entries(routes)) router.addHandler(label, handler);
  return router;
}

/**
 * The Spider: the 80 % path. A spider has a name, says where to start and how to parse a
 * response; the engine runs it as a module with a single node, so everything a module gets
 * (queues, retries, dedup, stats) a spider gets too.
 *
 * ```ts
 * const spider = defineSpider<Book>({
 *   name: 'books',
 *   startUrls: ['https://example.com/books/page/1'],
 *   parse(res, cx) {
 *     for (const el of res.$('.book').toArray()) cx.emit({ title: res.$(el).find('h3').text() });
 *     const next = res.$('a.next').attr('href');
 *     if (next) cx.follow(next);
 *   },
 * });
 * ```
 */
import {
  InvalidArgumentError,
  type Module,
  type ParseContext,
  Request,
  type RequestData,
  type RequestInit,
  type Response,
} from '@mocra/core';

/** What `parse` works with: `cx.emit(item)`, `cx.follow(urlOrRequest)`, `cx.meta`, `cx.depth`, `cx.log`. */
export type Ctx<TItem = unknown> = ParseContext<TItem>;

export interface Spider<TItem = unknown> {
  /** Unique per run: names the module, its stats and its items' ids. */
  readonly name: string;
  /** Add the first requests: `seeds.get(url)`, `seeds.add(request)`. */
  start(seeds: Seeds): void | Promise<void>;
  /** Turn a response (any status) into items and follow-ups. */
  parse(res: Response, cx: Ctx<TItem>): void | Promise<void>;
}

/** What `defineSpider` accepts: a Spider whose `start` may be replaced by a list of URLs. */
export interface SpiderDefinition<TItem = unknown> {
  readonly name: string;
  /** GET requests to start with (in addition to whatever `start` adds). */
  readonly startUrls?: readonly string[];
  start?(seeds: Seeds): void | Promise<void>;
  parse(res: Response, cx: Ctx<TItem>): void | Promise<void>;
}

/** Check a spider definition and return it as a {@link Spider}. */
export function defineSpider<TItem = unknown>(definition: SpiderDefinition<TItem>): Spider<TItem> {
  if (definition === null || typeof definition !== 'object') {
    throw new InvalidArgumentError('defineSpider needs an object with name and parse');
  }
  if (typeof definition.name !== 'string' || definition.name.trim() === '') {
    throw new InvalidArgumentError('a spider needs a non-empty name');
  }
  if (typeof definition.parse !== 'function') {
    throw new InvalidArgumentError(`spider '${definition.name}' needs a parse(res, cx) function`);
  }
  const { startUrls, start } = definition;
  if (startUrls === undefined && start === undefined) {
    throw new InvalidArgumentError(`spider '${definition.name}' needs startUrls or a start(seeds) function`);
  }
  if (
    startUrls !== undefined &&
    (!Array.isArray(startUrls) || startUrls.some((u) => typeof u !== 'string'))
  ) {
    throw new InvalidArgumentError(`spider '${definition.name}': startUrls must be an array of strings`);
  }
  return {
    name: definition.name,
    async start(seeds: Seeds) {
      for (const url of startUrls ?? []) seeds.get(url);
      if (start) await start.call(definition, seeds);
    },
    parse: (res, cx) => definition.parse(res, cx),
  };
}

/** Collects the requests a spider starts with. Each method returns the request, to adjust further. */
export class Seeds {
  readonly #requests: Request[] = [];

  /** A GET request for `url` (headers, meta… can be set on the returned request). */
  get(url: string, init?: RequestInit): Request {
    const request = new Request(url, init);
    this.#requests.push(request);
    return request;
  }

  /** Any request: a Request, or its plain data (`{ url, method, headers, body, meta }`). */
  add(request: Request | RequestData): Request {
    const r = Request.from(request);
    this.#requests.push(r);
    return r;
  }

  /** The requests added so far, in order. */
  get requests(): readonly Request[] {
    return this.#requests;
  }
}

/** The node id a compiled spider runs as. */
export const SPIDER_NODE_ID = 'spider';

/** A spider as the engine runs it: a module with one node whose generate calls `start`. */
export function compileSpider<TItem>(spider: Spider<TItem>): Module<TItem> {
  if (
    spider === null ||
    typeof spider !== 'object' ||
    typeof spider.name !== 'string' ||
    spider.name === ''
  ) {
    throw new InvalidArgumentError('a spider needs a non-empty name');
  }
  if (typeof spider.start !== 'function' || typeof spider.parse !== 'function') {
    throw new InvalidArgumentError(`spider '${spider.name}' needs start(seeds) and parse(res, cx)`);
  }
  return {
    name: spider.name,
    nodes: [
      {
        id: SPIDER_NODE_ID,
        async generate(ctx) {
          // Follow-ups carry their requests and never reach here; only the run's task does.
          if (ctx.trigger !== 'task') return undefined;
          const seeds = new Seeds();
          await spider.start(seeds);
          return seeds.requests;
        },
        parse: (res, cx) => spider.parse(res, cx),
      },
    ],
  };
}

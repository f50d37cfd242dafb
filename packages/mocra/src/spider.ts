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
  type GenerateContext,
  InvalidArgumentError,
  type LoginInfo,
  type Module,
  type ParseContext,
  type ProxyChoice,
  Request,
  type RequestData,
  type RequestInit,
  type Response,
} from '@mocra/core';
import { requestsFromSitemaps, type SitemapSeed, type SitemapSeedOptions } from './sitemap-seeds.js';

/** What `parse` works with: `cx.emit(item)`, `cx.follow(urlOrRequest)`, `cx.meta`, `cx.depth`, `cx.log`. */
export type Ctx<TItem = unknown> = ParseContext<TItem>;

/**
 * What a spider can have that any module has (it runs as a one-node module): a schedule, a
 * login, default headers, its own config layer. See docs/module-development.md.
 */
export interface SpiderModuleOptions {
  /** Start runs on a schedule (`'0 *\/5 * * * *'`, `every.hours(1)`, or `{ schedule, targets }`). */
  readonly cron?: NonNullable<Module['cron']>;
  /** Log the account × platform session in (with `login`) before the first request. @default false */
  readonly shouldLogin?: boolean;
  readonly login?: NonNullable<Module['login']>;
  /** Besides the `login_statuses`, a response for which this is true means the session is gone. */
  readonly sessionGone?: NonNullable<Module['sessionGone']>;
  /** Headers every request carries unless it sets them. */
  readonly headers?: NonNullable<Module['headers']>;
  /** The spider's own module-config layer (keys of docs/configuration.md#module-config, and yours). */
  readonly config?: NonNullable<Module['config']>;
  /** @default 1 */
  readonly version?: number;
  /** Before each run's `start` (Rust mocra's `pre_process`); throwing fails the run's task (`RetryLaterError`: retried). */
  readonly onRunStart?: NonNullable<Module['onRunStart']>;
  /** Once after each run, when its work ran out or it was stopped (Rust mocra's `post_process`). */
  readonly onRunEnd?: NonNullable<Module['onRunEnd']>;
}

export interface Spider<TItem = unknown> extends SpiderModuleOptions {
  /** Unique per run: names the module, its stats and its items' ids. */
  readonly name: string;
  /** Add the first requests: `seeds.get(url)`, `seeds.add(request)`. */
  start(seeds: Seeds): void | Promise<void>;
  /** Turn a response (any status) into items and follow-ups. */
  parse(res: Response, cx: Ctx<TItem>): void | Promise<void>;
  /** The registered downloader (by name) for this spider's requests; a request's own wins. @default the default downloader */
  readonly downloader?: string;
  /** Proxy use: `false` never, `true` the pool's choice, or pin `{ provider, tier }`. @default true when proxies are configured */
  readonly proxy?: ProxyChoice;
}

/** What `defineSpider` accepts: a Spider whose `start` may be replaced by a list of URLs. */
export interface SpiderDefinition<TItem = unknown> extends SpiderModuleOptions {
  readonly name: string;
  /** GET requests to start with (in addition to whatever `start` adds). */
  readonly startUrls?: readonly string[];
  start?(seeds: Seeds): void | Promise<void>;
  parse(res: Response, cx: Ctx<TItem>): void | Promise<void>;
  readonly downloader?: string;
  readonly proxy?: ProxyChoice;
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
    ...(definition.downloader === undefined ? {} : { downloader: definition.downloader }),
    ...(definition.proxy === undefined ? {} : { proxy: definition.proxy }),
    ...moduleOptionsOf(definition),
  };
}

/** The module options a spider (definition) sets, without undefined keys. */
function moduleOptionsOf(source: SpiderModuleOptions): SpiderModuleOptions {
  const out: { -readonly [K in keyof SpiderModuleOptions]: SpiderModuleOptions[K] } = {};
  if (source.cron !== undefined) out.cron = source.cron;
  if (source.shouldLogin !== undefined) out.shouldLogin = source.shouldLogin;
  if (source.login !== undefined) out.login = source.login;
  if (source.sessionGone !== undefined) out.sessionGone = source.sessionGone;
  if (source.headers !== undefined) out.headers = source.headers;
  if (source.config !== undefined) out.config = source.config;
  if (source.version !== undefined) out.version = source.version;
  if (source.onRunStart !== undefined) out.onRunStart = source.onRunStart;
  if (source.onRunEnd !== undefined) out.onRunEnd = source.onRunEnd;
  return out;
}

/** Collects the requests a spider starts with. Each method returns the request, to adjust further. */
export class Seeds {
  readonly #requests: Request[] = [];
  readonly #sitemaps: SitemapSeed[] = [];
  /** The run's parameters (a cron firing's, a submitted task's `params`). */
  readonly params: Readonly<Record<string, unknown>>;
  /** The account and platform of the run. @default 'default' */
  readonly account: string;
  readonly platform: string;
  /** The session's login, for a spider with `shouldLogin`. */
  readonly login: LoginInfo | undefined;

  constructor(ctx?: Pick<GenerateContext, 'params' | 'account' | 'platform' | 'login'>) {
    this.params = ctx?.params ?? {};
    this.account = ctx?.account ?? 'default';
    this.platform = ctx?.platform ?? 'default';
    this.login = ctx?.login;
  }

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

  /**
   * Every page the sitemap at `url` lists becomes a GET request (sitemap indexes, `.xml.gz`
   * and plain-text sitemaps; read when the run starts). docs/crawling.md#sitemaps
   */
  sitemap(url: string, options: SitemapSeedOptions = {}): this {
    this.#sitemaps.push({ url, discover: false, options });
    return this;
  }

  /** The same for every sitemap `siteUrl`'s robots.txt lists (or its `/sitemap.xml`). */
  sitemaps(siteUrl: string, options: SitemapSeedOptions = {}): this {
    this.#sitemaps.push({ url: siteUrl, discover: true, options });
    return this;
  }

  /** The sitemaps added so far. */
  get sitemapSeeds(): readonly SitemapSeed[] {
    return this.#sitemaps;
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
          const seeds = new Seeds(ctx);
          await spider.start(seeds);
          if (seeds.sitemapSeeds.length === 0) return seeds.requests;
          return [...seeds.requests, ...(await requestsFromSitemaps(seeds.sitemapSeeds, ctx))];
        },
        parse: (res, cx) => spider.parse(res, cx),
      },
    ],
    ...(spider.downloader === undefined ? {} : { downloader: spider.downloader }),
    ...(spider.proxy === undefined ? {} : { proxy: spider.proxy }),
    ...moduleOptionsOf(spider),
  };
}

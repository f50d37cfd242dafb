/**
 * `mocra crawl <url…>`: crawl a site by following its links, with the frontier's scope,
 * filters, limits and politeness, writing one record per page.
 */
import { createLinkFilter, type ErrorEvent, type PolicyDecision } from '@mocra/core';
import { Mocra } from '../builder.js';
import { CliUsageError } from '../errors.js';
import { type Ctx, defineSpider } from '../spider.js';
import { type CliIo, execute, type Failure } from './execute.js';
import { type PageRecord, RecordWriter } from './records.js';
import { type CrawlFlags, configureBuilder } from './runtime-options.js';

/** Absolute http(s) start URLs, or a CliUsageError naming the bad one. */
export function checkStartUrls(urls: readonly string[]): string[] {
  if (urls.length === 0) throw new CliUsageError('give at least one start URL');
  return urls.map((raw) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new CliUsageError(`'${raw}' is not an absolute URL (write it with http:// or https://)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new CliUsageError(`'${raw}': only http and https URLs can be crawled`);
    }
    return url.href;
  });
}

/** The directory of a URL (its path up to the last '/'), the default prefix of `--scope prefix`. */
function directoryOf(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname.slice(0, u.pathname.lastIndexOf('/') + 1)}`;
}

export async function crawlCommand(
  rawUrls: readonly string[],
  flags: CrawlFlags,
  io: CliIo,
): Promise<number> {
  const startUrls = checkStartUrls(rawUrls);
  const writer =
    flags.out === undefined
      ? undefined
      : new RecordWriter(flags.out, { resume: flags.persist !== undefined });
  const failures: Failure[] = [];
  const links = {
    scope: flags.scope,
    ...(flags.scope === 'prefix' ? { prefix: startUrls.map(directoryOf) } : {}),
    ...(flags.include.length > 0 ? { include: flags.include } : {}),
    ...(flags.exclude.length > 0 ? { exclude: flags.exclude } : {}),
    respectNofollow: flags.respectNofollow,
  };
  const sitemapScope = createLinkFilter(links);
  const spider = defineSpider<PageRecord>({
    name: 'crawl',
    startUrls,
    start(seeds) {
      if (!flags.sitemaps) return;
      // Sitemap pages are held to the crawl's scope like links: measured from the start URL whose
      // site listed them.
      for (const url of startUrls) {
        const reference = new URL(url);
        seeds.sitemaps(reference.origin, {
          filter: (entry) => sitemapScope.test(new URL(entry.url), reference),
          ...(robots === undefined ? {} : { robots }),
        });
      }
    },
    parse(res, cx: Ctx<PageRecord>) {
      const found = cx.enqueueLinks(links);
      cx.emit({
        url: res.request.url,
        finalUrl: res.url,
        status: res.status,
        contentType: res.contentType ?? null,
        bytes: res.body.length,
        depth: cx.depth,
        title: found.title ?? null,
        links: found.found,
        fetchMs: Math.round(res.durationMs),
        error: null,
      });
    },
  });
  const builder = Mocra.builder();
  const robots = configureBuilder(builder, flags);
  builder
    .spider(spider, (record) => writer?.write(record))
    .onError((event: ErrorEvent, decision: PolicyDecision) => {
      if (decision.action === 'retry' || event.stage !== 'download') return;
      const url = event.url ?? urlOf(event.payload);
      if (url === undefined) return;
      failures.push({ url, code: event.code, message: event.message });
      writer?.write({
        url,
        finalUrl: null,
        status: event.status ?? null,
        contentType: null,
        bytes: 0,
        depth: depthOf(event.payload),
        title: null,
        links: 0,
        fetchMs: null,
        error: event.code,
      });
    });
  return execute(
    builder,
    flags,
    {
      robots,
      label: `crawl of ${startUrls.length === 1 ? startUrls[0] : `${startUrls.length} start URLs`}`,
      startUrls,
      failures,
      out:
        writer === undefined
          ? undefined
          : {
              file: writer.file,
              written: () => writer.written,
              resumed: () => writer.resumed,
              close: () => writer.close(),
            },
    },
    io,
  );
}

function urlOf(payload: unknown): string | undefined {
  const url = (payload as { url?: unknown } | undefined)?.url;
  return typeof url === 'string' ? url : undefined;
}

function depthOf(payload: unknown): number {
  const depth = (payload as { depth?: unknown } | undefined)?.depth;
  return typeof depth === 'number' ? depth : 0;
}

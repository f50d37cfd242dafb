/**
 * `mocra crawl <url…>`: crawl a site by following its links, with the frontier's scope,
 * filters, limits and politeness, writing one record per page.
 */
import { createLinkFilter, type ErrorEvent, type PolicyDecision, redactUrlCredentials } from '@mocra/core';
import { Mocra } from '../builder.js';
import { CliUsageError } from '../errors.js';
import { type Ctx, defineSpider } from '../spider.js';
import { type CliIo, execute, type Output } from './execute.js';
import { OutputFile } from './output-file.js';
import { CSV_HEADER, formatOf, type PageRecord, RECORD_FIELDS, RECORD_SCHEMA } from './records.js';
import { type CrawlFlags, configureBuilder } from './runtime-options.js';

/** A host name label: letters, digits, `-` inside, `_` (seen in private networks); up to 63. */
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/i;

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
    // An IPv6 literal is checked by URL itself; a name must be one DNS could resolve.
    const host = url.hostname.replace(/\.$/, '');
    if (!host.startsWith('[') && !host.split('.').every((label) => LABEL.test(label))) {
      throw new CliUsageError(`'${raw}': '${url.hostname}' is not a valid host name`);
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
  // Without --out, records go to standard output when it is a pipe or a file; on a terminal they
  // are not kept (a page of JSON per page crawled is not for reading), and the CLI says so.
  const file = flags.out ?? (io.stdout.isTTY === true ? undefined : '-');
  if (file !== undefined) formatOf(file); // a bad extension is a usage error before anything runs
  let writer: OutputFile | undefined;
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
          fetch,
          ...(robots === undefined ? {} : { robots }),
        });
      }
    },
    parse(res, cx: Ctx<PageRecord>) {
      const found = cx.enqueueLinks(links);
      cx.emit({
        url: redactUrlCredentials(res.request.url),
        finalUrl: redactUrlCredentials(res.url),
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
  const { robots, fetch } = configureBuilder(builder, flags);
  // The page is acknowledged once its record is with the OS (the batch's write).
  builder.spider(spider, (record) => {
    if (writer === undefined) return undefined;
    writer.write(record.url, record);
    return writer.flushed();
  });
  // A URL given up on is a record too, with its error code.
  const onError = (event: ErrorEvent, decision: PolicyDecision) => {
    if (decision.action === 'retry' || event.stage !== 'download') return;
    const raw = event.url ?? urlOf(event.payload);
    if (raw === undefined) return;
    const url = redactUrlCredentials(raw);
    writer?.write(url, {
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
    } satisfies PageRecord);
    // Nothing waits for this record before the failure is settled: it is written now.
    writer?.flush();
  };
  const open = (): Output => {
    if (file === undefined) {
      return { file: undefined, written: () => 0, resumed: () => 0, close: () => {} };
    }
    const opened = new OutputFile(file, {
      csv: { fields: RECORD_FIELDS, header: CSV_HEADER },
      schema: RECORD_SCHEMA,
      ...(flags.persist === undefined ? {} : { persist: flags.persist }),
    });
    writer = opened;
    return {
      file: file === '-' ? 'standard output' : file,
      written: () => opened.written,
      resumed: () => opened.resumed,
      close: () => opened.close(),
    };
  };
  if (file === undefined) {
    io.stderr.write(
      'mocra: no --out: records are not kept (give --out pages.jsonl, or pipe standard output)\n',
    );
  }
  return execute(
    builder,
    flags,
    {
      robots,
      label: `crawl of ${startUrls.length === 1 ? startUrls[0] : `${startUrls.length} start URLs`}`,
      startUrls,
      open,
      onError,
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

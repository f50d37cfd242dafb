// Test helpers: real HTTP requests with undici, and a small same-host BFS crawler.
// (Under __fixtures__, so they are not published.)
import { Agent, request } from 'undici';

export interface Fetched {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
}

/** A dispatcher per test file, so one file's keep-alive sockets never meet another's site. */
export const agent = new Agent({ connections: 16, keepAliveTimeout: 1000 });

export async function get(
  url: string,
  options: { method?: 'GET' | 'POST' | 'HEAD'; headers?: Record<string, string>; body?: string } = {},
): Promise<Fetched> {
  const res = await request(url, {
    dispatcher: agent,
    method: options.method ?? 'GET',
    ...(options.headers === undefined ? {} : { headers: options.headers }),
    ...(options.body === undefined ? {} : { body: options.body }),
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body, text: body.toString('utf8') };
}

export function header(f: Fetched, name: string): string | undefined {
  const v = f.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Every `href` of an `<a>` element, in document order. */
export function links(html: string): string[] {
  return [...html.matchAll(/<a\b[^>]*\bhref="([^"]*)"/g)].map((m) => m[1]!);
}

/** Text content of every element matching `<tag class="…cls…">`, tags stripped. */
export function texts(html: string, tag: string, cls: string): string[] {
  const re = new RegExp(
    `<${tag}\\b[^>]*class="(?:[^"]*\\s)?${cls}(?:\\s[^"]*)?"[^>]*>([\\s\\S]*?)</${tag}>`,
    'g',
  );
  return [...html.matchAll(re)].map((m) => m[1]!.replace(/<[^>]+>/g, '').trim());
}

/**
 * Breadth-first crawl of same-origin, root-relative links from `start`, at most `limit` pages,
 * `concurrency` requests at a time. Returns every path fetched with its status and links.
 */
export async function crawl(
  origin: string,
  start: string,
  limit: number,
  concurrency = 8,
): Promise<Map<string, { status: number; links: string[] }>> {
  const seen = new Set<string>([start]);
  const queue = [start];
  const pages = new Map<string, { status: number; links: string[] }>();
  async function worker(): Promise<void> {
    while (queue.length > 0 && pages.size < limit) {
      const path = queue.shift()!;
      const f = await get(origin + path);
      const found = links(f.text).filter((l) => l.startsWith('/') && !l.startsWith('//'));
      pages.set(path, { status: f.status, links: found });
      for (const l of found) {
        if (!seen.has(l) && seen.size < limit * 4) {
          seen.add(l);
          queue.push(l);
        }
      }
    }
  }
  // Workers stop when the queue is momentarily empty; loop until no work remains.
  while (queue.length > 0 && pages.size < limit)
    await Promise.all(Array.from({ length: concurrency }, worker));
  return pages;
}

/** Waits (at most `ms`) until the site has no request in flight: the server logs a request when its socket closes, which can be after the client saw the end. */
export async function settled(
  site: { stats(o: { log: boolean }): { inFlight: number } },
  ms = 2000,
): Promise<void> {
  const until = Date.now() + ms;
  while (site.stats({ log: false }).inFlight > 0 && Date.now() < until)
    await new Promise((r) => setTimeout(r, 5));
}

/** The text of `/robots.txt`. */
import type { ResolvedRobots } from '../site/options.js';

/** What `/robots.txt` answers for a host: status and body. */
export function robotsResponse(robots: ResolvedRobots, origin: string): { status: number; body: string } {
  if (robots === false) return { status: 404, body: 'No robots.txt here.\n' };
  if (typeof robots === 'string') return { status: 200, body: robots.replaceAll('{origin}', origin) };
  const lines = ['# robots.txt of the mocra fixture site', 'User-agent: *'];
  for (const p of robots.allow) lines.push(`Allow: ${p}`);
  for (const p of robots.disallow) lines.push(`Disallow: ${p}`);
  if (robots.crawlDelay !== undefined) lines.push(`Crawl-delay: ${robots.crawlDelay}`);
  if (robots.slowbotGroup)
    lines.push('', 'User-agent: fixture-slowbot', 'Crawl-delay: 5', 'Disallow: /books/');
  if (robots.sitemaps) lines.push('', `Sitemap: ${origin}/sitemap.xml`, `Sitemap: ${origin}/sitemap.txt`);
  const body = `${lines.join('\n')}\n`;
  return {
    status: robots.status,
    body: robots.status === 200 ? body : `robots.txt answers ${robots.status}\n`,
  };
}

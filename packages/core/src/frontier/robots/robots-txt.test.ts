import { describe, expect, test } from 'vitest';
import { RobotsCache } from './robots-cache.js';
import { compileRobotsTxt, productToken } from './robots-txt.js';

describe('compileRobotsTxt', () => {
  test('a hostile wildcard pattern is matched without backtracking, and correctly', () => {
    const pattern = `/${'*a'.repeat(2000)}*b`;
    const rules = compileRobotsTxt(`User-agent: *\nDisallow: ${pattern}\n`, 'mocra');
    expect(rules.isAllowed(`http://e.test/${'a'.repeat(3000)}`)).toBe(true);
    expect(rules.isAllowed(`http://e.test/${'a'.repeat(3000)}b`)).toBe(false);
  });

  test('Crawl-delay of the chosen group, sitemaps of the whole file', () => {
    const rules = compileRobotsTxt(
      'Sitemap: http://e.test/a.xml\nUser-agent: *\nCrawl-delay: 9\nUser-agent: mocra\nCrawl-delay: 2\nDisallow: /x\nsitemap: http://e.test/b.xml\n',
      'mocra',
    );
    // Both user-agent lines open one group: its first Crawl-delay applies to both.
    expect(rules.crawlDelaySeconds).toBe(9);
    expect(rules.group).toBe('agent');
    expect(rules.sitemaps).toEqual(['http://e.test/a.xml', 'http://e.test/b.xml']);
    expect(compileRobotsTxt('User-agent: *\nCrawl-delay: soon\n', 'mocra').crawlDelaySeconds).toBeUndefined();
  });

  test('the product token of a User-Agent string; a RobotsCache refuses one without a token', () => {
    expect(productToken('MyBot/1.0 (+https://example.com)')).toBe('mybot');
    expect(productToken('*')).toBe('');
    expect(() => new RobotsCache({ userAgent: '/1.0' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { crawl, get, links } from '../__fixtures__/http.js';
import { FixtureOptionError } from '../errors.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { graphLinkCount, graphLinks, graphPageCount, graphPath, graphTreeDepth } from './graph.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

describe('link graph helpers', () => {
  test('every page has exactly fan-out links: tree children first, then cross links in range', () => {
    const spec = { pages: 1000, fanout: 4, bytes: 0 };
    expect(graphLinks(spec, 0)).toEqual([1, 2, 3, 4]);
    expect(graphLinks(spec, 5)).toEqual([21, 22, 23, 24]);
    // Page 249 has children 997, 998, 999 and one cross link.
    const l = graphLinks(spec, 249);
    expect(l.slice(0, 3)).toEqual([997, 998, 999]);
    expect(l).toHaveLength(4);
    for (const i of [250, 600, 999]) {
      const cross = graphLinks(spec, i);
      expect(cross).toHaveLength(4);
      expect(cross.every((j) => Number.isInteger(j) && j >= 0 && j < 1000)).toBe(true);
    }
    expect(graphPageCount(spec)).toBe(1000);
    expect(graphLinkCount(spec)).toBe(4000);
    expect(graphTreeDepth(spec)).toBe(5); // 1 + 4 + 16 + 64 + 256 = 341 < 1000 <= 1365
    expect(graphTreeDepth({ pages: 1, fanout: 3, bytes: 0 })).toBe(0);
  });

  test('deterministic per seed; a different seed moves the cross links only', () => {
    const spec = { pages: 10_000, fanout: 5, bytes: 100 };
    expect(graphLinks(spec, 9000)).toEqual(graphLinks(spec, 9000));
    expect(graphLinks(spec, 9000, { seed: 2 })).not.toEqual(graphLinks(spec, 9000, { seed: 1 }));
    expect(graphLinks(spec, 3, { seed: 2 })).toEqual(graphLinks(spec, 3, { seed: 1 }));
  });

  test('bad specs and indexes throw MOCRA_ERR_TESTKIT_INVALID_OPTION', () => {
    for (const bad of [
      { pages: 0, fanout: 1, bytes: 0 },
      { pages: 10, fanout: 0, bytes: 0 },
      { pages: 10, fanout: 1001, bytes: 0 },
      { pages: 10, fanout: 1, bytes: -1 },
      { pages: 1.5, fanout: 1, bytes: 0 },
    ]) {
      expect(() => graphPath(bad)).toThrow(FixtureOptionError);
    }
    expect(() => graphLinks({ pages: 10, fanout: 2, bytes: 0 }, 10)).toThrowError(
      expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION' }),
    );
  });
});

describe('link graph over HTTP', () => {
  test('a BFS from page 0 reaches exactly N distinct pages, whose links match graphLinks()', async () => {
    const spec = { pages: 300, fanout: 3, bytes: 600 };
    const start = graphPath(spec, 0);
    const pages = await crawl(site.url, start, 1000);
    expect(pages.size).toBe(300);
    const prefix = '/graph/300/3/600/';
    const indexes = [...pages.keys()].map((p) => Number(p.slice(prefix.length))).sort((a, b) => a - b);
    expect(indexes).toEqual(Array.from({ length: 300 }, (_, i) => i));
    for (const [path, page] of pages) {
      expect(page.status).toBe(200);
      const i = Number(path.slice(prefix.length));
      expect(page.links).toEqual(graphLinks(spec, i).map((j) => `${prefix}${j}`));
    }
  });

  test('page bodies are exactly the requested size, padded with paragraphs', async () => {
    for (const bytes of [1000, 2048, 51_200, 1_000_000]) {
      const f = await get(`${site.url}/graph/1000/10/${bytes}/7`);
      expect(f.status).toBe(200);
      expect(f.body.length).toBe(bytes);
      expect(f.headers['content-length']).toBe(String(bytes));
      expect(f.text.startsWith('<!DOCTYPE html>')).toBe(true);
      expect(f.text.endsWith('</html>\n')).toBe(true);
      expect(f.text).toMatch(/<div class="filler">\n<p>[A-Z]/);
      expect(links(f.text)).toHaveLength(10);
    }
    // Smaller than the markup: the page is just its markup.
    const tiny = await get(`${site.url}/graph/1000/10/0/7`);
    expect(tiny.body.length).toBeGreaterThan(0);
    expect(tiny.text).not.toContain('<p>');
    expect(links(tiny.text)).toHaveLength(10);
  });

  test('serves the last page of a million-page graph and one server serves many graphs', async () => {
    const f = await get(site.graphUrl({ pages: 1_000_000, fanout: 20, bytes: 2048 }, 999_999));
    expect(f.status).toBe(200);
    expect(f.body.length).toBe(2048);
    expect(links(f.text)).toEqual(
      graphLinks({ pages: 1_000_000, fanout: 20, bytes: 2048 }, 999_999).map(
        (j) => `/graph/1000000/20/2048/${j}`,
      ),
    );
    const other = await get(site.graphUrl({ pages: 10, fanout: 2, bytes: 500 }, 4));
    expect(links(other.text)).toEqual([
      '/graph/10/2/500/9',
      `/graph/10/2/500/${graphLinks({ pages: 10, fanout: 2, bytes: 500 }, 4)[1]}`,
    ]);
  });

  test('identical bytes for identical requests; bad paths are 404', async () => {
    const a = await get(`${site.url}/graph/5000/8/4096/1234`);
    const b = await get(`${site.url}/graph/5000/8/4096/1234`);
    expect(a.body.equals(b.body)).toBe(true);
    for (const bad of [
      '/graph/10/2/100/10',
      '/graph/0/2/100/0',
      '/graph/10/0/100/0',
      '/graph/10/2/100/01',
      '/graph/10/2/x/1',
      '/graph/10/2/100',
    ]) {
      expect((await get(`${site.url}${bad}`)).status, bad).toBe(404);
    }
    const head = await get(`${site.url}/graph/10/2/300/1`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
  });
});

import { describe, expect, test } from 'vitest';
import { Request } from '../model/request.js';
import { type Deduplicator, MemoryDeduplicator } from './dedup.js';
import { Frontier } from './frontier.js';

const urls = (rs: Request[]) => rs.map((r) => r.url);

describe('Frontier.admit', () => {
  test('drops duplicates (also within one batch and across URL spellings) and sets fingerprints', async () => {
    const frontier = new Frontier();
    const first = await frontier.admit([
      new Request('http://e.com/a'),
      new Request('http://E.com:80/a#top'),
      new Request('http://e.com/b'),
    ]);
    expect(urls(first.admitted)).toEqual(['http://e.com/a', 'http://e.com/b']);
    expect(first.admitted.every((r) => typeof r.fingerprint === 'string')).toBe(true);
    const second = await frontier.admit([new Request('http://e.com/b'), new Request('http://e.com/c')]);
    expect(urls(second.admitted)).toEqual(['http://e.com/c']);
    expect(frontier.stats()).toMatchObject({ admitted: 3, duplicates: 2 });
  });

  test('skipDedup and dedupKey', async () => {
    const frontier = new Frontier();
    await frontier.admit([new Request('http://e.com/a')]);
    const again = await frontier.admit([
      new Request('http://e.com/a', { skipDedup: true }),
      new Request('http://e.com/x?session=1', { dedupKey: 'x' }),
      new Request('http://e.com/x?session=2', { dedupKey: 'x' }),
    ]);
    expect(urls(again.admitted)).toEqual(['http://e.com/a', 'http://e.com/x?session=1']);
  });

  test('dedup can be turned off', async () => {
    const frontier = new Frontier({ dedup: false });
    const r = await frontier.admit([new Request('http://e.com/a'), new Request('http://e.com/a')]);
    expect(r.admitted).toHaveLength(2);
  });

  test('maxDepth and maxPages', async () => {
    const frontier = new Frontier({ maxDepth: 1, maxPages: 3 });
    const r = await frontier.admit([
      new Request('http://e.com/0'),
      new Request('http://e.com/1', { depth: 1 }),
      new Request('http://e.com/2', { depth: 2 }),
      new Request('http://e.com/3'),
      new Request('http://e.com/0'),
      new Request('http://e.com/4'),
    ]);
    expect(urls(r.admitted)).toEqual(['http://e.com/0', 'http://e.com/1', 'http://e.com/3']);
    expect(frontier.stats()).toEqual({ admitted: 3, duplicates: 1, overDepth: 1, overLimit: 1, invalid: 0 });
  });

  test('invalid URLs come back with a typed error; the rest is admitted', async () => {
    const frontier = new Frontier();
    const r = await frontier.admit([
      new Request('nope'),
      new Request('http://e.com/ok'),
      new Request('ftp://e.com/x'),
    ]);
    expect(urls(r.admitted)).toEqual(['http://e.com/ok']);
    expect(r.invalid.map((i) => i.error.code)).toEqual(['MOCRA_ERR_INVALID_URL', 'MOCRA_ERR_INVALID_URL']);
  });

  test('works with an asynchronous deduplicator', async () => {
    const inner = new MemoryDeduplicator();
    const asyncDedup: Deduplicator = {
      markSeen: async (fps) => inner.markSeen(fps),
      size: async () => inner.size(),
      close: () => inner.close(),
    };
    const frontier = new Frontier({ deduplicator: asyncDedup });
    const r = await frontier.admit([new Request('http://e.com/a'), new Request('http://e.com/a')]);
    expect(r.admitted).toHaveLength(1);
    expect(inner.size()).toBe(1);
  });

  test('answers at once when the deduplicator does, so a parse hands its links on in the same turn', async () => {
    const frontier = new Frontier();
    const now = frontier.admit([new Request('http://e.com/a'), new Request('http://e.com/a')]);
    expect(now).not.toBeInstanceOf(Promise);
    expect(urls((now as Awaited<typeof now>).admitted)).toEqual(['http://e.com/a']);
    const failing = new Frontier({
      deduplicator: {
        markSeen: () => Promise.reject(new Error('store down')),
        size: () => 0,
        close: async () => {},
      },
    });
    const later = failing.admit([new Request('http://e.com/a')]);
    expect(later).toBeInstanceOf(Promise);
    await expect(later).rejects.toThrow('store down');
  });
});

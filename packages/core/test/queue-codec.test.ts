import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { CODEC_MAGIC, createQueueCodec } from '../src/queue/codec.js';

describe('queue codec', () => {
  test('json and msgpack round-trip; each reads what the other wrote', async () => {
    const json = createQueueCodec({ format: 'json' });
    const mp = createQueueCodec({ format: 'msgpack' });
    const doc = { url: 'https://a.example/?q=ü', depth: 2, tags: ['x', null, true], nested: { n: -1.5 } };
    expect(await json.decode(await json.encode(doc, 't'), 't')).toEqual(doc);
    expect(await mp.decode(await mp.encode(doc, 't'), 't')).toEqual(doc);
    expect(await json.decode(await mp.encode(doc, 't'), 't')).toEqual(doc);
    expect(await mp.decode(await json.encode(doc, 't'), 't')).toEqual(doc);
  });

  test('class instances travel as their toJSON() form with either codec', async () => {
    class Job {
      readonly #url: string;
      constructor(url: string) {
        this.#url = url;
      }
      toJSON() {
        return { url: this.#url, body: new Uint8Array([1, 2, 3]) };
      }
    }
    const mp = (await createQueueCodec({ format: 'msgpack' }).decode(
      await createQueueCodec({ format: 'msgpack' }).encode({ job: new Job('https://a.example/') }, 't'),
      't',
    )) as { job: { url: string; body: Uint8Array } };
    expect(mp.job.url).toBe('https://a.example/');
    expect(new Uint8Array(mp.job.body)).toEqual(new Uint8Array([1, 2, 3]));
    const json = (await createQueueCodec({ format: 'json' }).decode(
      await createQueueCodec({ format: 'json' }).encode({ job: new Job('https://a.example/') }, 't'),
      't',
    )) as { job: { url: string } };
    expect(json.job.url).toBe('https://a.example/');
  });

  test('the frame says which format and whether it is compressed', async () => {
    const json = createQueueCodec({ format: 'json', compressThresholdBytes: 100 });
    const small = await json.encode({ a: 1 }, 't');
    expect([small[0], small[1]]).toEqual([CODEC_MAGIC, 0x01]);
    const big = await json.encode({ text: 'abc'.repeat(1000) }, 't');
    expect([big[0], big[1]]).toEqual([CODEC_MAGIC, 0x11]);
    expect(big.length).toBeLessThan(3000);
    const mp = await createQueueCodec({ format: 'msgpack', compressThresholdBytes: 0 }).encode(
      { text: 'abc'.repeat(1000) },
      't',
    );
    expect([mp[0], mp[1]]).toEqual([CODEC_MAGIC, 0x02]);
  });

  test('incompressible payloads above the threshold are stored uncompressed', async () => {
    const codec = createQueueCodec({ format: 'msgpack', compressThresholdBytes: 10 });
    const noise = new Uint8Array(randomBytes(2000));
    const bytes = await codec.encode(noise, 't');
    expect(bytes[1]! & 0x10).toBe(0);
    expect(new Uint8Array((await codec.decode(bytes, 't')) as Uint8Array)).toEqual(noise);
  });

  test('bare JSON and bare gzip-compressed JSON from foreign producers are read', async () => {
    const codec = createQueueCodec();
    expect(await codec.decode(Buffer.from('{"a":[1,2]}'), 't')).toEqual({ a: [1, 2] });
    expect(await codec.decode(Buffer.from('"text"'), 't')).toBe('text');
    expect(await codec.decode(gzipSync(Buffer.from('[1,"two"]')), 't')).toEqual([1, 'two']);
  });

  test.each([
    ['empty', Buffer.alloc(0)],
    ['unknown first byte', Buffer.from([0xff, 0x00, 0x01])],
    ['truncated frame', Buffer.from([CODEC_MAGIC])],
    ['unknown flags', Buffer.from([CODEC_MAGIC, 0x41, 0x00])],
    ['unknown format', Buffer.from([CODEC_MAGIC, 0x07, 0x00])],
    ['broken JSON', Buffer.concat([Buffer.from([CODEC_MAGIC, 0x01]), Buffer.from('{"a":')])],
    ['broken gzip', Buffer.from([CODEC_MAGIC, 0x11, 0x1f, 0x8b, 0x08, 0x00])],
    ['bare text', Buffer.from('hello')],
  ])('poison (%s) is a QueueDecodeError', async (_, bytes) => {
    await expect(createQueueCodec().decode(bytes, 'jobs')).rejects.toMatchObject({
      code: 'MOCRA_ERR_QUEUE_DECODE',
      topic: 'jobs',
    });
  });

  test('a compression bomb over maxDecodedBytes is poison, not an allocation', async () => {
    const codec = createQueueCodec({ maxDecodedBytes: 1024 * 1024 });
    const bomb = Buffer.concat([
      Buffer.from([CODEC_MAGIC, 0x11]),
      gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20)),
    ]);
    expect(bomb.length).toBeLessThan(64 * 1024);
    await expect(codec.decode(bomb, 't')).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_DECODE' });
  });

  test('values a codec cannot carry are refused with QueueEncodeError', async () => {
    const json = createQueueCodec({ format: 'json' });
    await expect(json.encode({ n: 10n }, 'jobs')).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_ENCODE' });
    await expect(json.encode(undefined, 'jobs')).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_ENCODE' });
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    await expect(json.encode(cyclic, 'jobs')).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_ENCODE' });
  });

  test('bad options are refused', () => {
    expect(() => createQueueCodec({ format: 'xml' as 'json' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createQueueCodec({ compressThresholdBytes: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

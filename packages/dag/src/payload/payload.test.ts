import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  createPayload,
  decodePayload,
  decodePayloadMap,
  EMPTY_PAYLOAD,
  encodePayload,
  encodePayloadMap,
  InvalidEnvelopeError,
  InvalidPayloadError,
  isJsonContentType,
  isPayload,
  jsonPayload,
  type Payload,
  readJson,
  readText,
  textPayload,
  UnsupportedEnvelopeVersionError,
} from '../index.js';

const bytes = (...xs: number[]) => Uint8Array.from(xs);

function expectEnvelopeError(fn: () => unknown, reason: InvalidEnvelopeError['reason']): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(InvalidEnvelopeError);
  expect((thrown as InvalidEnvelopeError).reason).toBe(reason);
  expect((thrown as InvalidEnvelopeError).code).toBe('MOCRA_ERR_DAG_INVALID_ENVELOPE');
}

describe('Payload', () => {
  test('createPayload: defaults, frozen, metadata copied', () => {
    const meta = { a: '1' };
    const p = createPayload(bytes(1, 2, 3), { metadata: meta });
    meta.a = 'changed';
    expect(p.contentType).toBe('application/octet-stream');
    expect(p.encoding).toBeUndefined();
    expect({ ...p.metadata }).toEqual({ a: '1' });
    expect(Object.isFrozen(p)).toBe(true);
    expect(Object.isFrozen(p.metadata)).toBe(true);
    expect(isPayload(p)).toBe(true);
    expect(isPayload(EMPTY_PAYLOAD)).toBe(true);
  });

  test('createPayload rejects bad fields with InvalidPayloadError', () => {
    expect(() => createPayload('text' as unknown as Uint8Array)).toThrow(InvalidPayloadError);
    expect(() => createPayload(bytes(), { contentType: '' })).toThrow(InvalidPayloadError);
    expect(() => createPayload(bytes(), { encoding: '' })).toThrow(InvalidPayloadError);
    expect(() => createPayload(bytes(), { metadata: { n: 1 } as unknown as Record<string, string> })).toThrow(
      /metadata 'n' must be a string/,
    );
  });

  test('metadata keys such as __proto__ stay plain data', () => {
    const meta = JSON.parse('{"__proto__":"x","constructor":"y"}') as Record<string, string>;
    const p = createPayload(bytes(), { metadata: meta });
    expect(Object.keys(p.metadata).sort()).toEqual(['__proto__', 'constructor']);
    const back = decodePayload(encodePayload(p));
    expect(Object.getOwnPropertyDescriptor(back.metadata, '__proto__')?.value).toBe('x');
    expect(Object.keys(back.metadata).sort()).toEqual(['__proto__', 'constructor']);
  });

  test('JSON helpers round-trip and check the content type', () => {
    const p = jsonPayload({ a: [1, 'two', null] }, { metadata: { k: 'v' } });
    expect(p.contentType).toBe('application/json');
    expect(readJson(p)).toEqual({ a: [1, 'two', null] });
    expect(p.metadata.k).toBe('v');
    expect(() => readJson(textPayload('{}'))).toThrow(/not JSON/);
    expect(() =>
      readJson(createPayload(new TextEncoder().encode('{nope'), { contentType: 'application/json' })),
    ).toThrow(InvalidPayloadError);
    expect(() => jsonPayload(undefined)).toThrow(InvalidPayloadError);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => jsonPayload(cyclic)).toThrow(InvalidPayloadError);
    expect(isJsonContentType('application/ld+json; charset=utf-8')).toBe(true);
    expect(isJsonContentType('Application/JSON')).toBe(true);
    expect(isJsonContentType('text/json-ish')).toBe(false);
  });

  test('text helpers decode strictly', () => {
    expect(readText(textPayload('héllo ✓'))).toBe('héllo ✓');
    expect(textPayload('x').contentType).toBe('text/plain; charset=utf-8');
    expect(() => readText(createPayload(bytes(0xff, 0xfe)))).toThrow(/not valid UTF-8/);
    expect(() => readText(createPayload(bytes(1), { encoding: 'gzip' }))).toThrow(/gzip-encoded/);
  });
});

describe('payload envelope', () => {
  const sample = createPayload(bytes(0, 1, 2, 255), {
    contentType: 'application/x-test',
    encoding: 'identity',
    metadata: { b: '2', a: '1', ü: 'ünïcode' },
  });

  test('round-trips every field', () => {
    const back = decodePayload(encodePayload(sample));
    expect(back.bytes).toEqual(sample.bytes);
    expect(back.contentType).toBe(sample.contentType);
    expect(back.encoding).toBe('identity');
    expect({ ...back.metadata }).toEqual({ ...sample.metadata });
  });

  test('layout: magic MDAG, version 1, metadata sorted so equal payloads give equal bytes', () => {
    const enc = encodePayload(sample);
    expect(new TextDecoder().decode(enc.subarray(0, 4))).toBe('MDAG');
    expect(enc[4]).toBe(1);
    const reordered = createPayload(sample.bytes, { ...sample, metadata: { ü: 'ünïcode', a: '1', b: '2' } });
    expect(encodePayload(reordered)).toEqual(enc);
  });

  test('decoding copies: the payload does not alias the envelope buffer', () => {
    const enc = encodePayload(sample);
    const back = decodePayload(enc);
    enc.fill(0);
    expect(back.bytes).toEqual(sample.bytes);
  });

  test('rejects a bad magic', () => {
    const enc = encodePayload(sample);
    enc[0] = 0x58;
    expectEnvelopeError(() => decodePayload(enc), 'bad-magic');
  });

  test('rejects an unknown version with UnsupportedEnvelopeVersionError', () => {
    const enc = encodePayload(sample);
    enc[4] = 2;
    expect(() => decodePayload(enc)).toThrow(UnsupportedEnvelopeVersionError);
    try {
      decodePayload(enc);
    } catch (err) {
      expect((err as UnsupportedEnvelopeVersionError).version).toBe(2);
      expect((err as UnsupportedEnvelopeVersionError).code).toBe(
        'MOCRA_ERR_DAG_UNSUPPORTED_ENVELOPE_VERSION',
      );
    }
  });

  test('rejects truncation at every length', () => {
    const enc = encodePayload(sample);
    for (let len = 0; len < enc.length; len++) {
      expectEnvelopeError(() => decodePayload(enc.subarray(0, len)), 'truncated');
    }
  });

  test('rejects trailing bytes', () => {
    const enc = encodePayload(sample);
    const longer = new Uint8Array(enc.length + 1);
    longer.set(enc);
    expectEnvelopeError(() => decodePayload(longer), 'trailing-bytes');
  });

  test('rejects invalid UTF-8 in a text field', () => {
    const p = createPayload(bytes(), { contentType: 'ab' });
    const enc = encodePayload(p);
    // content type starts right after the 15-byte header
    enc[15] = 0xff;
    expectEnvelopeError(() => decodePayload(enc), 'invalid-utf8');
  });

  test('rejects duplicate metadata keys and an empty content type', () => {
    const p = createPayload(bytes(), { contentType: 'x', metadata: { a: '1', b: '2' } });
    const enc = encodePayload(p);
    // rename key 'b' to 'a': header 15, content type 1, then entry 1 (2+4+1+1), entry 2 key at +6
    const secondKey = 15 + 1 + 8 + 6;
    expect(String.fromCharCode(enc[secondKey] as number)).toBe('b');
    enc[secondKey] = 0x61;
    expectEnvelopeError(() => decodePayload(enc), 'duplicate-key');
    const empty = encodePayload(createPayload(bytes(), { contentType: 'x' }));
    const noType = new Uint8Array(empty.length - 1);
    noType.set(empty.subarray(0, 15));
    noType[5] = 0;
    expectEnvelopeError(() => decodePayload(noType), 'invalid-field');
  });

  test('rejects a non-Uint8Array', () => {
    expectEnvelopeError(() => decodePayload('MDAG' as unknown as Uint8Array), 'invalid-field');
  });

  test('property: any payload round-trips; any strict prefix is rejected as truncated', () => {
    const payloadArb = fc.record({
      data: fc.uint8Array({ maxLength: 64 }),
      contentType: fc.string({ minLength: 1, maxLength: 20 }),
      encoding: fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: undefined }),
      metadata: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 16 }), { maxKeys: 5 }),
    });
    fc.assert(
      fc.property(payloadArb, fc.nat(), (spec, cut) => {
        const p = createPayload(spec.data, {
          contentType: spec.contentType,
          ...(spec.encoding === undefined ? {} : { encoding: spec.encoding }),
          metadata: spec.metadata,
        });
        const enc = encodePayload(p);
        const back = decodePayload(enc);
        expect(back.bytes).toEqual(p.bytes);
        expect(back.contentType).toBe(p.contentType);
        expect(back.encoding).toBe(p.encoding);
        expect({ ...back.metadata }).toEqual({ ...p.metadata });
        expect(encodePayload(back)).toEqual(enc);
        const len = cut % enc.length;
        expect(() => decodePayload(enc.subarray(0, len))).toThrow(InvalidEnvelopeError);
      }),
      { numRuns: 200 },
    );
  });
});

describe('payload map envelope', () => {
  const entries: [string, Payload][] = [
    ['b', jsonPayload(2)],
    ['a', textPayload('one')],
  ];

  test('round-trips named payloads, sorted by name', () => {
    const map = decodePayloadMap(encodePayloadMap(entries));
    expect([...map.keys()]).toEqual(['a', 'b']);
    expect(readText(map.get('a') as Payload)).toBe('one');
    expect(readJson(map.get('b') as Payload)).toBe(2);
    expect(decodePayloadMap(encodePayloadMap([])).size).toBe(0);
  });

  test('rejects bad magic, wrong version, truncation, trailing bytes and a duplicate name', () => {
    const enc = encodePayloadMap(entries);
    expectEnvelopeError(() => decodePayloadMap(encodePayload(EMPTY_PAYLOAD)), 'bad-magic');
    const v2 = enc.slice();
    v2[4] = 7;
    expect(() => decodePayloadMap(v2)).toThrow(UnsupportedEnvelopeVersionError);
    for (let len = 0; len < enc.length; len++)
      expectEnvelopeError(() => decodePayloadMap(enc.subarray(0, len)), 'truncated');
    const longer = new Uint8Array(enc.length + 3);
    longer.set(enc);
    expectEnvelopeError(() => decodePayloadMap(longer), 'trailing-bytes');
    expect(() => encodePayloadMap([...entries, ['a', EMPTY_PAYLOAD]])).toThrow(InvalidPayloadError);
  });
});

import { describe, expect, test } from 'vitest';
import { ParseFailedError } from '../errors.js';
import { ErrorDigest, rootCause } from './error-digest.js';

function parseFailure(url: string, cause: Error) {
  const error = new ParseFailedError({ module: 'books', node: 'spider', url }, cause);
  return { code: error.code, message: error.message, stage: 'parse' as const, error, module: 'books', url };
}

/** A TypeError thrown at one place of the user's code, as every page of a broken parse throws it. */
function typeError(line: number): Error {
  const err = new TypeError("Cannot read properties of undefined (reading 'title')");
  err.stack = `TypeError: ${err.message}\n    at Object.parse (/home/me/books.ts:${line}:20)\n    at Engine.handle (/x/engine.js:1:1)`;
  return err;
}

describe('ErrorDigest', () => {
  test('the same error on many pages is one kind: only its first occurrence is new', () => {
    const digest = new ErrorDigest();
    expect(digest.record(parseFailure('http://a/1', typeError(12)))).toBe(true);
    expect(digest.record(parseFailure('http://a/2', typeError(12)))).toBe(false);
    expect(digest.record(parseFailure('http://a/3', typeError(12)))).toBe(false);
    expect(digest.byCode()).toEqual({
      MOCRA_ERR_PARSE_FAILED: {
        count: 3,
        url: 'http://a/1',
        message: expect.stringContaining('(http://a/1) threw'),
        stage: 'parse',
        module: 'books',
      },
    });
  });

  test('another place in the code, another message or another code is another kind', () => {
    const digest = new ErrorDigest();
    expect(digest.record(parseFailure('http://a/1', typeError(12)))).toBe(true);
    expect(digest.record(parseFailure('http://a/2', typeError(40)))).toBe(true);
    expect(digest.record(parseFailure('http://a/3', new RangeError('bad')))).toBe(true);
    expect(
      digest.record({
        code: 'MOCRA_ERR_CONNECTION',
        message: 'refused for http://b/1',
        stage: 'download',
        url: 'http://b/1',
      }),
    ).toBe(true);
    // URLs and numbers do not make a new kind.
    expect(
      digest.record({
        code: 'MOCRA_ERR_CONNECTION',
        message: 'refused for http://b/22',
        stage: 'download',
        url: 'http://b/22',
      }),
    ).toBe(false);
    expect(Object.keys(digest.byCode())).toEqual(['MOCRA_ERR_PARSE_FAILED', 'MOCRA_ERR_CONNECTION']);
    expect(digest.byCode().MOCRA_ERR_CONNECTION!.count).toBe(2);
  });

  test('rootCause follows the cause chain to its start', () => {
    const origin = new Error('origin');
    expect(rootCause(new Error('outer', { cause: new Error('middle', { cause: origin }) }))).toBe(origin);
    expect(rootCause(origin)).toBe(origin);
    expect(rootCause(undefined)).toBeUndefined();
  });
});

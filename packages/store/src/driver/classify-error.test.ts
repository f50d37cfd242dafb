// The mapping tables, fed errors shaped like the ones node-postgres and better-sqlite3 raise
// (SQLSTATE / extended result code + message). The paths that can be provoked for real — a
// constraint, a missing table, a killed backend, a refused connection — are in test/.
import { describe, expect, test } from 'vitest';
import { classifyPgError, classifySqliteError } from './classify-error.js';

const pgError = (code: string, message = 'x', extra: object = {}) =>
  Object.assign(new Error(message), { code, ...extra });

describe('classifyPgError', () => {
  test.each([
    ['23505', 'MOCRA_ERR_STORE_CONSTRAINT', false],
    ['23503', 'MOCRA_ERR_STORE_CONSTRAINT', false],
    ['22P05', 'MOCRA_ERR_STORE_CONSTRAINT', false],
    ['42P01', 'MOCRA_ERR_STORE_MISSING_TABLE', false],
    ['40001', 'MOCRA_ERR_STORE_SERIALIZATION', true],
    ['40P01', 'MOCRA_ERR_STORE_SERIALIZATION', true],
    ['57P01', 'MOCRA_ERR_STORE_CONNECTION', true],
    ['08006', 'MOCRA_ERR_STORE_CONNECTION', true],
    ['ECONNRESET', 'MOCRA_ERR_STORE_CONNECTION', true],
    ['42601', 'MOCRA_ERR_STORE_QUERY', false],
  ])('%s → %s (retryable %s)', (code, expected, retryable) => {
    const err = classifyPgError(pgError(code));
    expect(err.code).toBe(expected);
    expect(err.retryable).toBe(retryable);
  });

  test('constraint details are kept', () => {
    const err = classifyPgError(
      pgError('23505', 'duplicate key', { constraint: 'u_email', table: 'item_user' }),
    );
    expect(err).toMatchObject({ constraint: 'u_email', table: 'item_user' });
  });

  test('a socket closed without SQLSTATE is a connection error', () => {
    expect(classifyPgError(new Error('Connection terminated unexpectedly')).code).toBe(
      'MOCRA_ERR_STORE_CONNECTION',
    );
  });
});

describe('classifySqliteError', () => {
  test.each([
    ['SQLITE_CONSTRAINT_UNIQUE', 'UNIQUE constraint failed: t.c', 'MOCRA_ERR_STORE_CONSTRAINT', false],
    ['SQLITE_ERROR', 'no such table: items', 'MOCRA_ERR_STORE_MISSING_TABLE', false],
    ['SQLITE_BUSY', 'database is locked', 'MOCRA_ERR_STORE_SERIALIZATION', true],
    ['SQLITE_CANTOPEN', 'unable to open database file', 'MOCRA_ERR_STORE_CONNECTION', false],
    ['SQLITE_ERROR', 'near "SELEC": syntax error', 'MOCRA_ERR_STORE_QUERY', false],
  ])('%s (%s) → %s', (code, message, expected, retryable) => {
    const err = classifySqliteError(pgError(code, message));
    expect(err.code).toBe(expected);
    expect(err.retryable).toBe(retryable);
  });
});

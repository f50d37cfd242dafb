import { expect, test } from 'vitest';
import { redactUrlCredentials } from './redact.js';

test('credentials of every URL in a text are replaced; the rest is kept', () => {
  expect(redactUrlCredentials('http://user:secret@example.com/a?b=c@d#e')).toBe(
    'http://***@example.com/a?b=c@d#e',
  );
  expect(redactUrlCredentials('https://token@host:8080/')).toBe('https://***@host:8080/');
  expect(redactUrlCredentials('a p@ss with @ in it: http://u:p@ss@host/x')).toBe(
    'a p@ss with @ in it: http://***@host/x',
  );
  expect(redactUrlCredentials('{"url":"http://u:p@h/","to":"mailto:me@example.com"}')).toBe(
    '{"url":"http://***@h/","to":"mailto:me@example.com"}',
  );
  expect(redactUrlCredentials('http://example.com/path@segment')).toBe('http://example.com/path@segment');
  expect(redactUrlCredentials('no url here')).toBe('no url here');
});

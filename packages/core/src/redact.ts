/**
 * Credentials in URLs (`http://user:secret@host/`) never leave the process: records, logs, error
 * messages, the dead-letter view and the error digest show `http://***@host/` instead. One
 * function, applied where text leaves, so no caller has to remember it.
 */

/** `scheme://userinfo@`: the userinfo runs to the last `@` before the path, query or fragment. */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#"'<>@]*(?:@[^\s/?#"'<>@]*)*@/gi;

/** The marker that stands for removed credentials. */
export const REDACTED_USERINFO = '***';

/** `text` (a URL, a message, a log line) with the credentials of every URL in it replaced. */
export function redactUrlCredentials(text: string): string {
  // Most text has no '@' at all: skip the regex.
  if (!text.includes('@')) return text;
  return text.replace(USERINFO, `$1${REDACTED_USERINFO}@`);
}

/**
 * Which `Host` headers the API answers: its defence against DNS rebinding. A web page on
 * `http://evil.example` can point its own name at 127.0.0.1 and then read the API as its own
 * origin, past CORS; but its requests still say `Host: evil.example`. So a request is served
 * only when it names
 *
 *   - an IP address (a page whose origin is an address is served by that address — no name
 *     was rebound on the way),
 *   - `localhost` or a name under `.localhost` (they never leave the machine),
 *   - the bind host itself, or this machine's host name,
 *   - or a name listed in `allowedHosts` (`*` lists every name).
 *
 * A request without a `Host` header (HTTP/1.0 tools) names nothing and is served; browsers
 * always send one. The port is not compared: the socket already chose it.
 */
import { isIP } from 'node:net';
import os from 'node:os';

export type HostCheck = (hostHeader: string | undefined) => boolean;

export function createHostCheck(bindHost: string, allowedHosts: readonly string[] = []): HostCheck {
  if (allowedHosts.includes('*')) return () => true;
  const allowed = new Set([bindHost, os.hostname(), ...allowedHosts].map(normalize));
  return (header) => {
    if (header === undefined || header === '') return true;
    const name = hostnameOf(header);
    return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || allowed.has(name);
  };
}

/** The name of a `Host` header: lower case, without port, brackets or a final dot. */
export function hostnameOf(header: string): string {
  const text = header.trim();
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    return normalize(end < 0 ? text.slice(1) : text.slice(1, end));
  }
  const colon = text.indexOf(':');
  return normalize(colon < 0 ? text : text.slice(0, colon));
}

function normalize(name: string): string {
  const lower = name
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

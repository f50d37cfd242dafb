import { ProxyAddressError } from '../errors.js';

/**
 * Proxy schemes undici's `ProxyAgent` can dial. `socks5` goes through undici's own SOCKS5 agent,
 * which undici 7 still marks experimental (it prints one ExperimentalWarning per process).
 */
export const PROXY_PROTOCOLS = ['http', 'https', 'socks5'] as const;
export type ProxyProtocol = (typeof PROXY_PROTOCOLS)[number];

const DEFAULT_PORTS: Record<ProxyProtocol, number> = { http: 80, https: 443, socks5: 1080 };

/** A proxy address, parsed and normalised. */
export interface ProxyAddress {
  readonly protocol: ProxyProtocol;
  /** Host name or IP; IPv6 without brackets. */
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  /** Dialable URL including credentials: hand this to undici, never to a log. */
  readonly url: string;
  /**
   * Identity of the proxy in a pool: the URL without the password, so the same exit reached
   * with a rotated password stays one proxy, and ids are safe to log.
   */
  readonly id: string;
  /** The URL with the password masked, for logs and the dashboard. */
  readonly displayUrl: string;
}

export function isProxyProtocol(value: string): value is ProxyProtocol {
  return (PROXY_PROTOCOLS as readonly string[]).includes(value);
}

/** Masks the password of anything that looks like `scheme://user:pass@` or `host:port:user:pass`. */
export function redactProxyInput(input: string): string {
  if (input.includes('://')) return input.replace(/^([a-z0-9+.-]+:\/\/[^:/@]*:)[^@/]*@/i, '$1***@');
  const parts = input.split(':');
  return parts.length >= 4 ? `${parts.slice(0, 3).join(':')}:***` : input;
}

const HOSTNAME =
  /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/i;

function parsePort(text: string, input: string): number {
  if (!/^\d{1,5}$/.test(text))
    throw new ProxyAddressError(redactProxyInput(input), `port '${text}' is not a number`);
  const port = Number(text);
  if (port < 1 || port > 65_535)
    throw new ProxyAddressError(redactProxyInput(input), `port ${port} is out of range`);
  return port;
}

/**
 * Parses one proxy address. Two forms are accepted:
 *
 * - a URL: `http://host:port`, `https://user:pass@host:port`, `socks5://host:port`
 *   (`socks://` is read as `socks5://`; the port defaults to 80, 443 and 1080);
 * - the provider-list form `host:port` or `host:port:user:pass` (IPv6 hosts in brackets),
 *   dialled with `defaultProtocol`. A password may itself contain `:`.
 *
 * @throws {ProxyAddressError} with the password masked in the message.
 */
export function parseProxyAddress(input: string, defaultProtocol: ProxyProtocol = 'http'): ProxyAddress {
  const text = input.trim();
  if (text === '') throw new ProxyAddressError(input, 'it is empty');
  return text.includes('://') ? fromUrl(text) : fromShortForm(text, defaultProtocol);
}

function fromUrl(text: string): ProxyAddress {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ProxyAddressError(redactProxyInput(text), 'it is not a valid URL');
  }
  let scheme = url.protocol.slice(0, -1).toLowerCase();
  if (scheme === 'socks') scheme = 'socks5';
  if (!isProxyProtocol(scheme)) {
    throw new ProxyAddressError(
      redactProxyInput(text),
      `scheme '${scheme}' is not supported (use ${PROXY_PROTOCOLS.join(', ')})`,
    );
  }
  if (url.hostname === '') throw new ProxyAddressError(redactProxyInput(text), 'it has no host');
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    throw new ProxyAddressError(redactProxyInput(text), 'a proxy URL has no path, query or fragment');
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port === '' ? DEFAULT_PORTS[scheme] : Number(url.port);
  const username = url.username === '' ? undefined : decodeURIComponent(url.username);
  const password = url.password === '' ? undefined : decodeURIComponent(url.password);
  return build(scheme, host, port, username, password);
}

function fromShortForm(text: string, protocol: ProxyProtocol): ProxyAddress {
  let host: string;
  let rest: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':') {
      throw new ProxyAddressError(redactProxyInput(text), 'expected [ipv6]:port[:user:pass]');
    }
    host = text.slice(1, close);
    rest = text.slice(close + 2);
  } else {
    const colon = text.indexOf(':');
    if (colon < 0) throw new ProxyAddressError(redactProxyInput(text), 'expected host:port[:user:pass]');
    host = text.slice(0, colon);
    rest = text.slice(colon + 1);
  }
  const parts = rest.split(':');
  const port = parsePort(parts[0] ?? '', text);
  if (parts.length === 2) {
    throw new ProxyAddressError(
      redactProxyInput(text),
      'expected host:port:user:pass (the password is missing)',
    );
  }
  const username = parts.length >= 3 ? parts[1] : undefined;
  const password = parts.length >= 3 ? parts.slice(2).join(':') : undefined;
  if (username === '') throw new ProxyAddressError(redactProxyInput(text), 'the user name is empty');
  if (host.includes(':')) {
    if (!/^[0-9a-f:.]+$/i.test(host))
      throw new ProxyAddressError(redactProxyInput(text), `'${host}' is not a host`);
  } else if (!HOSTNAME.test(host)) {
    throw new ProxyAddressError(redactProxyInput(text), `'${host}' is not a host`);
  }
  return build(protocol, host, port, username, password);
}

function build(
  protocol: ProxyProtocol,
  host: string,
  port: number,
  username: string | undefined,
  password: string | undefined,
): ProxyAddress {
  const hostPart = host.includes(':') ? `[${host}]` : host.toLowerCase();
  const user = username === undefined ? '' : encodeURIComponent(username);
  const pass = password === undefined ? '' : `:${encodeURIComponent(password)}`;
  const auth = user === '' ? '' : `${user}${pass}@`;
  const masked = user === '' ? '' : `${user}${password === undefined ? '' : ':***'}@`;
  return {
    protocol,
    host: host.includes(':') ? host : host.toLowerCase(),
    port,
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    url: `${protocol}://${auth}${hostPart}:${port}`,
    id: `${protocol}://${user === '' ? '' : `${user}@`}${hostPart}:${port}`,
    displayUrl: `${protocol}://${masked}${hostPart}:${port}`,
  };
}

/** What {@link parseProxyList} found in a text list. */
export interface ParsedProxyList {
  readonly proxies: ProxyAddress[];
  /** Lines that were neither blank, a `#` comment nor a valid address; they are skipped. */
  readonly invalid: number;
  /** The first few problems, for the provider's stats. */
  readonly problems: string[];
}

/**
 * Parses a provider's text list: one address per line in either form {@link parseProxyAddress}
 * takes; blank lines and `#` comments are skipped. A bad line is counted and skipped rather
 * than failing the whole list, because a provider list with one garbled line is still useful.
 */
export function parseProxyList(text: string, defaultProtocol: ProxyProtocol = 'http'): ParsedProxyList {
  const proxies: ProxyAddress[] = [];
  const problems: string[] = [];
  let invalid = 0;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    try {
      proxies.push(parseProxyAddress(line, defaultProtocol));
    } catch (err) {
      invalid++;
      if (problems.length < 5) problems.push(err instanceof Error ? err.message : String(err));
    }
  }
  return { proxies, invalid, problems };
}

import { ProxyAgent } from 'undici';
import { ProxyClosedError } from '../errors.js';

/** Options of {@link createProxyDispatchers}. */
export interface ProxyDispatchersOptions {
  /**
   * Options for every `ProxyAgent` (connections per origin, timeouts, `requestTls` /
   * `proxyTls`, `proxyTunnel`); `uri` is set per proxy.
   * @default undici's defaults (CONNECT tunnelling for every target)
   */
  agent?: Omit<ProxyAgent.Options, 'uri'>;
}

/**
 * One undici `ProxyAgent` per proxy URL, created on first use and closed on {@link close}. The
 * agent keeps its connection pools (and CONNECT tunnels) alive between requests, so sending a
 * host's requests through the same proxy reuses tunnels instead of opening one per request.
 *
 * This is the one place where undici proxy plumbing lives: http and https proxies through
 * `ProxyAgent`, and `socks5://` proxies through undici's SOCKS5 agent, which undici 7 marks
 * experimental (it prints an ExperimentalWarning once per process).
 */
export class ProxyDispatchers {
  readonly #agents = new Map<string, ProxyAgent>();
  readonly #options: Omit<ProxyAgent.Options, 'uri'>;
  #closed = false;

  constructor(options: ProxyDispatchersOptions = {}) {
    this.#options = options.agent ?? {};
  }

  /** The agent for `proxy` (a URL with credentials, or anything with such a `url`). */
  get(proxy: string | { readonly url: string }): ProxyAgent {
    if (this.#closed) throw new ProxyClosedError('proxy dispatcher set');
    const url = typeof proxy === 'string' ? proxy : proxy.url;
    let agent = this.#agents.get(url);
    if (agent === undefined) {
      agent = new ProxyAgent({ ...this.#options, uri: url });
      this.#agents.set(url, agent);
    }
    return agent;
  }

  has(proxy: string | { readonly url: string }): boolean {
    return this.#agents.has(typeof proxy === 'string' ? proxy : proxy.url);
  }

  /** Agents currently open. */
  get size(): number {
    return this.#agents.size;
  }

  /**
   * Closes and forgets one proxy's agent (the pool calls this when a proxy is retired or
   * expires). Requests in flight on it finish first; the next `get` opens a fresh agent.
   */
  async release(proxy: string | { readonly url: string }): Promise<void> {
    const url = typeof proxy === 'string' ? proxy : proxy.url;
    const agent = this.#agents.get(url);
    if (agent === undefined) return;
    this.#agents.delete(url);
    await agent.close();
  }

  /** Closes every agent; idempotent. `get` throws afterwards. */
  async close(): Promise<void> {
    this.#closed = true;
    const agents = [...this.#agents.values()];
    this.#agents.clear();
    await Promise.allSettled(agents.map((agent) => agent.close()));
  }
}

export function createProxyDispatchers(options: ProxyDispatchersOptions = {}): ProxyDispatchers {
  return new ProxyDispatchers(options);
}

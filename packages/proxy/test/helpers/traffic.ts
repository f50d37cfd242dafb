import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Agent, request } from 'undici';
import { classifyProxyError, type ProxyPool, type ProxySelection } from '../../src/index.js';

/** Plain agent for direct-tier requests (what the engine's default dispatcher would be). */
export const directAgent = new Agent({ connections: 4 });

export interface Outcome {
  readonly selection: ProxySelection;
  readonly status?: number;
  readonly body?: string;
  readonly error?: unknown;
}

/** Sends one GET as the engine would: through the selection's dispatcher, bounded in time. */
export async function send(pool: ProxyPool, selection: ProxySelection, url: string): Promise<Outcome> {
  try {
    const res = await request(url, {
      dispatcher: pool.dispatcher(selection) ?? directAgent,
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
      signal: AbortSignal.timeout(10_000),
    });
    return { selection, status: res.statusCode, body: await res.body.text() };
  } catch (error) {
    return { selection, error };
  }
}

/**
 * acquire → send → report, like the engine's download stage: 2xx is a success, 403/429 a
 * block, an exception is classified with `classifyProxyError`.
 */
export async function fetchThroughPool(
  pool: ProxyPool,
  url: string,
  options: { session?: string } = {},
): Promise<Outcome> {
  const selection = await pool.acquire({ url, ...options });
  const outcome = await send(pool, selection, url);
  if (outcome.error !== undefined) pool.reportFailure(selection, classifyProxyError(outcome.error), outcome);
  else if (outcome.status === 403 || outcome.status === 429)
    pool.reportFailure(selection, 'blocked', outcome);
  else pool.reportSuccess(selection);
  return outcome;
}

/** Resolves with the next message published on a diagnostics channel. */
export function nextMessage<T>(name: string): Promise<T> {
  return new Promise((resolve) => {
    const handler = (message: unknown) => {
      unsubscribe(name, handler);
      resolve(message as T);
    };
    subscribe(name, handler);
  });
}

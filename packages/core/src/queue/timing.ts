import { randomBytes } from 'node:crypto';

/** Resolves after `ms`, or earlier when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** A unique-enough message id: a random prefix per process plus a counter. */
export function createIdGenerator(): () => string {
  const prefix = `${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
  let seq = 0;
  return () => `${prefix}-${(seq++).toString(36)}`;
}

/** Small helpers for the package's tests. */
import {
  type DagReport,
  ExecutionIncompleteError,
  jsonPayload,
  type Payload,
  readJson,
} from '../src/index.js';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued promise callback run. */
export function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export const num = (n: number): Payload => jsonPayload(n);
export const readNum = (p: Payload | undefined): number => {
  if (p === undefined) throw new Error('no payload');
  return readJson<number>(p);
};

/** Awaits a run that must fail and returns its ExecutionIncompleteError. */
export async function incomplete(run: Promise<DagReport>): Promise<ExecutionIncompleteError> {
  try {
    await run;
  } catch (err) {
    if (err instanceof ExecutionIncompleteError) return err;
    throw err;
  }
  throw new Error('the run succeeded; expected ExecutionIncompleteError');
}

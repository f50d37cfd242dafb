import { afterEach, describe, expect, test, vi } from 'vitest';
import { RequestDeadline } from './request-deadline.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('RequestDeadline', () => {
  test('aborts with its reason when the time passes, calling each listener once', () => {
    vi.useFakeTimers();
    const deadline = new RequestDeadline(undefined, 100, () => new Error('too slow'));
    const heard: unknown[] = [];
    const listener = () => heard.push(deadline.reason);
    deadline.addEventListener('abort', listener);
    vi.advanceTimersByTime(99);
    expect(deadline.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.aborted).toBe(true);
    expect(deadline.expired).toBe(true);
    expect((deadline.reason as Error).message).toBe('too slow');
    vi.advanceTimersByTime(1_000);
    expect(heard).toHaveLength(1);
  });

  test("the caller's abort comes through with the caller's reason, and is not an expiry", () => {
    vi.useFakeTimers();
    const outer = new AbortController();
    const deadline = new RequestDeadline(outer.signal, 100, () => new Error('too slow'));
    const listener = vi.fn();
    deadline.addEventListener('abort', listener);
    outer.abort(new Error('stopped'));
    expect(deadline.aborted).toBe(true);
    expect((deadline.reason as Error).message).toBe('stopped');
    vi.advanceTimersByTime(1_000);
    expect(deadline.expired).toBe(false);
    expect(listener).toHaveBeenCalledTimes(1);
  });

  test('a signal aborted before the request starts aborts the deadline at once', () => {
    const outer = new AbortController();
    outer.abort(new Error('gone'));
    const deadline = new RequestDeadline(outer.signal, 100, () => new Error('too slow'));
    expect(deadline.aborted).toBe(true);
    expect((deadline.reason as Error).message).toBe('gone');
  });

  test('a removed listener is not called, and clear() disarms the timer and lets go of the caller', () => {
    vi.useFakeTimers();
    const outer = new AbortController();
    const deadline = new RequestDeadline(outer.signal, 100, () => new Error('too slow'));
    const removed = vi.fn();
    const kept = vi.fn();
    deadline.addEventListener('abort', removed);
    deadline.addEventListener('abort', kept);
    deadline.removeEventListener('abort', removed);
    deadline.clear();
    vi.advanceTimersByTime(1_000);
    outer.abort();
    expect(deadline.aborted).toBe(false);
    expect(removed).not.toHaveBeenCalled();
    expect(kept).not.toHaveBeenCalled();
  });

  test("requests that share the caller's signal add one listener to it, and its abort reaches every one not cleared", () => {
    const outer = new AbortController();
    const add = vi.spyOn(outer.signal, 'addEventListener');
    const remove = vi.spyOn(outer.signal, 'removeEventListener');
    const deadlines = Array.from(
      { length: 5 },
      () => new RequestDeadline(outer.signal, 10_000, () => new Error('too slow')),
    );
    const heard = deadlines.map((d) => {
      const listener = vi.fn();
      d.addEventListener('abort', listener);
      return listener;
    });
    deadlines[1]!.clear();
    deadlines[3]!.clear();
    expect(add).toHaveBeenCalledTimes(1);
    expect(remove).not.toHaveBeenCalled();
    outer.abort(new Error('stopped'));
    expect(deadlines.map((d) => d.aborted)).toEqual([true, false, true, false, true]);
    expect(heard.map((l) => l.mock.calls.length)).toEqual([1, 0, 1, 0, 1]);
    expect((deadlines[4]!.reason as Error).message).toBe('stopped');
    for (const d of deadlines) d.clear();
  });

  test("a caller's signal that aborted after its requests were cleared is followed again by new ones", () => {
    const first = new AbortController();
    const done = new RequestDeadline(first.signal, 10_000, () => new Error('too slow'));
    done.clear();
    first.abort();
    expect(done.aborted).toBe(false);
    const second = new AbortController();
    const next = new RequestDeadline(second.signal, 10_000, () => new Error('too slow'));
    second.abort(new Error('later'));
    expect((next.reason as Error).message).toBe('later');
  });

  test('a listener that throws does not keep the others from hearing the abort', async () => {
    vi.useFakeTimers();
    const deadline = new RequestDeadline(undefined, 10, () => new Error('too slow'));
    const thrown: unknown[] = [];
    const onUncaught = (err: unknown) => thrown.push(err);
    process.on('uncaughtException', onUncaught);
    const after = vi.fn();
    deadline.addEventListener('abort', () => {
      throw new Error('listener broke');
    });
    deadline.addEventListener('abort', after);
    vi.advanceTimersByTime(10);
    expect(after).toHaveBeenCalledTimes(1);
    vi.useRealTimers();
    await new Promise((resolve) => setImmediate(resolve));
    process.off('uncaughtException', onUncaught);
    expect(thrown).toEqual([expect.objectContaining({ message: 'listener broke' })]);
  });
});

import { describe, expect, test } from 'vitest';
import { createMemoryQueueBackend } from '../queue/memory-queue.js';
import type { Delivery, LeaseQueue } from '../queue/types.js';
import { LocalDelivery } from './local-delivery.js';
import { type HandlerResult, StageRunner, type StageRunnerOptions } from './stage-runner.js';

/** A promise with its resolver, to hold handlers until the test lets them go. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

/** Resolves once `predicate` holds, re-checking after every settle (no timers). */
function until(predicate: () => boolean, listeners: (() => void)[]): Promise<void> {
  if (predicate()) return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => {
      if (predicate()) {
        listeners.splice(listeners.indexOf(check), 1);
        resolve();
      }
    };
    listeners.push(check);
  });
}

function setup(
  count: number,
  options: Partial<StageRunnerOptions<number>> & { concurrency: number },
  topic: { leaseMs?: number } = {},
) {
  const backend = createMemoryQueueBackend({ namespace: `t${Math.random()}` });
  const queue: LeaseQueue<number> = backend.topic<number>('work', { leaseMs: topic.leaseMs ?? 30_000 });
  const listeners: (() => void)[] = [];
  const failures: unknown[] = [];
  const internal: unknown[] = [];
  const runner = new StageRunner<number>({
    name: 'test',
    queue,
    handle: () => undefined,
    onFailure: async (_d, err) => {
      failures.push(err);
      return undefined;
    },
    onSettled: () => {
      for (const l of [...listeners]) l();
    },
    onInternalError: (err) => internal.push(err),
    ...options,
  });
  const ready = queue.publish(Array.from({ length: count }, (_, i) => ({ payload: i })));
  return { backend, queue, runner, listeners, failures, internal, ready };
}

describe('StageRunner', () => {
  test('never runs more handlers than its concurrency, and processes everything', async () => {
    let running = 0;
    let peak = 0;
    const seen: number[] = [];
    const { runner, listeners, ready, queue, backend } = setup(60, {
      concurrency: 4,
      handle: async (d: Delivery<number>) => {
        running++;
        peak = Math.max(peak, running);
        // Yield a few times so handlers overlap.
        for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
        seen.push(d.payload);
        running--;
        return undefined;
      },
    });
    await ready;
    runner.start();
    await until(() => runner.stats().done === 60, listeners);
    expect(peak).toBe(4);
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0 });
    await runner.stop(1_000);
    await backend.close();
  });

  test('pause stops pulling (work in flight finishes); resume continues', async () => {
    const hold = gate();
    let started = 0;
    const { runner, listeners, ready, queue, backend } = setup(10, {
      concurrency: 2,
      handle: async () => {
        started++;
        await hold.promise;
        return undefined;
      },
    });
    await ready;
    runner.start();
    await new Promise((r) => setImmediate(r));
    expect(runner.inFlight).toBe(2);
    runner.pause();
    hold.open();
    await until(() => runner.stats().done === 2, listeners);
    // Let the loop run: a paused runner must not take more.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(started).toBe(2);
    expect(runner.paused).toBe(true);
    expect((await queue.stats()).ready).toBe(8);
    runner.resume();
    await until(() => runner.stats().done === 10, listeners);
    expect(started).toBe(10);
    await runner.stop(1_000);
    await backend.close();
  });

  test('stop lets work finish within the deadline, then aborts and puts back the rest', async () => {
    const aborted: number[] = [];
    const { runner, ready, queue, backend } = setup(5, {
      concurrency: 2,
      handle: (d, signal) =>
        new Promise<HandlerResult>((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            aborted.push(d.payload);
            reject(new Error('aborted'));
          });
        }),
    });
    await ready;
    runner.start();
    await new Promise((r) => setImmediate(r));
    expect(runner.inFlight).toBe(2);
    await runner.stop(50);
    expect(aborted.sort()).toEqual([0, 1]);
    expect(runner.stats().failed).toBe(0); // aborted by shutdown is not a failure
    // Nothing lost: the two in flight went back, the three never taken are still there.
    expect(await queue.stats()).toMatchObject({ ready: 5, inflight: 0 });
    const again = await queue.consume({ max: 10, waitMs: 0 });
    expect(again.map((d) => d.payload).sort()).toEqual([0, 1, 2, 3, 4]);
    await backend.close();
  });

  test('a handler that ignores the abort is nacked after the grace period', async () => {
    const { runner, ready, queue, backend } = setup(1, {
      concurrency: 1,
      handle: () => new Promise<HandlerResult>(() => {}),
    });
    await ready;
    runner.start();
    await new Promise((r) => setImmediate(r));
    await runner.stop(10, 10);
    expect(await queue.stats()).toMatchObject({ ready: 1, inflight: 0 });
    await backend.close();
  });

  test('failures go to onFailure and are settled as it says', async () => {
    const { runner, listeners, ready, queue, failures, backend } = setup(3, {
      concurrency: 3,
      handle: (d) => {
        if (d.payload === 1) throw new Error('sync boom');
        if (d.payload === 2) return Promise.reject(new Error('async boom'));
        return undefined;
      },
    });
    await ready;
    runner.start();
    await until(() => runner.stats().done + runner.stats().failed === 3, listeners);
    expect(runner.stats()).toMatchObject({ done: 1, failed: 2 });
    expect(failures.map((e) => (e as Error).message).sort()).toEqual(['async boom', 'sync boom']);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0 });
    await runner.stop(100);
    await backend.close();
  });

  test('extends leases while a handler runs longer than the lease', async () => {
    let calls = 0;
    const { runner, listeners, ready, queue, backend } = setup(
      1,
      {
        concurrency: 1,
        handle: async (d) => {
          calls++;
          expect(d.attempt).toBe(1);
          await new Promise((r) => setTimeout(r, 700));
          return undefined;
        },
      },
      { leaseMs: 150 },
    );
    await ready;
    runner.start();
    await until(() => runner.stats().done === 1, listeners);
    expect(calls).toBe(1);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0, deadLettered: 0 });
    await runner.stop(100);
    await backend.close();
  });

  test('rejects a bad concurrency', () => {
    const backend = createMemoryQueueBackend();
    const queue = backend.topic<number>('x');
    const base = {
      name: 'x',
      queue,
      handle: () => undefined,
      onFailure: async () => undefined,
      onSettled() {},
      onInternalError() {},
    };
    expect(() => new StageRunner({ ...base, concurrency: 0 })).toThrow(RangeError);
    expect(() => new StageRunner({ ...base, concurrency: 1.5 })).toThrow(RangeError);
  });

  test('a slow ack does not hold a slot, and at most `concurrency` acks wait before pulling stops', async () => {
    const acks = gate();
    let started = 0;
    const { queue, runner, listeners, ready } = setup(10, {
      concurrency: 2,
      handle: () => {
        started++;
        return undefined;
      },
    });
    // Every ack waits for the test (a broker that is slow to answer).
    const consume = queue.consume.bind(queue);
    queue.consume = async (options) => {
      const batch = await consume(options);
      for (const d of batch) {
        const ack = d.ack.bind(d);
        d.ack = async () => {
          await acks.promise;
          await ack();
        };
      }
      return batch;
    };
    await ready;
    runner.start();
    // Two handlers ran and returned; their acks wait; two more slots' worth was pulled.
    // No settle happens while the acks wait, so poll a bounded number of event-loop turns.
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(started).toBe(4);
    expect(runner.inFlight).toBe(4);
    acks.open();
    await until(() => runner.stats().done === 10 && runner.inFlight === 0, listeners);
    expect(started).toBe(10);
    await runner.stop(1000);
  });

  test('runHere runs work made in this process under the same concurrency; refused when full, paused or stopped', async () => {
    const hold = gate();
    let running = 0;
    let peak = 0;
    const handled: number[] = [];
    const { queue, runner, listeners, ready } = setup(0, {
      concurrency: 2,
      handle: async (d: Delivery<number>) => {
        running++;
        peak = Math.max(peak, running);
        await hold.promise;
        handled.push(d.payload);
        running--;
        return undefined;
      },
    });
    await ready;
    const local = (n: number) =>
      new LocalDelivery(queue, { id: `l${n}`, payload: n, priority: 0, key: undefined });
    expect(runner.runHere(local(0))).toBe(false); // not started yet
    runner.start();
    const a = local(1);
    const b = local(2);
    expect(runner.runHere(a)).toBe(true);
    expect(runner.runHere(b)).toBe(true);
    expect(runner.runHere(local(3))).toBe(false); // both slots busy: the caller publishes instead
    expect(runner.stats().inFlight).toBe(2);
    hold.open();
    await Promise.all([a.settled, b.settled]);
    await until(() => runner.stats().done === 2, listeners);
    expect(handled.sort()).toEqual([1, 2]);
    expect(peak).toBe(2);
    runner.pause();
    expect(runner.runHere(local(4))).toBe(false);
    runner.resume();
    await runner.stop(1000);
    expect(runner.runHere(local(5))).toBe(false);
    // Nothing of the local work ever touched the topic.
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0 });
  });

  test('concurrency stays exact when local work takes the slots a pending consume asked for', async () => {
    const hold = gate();
    let running = 0;
    let peak = 0;
    const { queue, runner, listeners } = setup(0, {
      concurrency: 2,
      handle: async () => {
        running++;
        peak = Math.max(peak, running);
        await hold.promise;
        running--;
        return undefined;
      },
    });
    runner.start();
    // The idle runner waits in a consume for 2 messages; local work then takes both slots.
    await new Promise((r) => setImmediate(r));
    const locals = [1, 2].map(
      (n) => new LocalDelivery(queue, { id: `l${n}`, payload: n, priority: 0, key: undefined }),
    );
    for (const l of locals) expect(runner.runHere(l)).toBe(true);
    await queue.publish([{ payload: 10 }, { payload: 11 }]);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    // The consume returned both messages: they wait (leased), they do not run beside the locals.
    expect(running).toBe(2);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 2 });
    expect(
      runner.runHere(new LocalDelivery(queue, { id: 'l3', payload: 3, priority: 0, key: undefined })),
    ).toBe(false);
    hold.open();
    await until(() => runner.stats().done === 4, listeners);
    expect(peak).toBe(2);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0 });
    await runner.stop(1000);
  });

  test('settleAfter: the slot frees at once, the delivery is acked when the hand-off is done and put back when it fails', async () => {
    const handOffs: { open: () => void; fail: (err: Error) => void }[] = [];
    const { queue, runner, listeners, ready, internal } = setup(2, {
      concurrency: 1,
      handle: (): HandlerResult => {
        let open!: () => void;
        let fail!: (err: Error) => void;
        const settleAfter = new Promise<void>((resolve, reject) => {
          open = resolve;
          fail = reject;
        });
        handOffs.push({ open, fail });
        return { settleAfter };
      },
    });
    await ready;
    runner.start();
    // Both handlers ran with one slot: the first one's slot freed while its hand-off runs.
    for (let i = 0; i < 50 && handOffs.length < 2; i++) await new Promise((r) => setImmediate(r));
    expect(handOffs).toHaveLength(2);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 2 });
    handOffs[0]!.open();
    await until(() => runner.inFlight === 1, listeners);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 1 });
    // A failed hand-off puts the message back (a redelivery, not a loss).
    handOffs[1]!.fail(new Error('parse put-back failed'));
    for (let i = 0; i < 50 && handOffs.length < 3; i++) await new Promise((r) => setImmediate(r));
    expect(handOffs).toHaveLength(3);
    handOffs[2]!.open();
    await until(() => runner.inFlight === 0, listeners);
    expect(await queue.stats()).toMatchObject({ ready: 0, inflight: 0 });
    expect(internal).toEqual([]);
    await runner.stop(1000);
  });
});

describe('LocalDelivery', () => {
  test('ack settles it without touching the topic; nack and deadLetter put the payload on the topic', async () => {
    const backend = createMemoryQueueBackend({ namespace: `t${Math.random()}` });
    const queue = backend.topic<string>('work');
    const acked = new LocalDelivery(queue, { id: 'a', payload: 'a', priority: 0, key: undefined });
    await acked.ack();
    await acked.settled;
    expect(await queue.stats()).toMatchObject({ ready: 0, delayed: 0 });
    const nacked = new LocalDelivery(queue, { id: 'b', payload: 'b', priority: 5, key: 'k' });
    await nacked.nack({ delayMs: 60_000 });
    await nacked.settled;
    const dead = new LocalDelivery(queue, { id: 'c', payload: 'c', priority: 0, key: undefined });
    await dead.deadLetter();
    await dead.settled;
    expect(await queue.stats()).toMatchObject({ ready: 1, delayed: 1 });
    const [taken] = await queue.consume({ max: 1, waitMs: 0 });
    expect(taken).toMatchObject({ payload: 'c', attempt: 1 });
    await backend.close();
  });

  test('a put-back that fails rejects `settled`, so the upstream delivery is not acked', async () => {
    const backend = createMemoryQueueBackend({ namespace: `t${Math.random()}` });
    const queue = backend.topic<string>('work');
    const local = new LocalDelivery(queue, { id: 'a', payload: 'a', priority: 0, key: undefined });
    await backend.close();
    await expect(local.nack()).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
    await expect(local.settled).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
  });
});

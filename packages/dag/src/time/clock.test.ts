import { describe, expect, test } from 'vitest';
import { createManualClock, systemClock } from '../index.js';

describe('clocks', () => {
  test('manual clock fires timers in due order, including ones armed by earlier timers', async () => {
    const clock = createManualClock(100);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => {
      fired.push(`a@${clock.now()}`);
      clock.setTimeout(() => fired.push(`c@${clock.now()}`), 5);
    }, 10);
    const cancelled = clock.setTimeout(() => fired.push('never'), 1);
    cancelled.cancel();
    cancelled.cancel();
    expect(clock.pendingTimers).toBe(2);
    await clock.advance(30);
    expect(fired).toEqual(['a@110', 'c@115', 'b@120']);
    expect(clock.now()).toBe(130);
    expect(await clock.next()).toBe(false);
  });

  test('next() jumps to the next timer; runAll() stops at maxSteps', async () => {
    const clock = createManualClock();
    let n = 0;
    const rearm = (): void => {
      clock.setTimeout(() => {
        n++;
        rearm();
      }, 1_000);
    };
    rearm();
    expect(await clock.next()).toBe(true);
    expect(clock.now()).toBe(1_000);
    await clock.runAll(5);
    expect(n).toBe(6);
  });

  test('the system clock uses real time and timers', async () => {
    const before = Date.now();
    expect(systemClock.now()).toBeGreaterThanOrEqual(before);
    let fired = false;
    await new Promise<void>((resolve) =>
      systemClock.setTimeout(() => {
        fired = true;
        resolve();
      }, 1),
    );
    expect(fired).toBe(true);
    const t = systemClock.setTimeout(() => {
      throw new Error('cancelled timer fired');
    }, 1);
    t.cancel();
    await new Promise((r) => setTimeout(r, 5));
  });
});

import { expect, test } from 'vitest';
import { MinHeap } from './heap.js';

test('pops by key, FIFO among equal keys', () => {
  const heap = new MinHeap<string>();
  for (const [key, value] of [
    [3, 'c'],
    [1, 'a1'],
    [2, 'b'],
    [1, 'a2'],
    [1, 'a3'],
  ] as const)
    heap.push(key, value);
  const out: string[] = [];
  for (let v = heap.pop(); v !== undefined; v = heap.pop()) out.push(v);
  expect(out).toEqual(['a1', 'a2', 'a3', 'b', 'c']);
});

test('retain keeps only accepted values and still pops in order (ties FIFO)', () => {
  const heap = new MinHeap<number>();
  // 2,000 values over 10 keys, pushed in a scrambled order.
  for (let i = 0; i < 2_000; i++) heap.push((i * 7) % 10, i);
  heap.retain((v) => v % 3 === 0);
  expect(heap.size).toBe(667);
  const out: [number, number][] = [];
  for (let key = heap.peekKey(); key !== undefined; key = heap.peekKey()) out.push([key, heap.pop()!]);
  const expected = Array.from({ length: 2_000 }, (_, i) => i)
    .filter((v) => v % 3 === 0)
    .map((v) => [(v * 7) % 10, v] as [number, number])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  expect(out).toEqual(expected);
});

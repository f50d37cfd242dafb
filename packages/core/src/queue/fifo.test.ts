import { expect, test } from 'vitest';
import { Fifo } from './fifo.js';

const filled = (n: number): Fifo<number> => {
  const fifo = new Fifo<number>();
  for (let i = 0; i < n; i++) fifo.push(i);
  return fifo;
};

test('push and shift keep order across ring boundaries', () => {
  const fifo = filled(5000);
  expect(fifo.size).toBe(5000);
  for (let i = 0; i < 5000; i++) expect(fifo.shift()).toBe(i);
  expect(fifo.shift()).toBeUndefined();
  expect(fifo.size).toBe(0);
});

test('truncate keeps the first items and returns the rest in order', () => {
  const fifo = filled(5000);
  fifo.shift(); // a head ring that does not start at 0
  const removed = fifo.truncate(3000);
  expect(removed).toEqual(Array.from({ length: 1999 }, (_, i) => 3001 + i));
  expect(fifo.size).toBe(3000);
  fifo.push(-1);
  expect([...fifo]).toEqual([...Array.from({ length: 3000 }, (_, i) => 1 + i), -1]);
});

test('truncate to its size or more removes nothing', () => {
  const fifo = filled(10);
  expect(fifo.truncate(10)).toEqual([]);
  expect(fifo.truncate(11)).toEqual([]);
  expect(fifo.truncate(0)).toEqual(Array.from({ length: 10 }, (_, i) => i));
  expect(fifo.size).toBe(0);
});

import { expectedSignature, SIGNER_JS, SIGNER_WASM } from '@mocra/testkit';
import { afterAll, describe, expect, test } from 'vitest';
import { JsWorkerPool } from './pool.js';
import { JsRuntime } from './runtime.js';

const code = (c: string) => expect.objectContaining({ code: c });

describe('JsRuntime', () => {
  const rt = new JsRuntime({ timeoutMs: 500 });
  afterAll(() => rt.close());

  test('exec, call with JSON arguments, evaluate, globals', async () => {
    await rt.exec(
      'function add(a, b) { return a + b; } var shop = { total(items) { return items.reduce((s, i) => s + i.price, 0); } };',
    );
    expect(await rt.call('add', 2, 3)).toBe(5);
    expect(await rt.call('shop.total', [{ price: 1.5 }, { price: 2 }])).toBe(3.5);
    expect(await rt.evaluate('({ a: [1, "x", null], b: true })')).toEqual({ a: [1, 'x', null], b: true });
    expect(await rt.evaluate('Promise.resolve(7)')).toBe(7);
    rt.setGlobal('config', { key: 'k1' });
    expect(await rt.evaluate('config.key + typeof window')).toBe('k1object');
  });

  test('host functions, sync and async', async () => {
    const seen: unknown[] = [];
    rt.register('hostLog', (...args) => {
      seen.push(args);
      return args.length;
    });
    rt.registerAsync('hostFetchKey', async (id) => `key-${String(id)}`);
    expect(await rt.evaluate('hostLog("a", { b: 1 })')).toBe(2);
    expect(seen).toEqual([['a', { b: 1 }]]);
    expect(await rt.evaluate('hostFetchKey(4).then((k) => k.toUpperCase())')).toBe('KEY-4');
  });

  test("WASM: instantiate the site's module and call its exports; the site's JS signs with it", async () => {
    await rt.instantiateWasm('signerWasm', SIGNER_WASM);
    expect(await rt.callWasm('signerWasm', 'mix', 1, 2)).toBe(Math.imul(1 ^ 2, 16777619));
    await rt.exec(SIGNER_JS, { filename: 'signer.js' });
    expect(await rt.call('signRequest', '/data/api/items?page=1', 1_700_000_000)).toBe(
      expectedSignature('/data/api/items?page=1', 1_700_000_000),
    );
  });

  test('WASM imports bind to sandbox globals', async () => {
    // (module (import "env" "twice" (func (param i32) (result i32))) (func (export "run") (param i32) (result i32) local.get 0 call 0))
    const bytes = Uint8Array.from([
      0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 127, 1, 127, 2, 13, 1, 3, 101, 110, 118, 5, 116, 119, 105,
      99, 101, 0, 0, 3, 2, 1, 0, 7, 7, 1, 3, 114, 117, 110, 0, 1, 10, 8, 1, 6, 0, 32, 0, 16, 0, 11,
    ]);
    await rt.exec('function twice(n) { return n * 2; }');
    await rt.instantiateWasm('mod', bytes, { env: { twice: 'twice' } });
    expect(await rt.callWasm('mod', 'run', 21)).toBe(42);
  });

  test('page code cannot reach Node, the file system or the network', async () => {
    expect(
      await rt.evaluate(
        '[typeof process, typeof require, typeof fetch, typeof setTimeout, typeof module, typeof Buffer]',
      ),
    ).toEqual(Array(6).fill('undefined'));
    await expect(rt.evaluate('require("node:fs").readFileSync("/etc/passwd", "utf8")')).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_SCRIPT'),
    );
    await expect(rt.evaluate('process.exit(1)')).rejects.toThrow(/process is not defined/);
    await expect(rt.evaluate('fetch("http://127.0.0.1:1/")')).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_SCRIPT'),
    );
    await expect(rt.evaluate('import("node:fs")')).rejects.toThrow(code('MOCRA_ERR_SANDBOX_SCRIPT'));
    // The classic vm escape finds only the isolate's own Function.
    expect(await rt.evaluate('this.constructor.constructor("return typeof process")()')).toBe('undefined');
  });

  test('a throw keeps its message and sandbox stack; bad values are refused', async () => {
    await rt.exec('function boom() { throw new TypeError("bad token"); }', { filename: 'site.js' });
    const err = await rt.call('boom').catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'MOCRA_ERR_SANDBOX_SCRIPT',
      message: expect.stringContaining('TypeError: bad token'),
    });
    expect((err as { sandboxStack?: string }).sandboxStack).toContain('site.js');
    await expect(rt.evaluate('(function () {})')).rejects.toThrow(code('MOCRA_ERR_SANDBOX_VALUE'));
    await expect(rt.call('add', (() => 1) as never)).rejects.toThrow(code('MOCRA_ERR_SANDBOX_VALUE'));
    await expect(rt.call('missing')).rejects.toThrow(code('MOCRA_ERR_SANDBOX_SCRIPT'));
  });

  test('an infinite loop times out and the runtime goes on', async () => {
    await expect(rt.exec('for (;;) {}', { timeoutMs: 100 })).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_TIMEOUT'),
    );
    await rt.exec('function spin() { while (true) {} }');
    await expect(rt.callWith('spin', [], { timeoutMs: 100 })).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_TIMEOUT'),
    );
    expect(await rt.call('add', 1, 1)).toBe(2);
  });

  test('a 2 GB allocation is refused; a heap bomb disposes the isolate', async () => {
    await expect(rt.evaluate('new Uint8Array(2 * 1024 * 1024 * 1024).length')).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_MEMORY'),
    );
    expect(await rt.call('add', 1, 2)).toBe(3);
    const small = new JsRuntime({ memoryLimitMb: 16, timeoutMs: 20_000 });
    await expect(small.exec('const a = []; for (;;) a.push(new Array(100000).fill(1.5));')).rejects.toThrow(
      code('MOCRA_ERR_SANDBOX_MEMORY'),
    );
    expect(small.closed).toBe(true);
    await expect(small.evaluate('1')).rejects.toThrow(code('MOCRA_ERR_SANDBOX_CLOSED'));
  });
});

describe('JsWorkerPool', () => {
  test('N isolates, a queue, hostile calls refused with codes, the pool goes on', async () => {
    const pool = new JsWorkerPool({
      size: 2,
      memoryLimitMb: 16,
      timeoutMs: 300,
      async setup(rt) {
        await rt.instantiateWasm('signerWasm', SIGNER_WASM);
        await rt.exec(SIGNER_JS);
        await rt.exec(
          'function bomb() { const a = []; for (;;) a.push(new Array(100000).fill(1.5)); } function loop() { for (;;) {} }',
        );
      },
    });
    try {
      await pool.ready();
      const paths = Array.from({ length: 20 }, (_, i) => `/data/api/items?page=${i}`);
      const signed = await Promise.all(paths.map((p) => pool.call('signRequest', p, 1)));
      expect(signed).toEqual(paths.map((p) => expectedSignature(p, 1)));
      expect(pool.stats).toMatchObject({ size: 2, busy: 0, queued: 0 });

      const hostile = await Promise.allSettled([
        pool.call('loop'),
        pool.call('bomb'),
        pool.call('signRequest', '/a', 2),
      ]);
      expect(hostile[0]).toMatchObject({ status: 'rejected', reason: code('MOCRA_ERR_SANDBOX_TIMEOUT') });
      expect(hostile[1]).toMatchObject({ status: 'rejected', reason: code('MOCRA_ERR_SANDBOX_MEMORY') });
      expect(hostile[2]).toMatchObject({ status: 'fulfilled', value: expectedSignature('/a', 2) });
      // The disposed isolate was replaced and set up again: every runtime signs.
      const after = await Promise.all([1, 2, 3, 4].map((t) => pool.call('signRequest', '/b', t)));
      expect(after).toEqual([1, 2, 3, 4].map((t) => expectedSignature('/b', t)));
      expect(pool.stats.replaced).toBe(1);
    } finally {
      await pool.close();
    }
    await expect(pool.call('signRequest', '/c', 1)).rejects.toThrow(code('MOCRA_ERR_SANDBOX_CLOSED'));
  });

  test('a setup that throws reaches the caller', async () => {
    const pool = new JsWorkerPool({ size: 1, setup: (rt) => rt.exec('syntax error here') });
    await expect(pool.call('x')).rejects.toThrow(code('MOCRA_ERR_SANDBOX_SCRIPT'));
    await pool.close();
  });
});

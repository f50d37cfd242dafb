/**
 * The three ways to run a site's JavaScript that the sandbox could be built on, on the same
 * work: isolated-vm (a V8 isolate), quickjs-emscripten (QuickJS compiled to WebAssembly) and
 * node:vm inside a worker thread with resource limits. For each: set-up time, the time of N
 * calls of a signing-style function (FNV-1a over a string, 200 rounds), RSS per runtime, and
 * what an infinite loop, a 2 GB allocation and a heap bomb do.
 *
 *   node --import tsx --conditions=@mocra/source bench/sandbox-engines.ts [--calls 2000]
 *
 * Bounded: one pass per engine, every hostile case under a time limit.
 */

import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import ivm from 'isolated-vm';
import { getQuickJS, shouldInterruptAfterDeadline } from 'quickjs-emscripten';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '2000' } } });
const N = Math.min(Math.max(Number(values.calls), 10), 100_000);
const SIGN = `function sign(s){let h=0x811c9dc5;for(let r=0;r<200;r++)for(let i=0;i<s.length;i++){h^=s.charCodeAt(i);h=Math.imul(h,16777619)>>>0}return h.toString(16)}`;
const LOOP = 'for(;;){}';
const BIG = 'new Uint8Array(2*1024*1024*1024).fill(1).length';
const BOMB = 'const a=[];for(;;)a.push(new Array(100000).fill(1.5))';
const rss = () => process.memoryUsage().rss / 1e6;
const ms = (t: number) => Number((performance.now() - t).toFixed(1));
const outcome = async (f: () => Promise<unknown>) => {
  try {
    return `returned ${String(await f())}`;
  } catch (err) {
    return `threw: ${(err as Error).message.slice(0, 90)}`;
  }
};
const results: Record<string, unknown> = {};

{
  const r0 = rss();
  let t = performance.now();
  const iso = new ivm.Isolate({ memoryLimit: 64 });
  const ctx = await iso.createContext();
  await ctx.eval(SIGN);
  const setupMs = ms(t);
  const fn = await ctx.global.get('sign', { reference: true });
  t = performance.now();
  for (let i = 0; i < N; i++) await fn.apply(undefined, [`hello world ${i}`], { result: { copy: true } });
  const callsMs = ms(t);
  const more = [];
  for (let i = 0; i < 8; i++) {
    const x = new ivm.Isolate({ memoryLimit: 64 });
    (await x.createContext()).evalSync(SIGN);
    more.push(x);
  }
  results['isolated-vm'] = {
    setupMs,
    callsMs,
    rssPerRuntimeMb: Number(((rss() - r0) / 9).toFixed(1)),
    wasm: await ctx.eval('typeof WebAssembly'),
    loop: await outcome(() => ctx.eval(LOOP, { timeout: 200 })),
    alloc2GB: await outcome(() => ctx.eval(BIG, { timeout: 20_000 })),
    heapBomb: await outcome(async () => {
      const small = new ivm.Isolate({ memoryLimit: 16 });
      return (await small.createContext()).eval(BOMB, { timeout: 20_000 });
    }),
  };
}

{
  const r0 = rss();
  let t = performance.now();
  const QuickJS = await getQuickJS();
  const rt = QuickJS.newRuntime();
  rt.setMemoryLimit(64 * 1024 * 1024);
  const vm = rt.newContext();
  vm.unwrapResult(vm.evalCode(SIGN)).dispose();
  const setupMs = ms(t);
  const fn = vm.getProp(vm.global, 'sign');
  t = performance.now();
  for (let i = 0; i < N; i++) {
    const arg = vm.newString(`hello world ${i}`);
    const r = vm.unwrapResult(vm.callFunction(fn, vm.undefined, arg));
    vm.getString(r);
    r.dispose();
    arg.dispose();
  }
  const callsMs = ms(t);
  const more = [];
  for (let i = 0; i < 8; i++) {
    const x = QuickJS.newRuntime();
    x.setMemoryLimit(64 * 1024 * 1024);
    const c = x.newContext();
    c.unwrapResult(c.evalCode(SIGN)).dispose();
    more.push(c);
  }
  const run = async (code: string) => {
    rt.setInterruptHandler(shouldInterruptAfterDeadline(Date.now() + 2000));
    const r = vm.evalCode(code);
    if (r.error) {
      const e = vm.dump(r.error);
      r.error.dispose();
      throw new Error(typeof e === 'object' ? `${e.name}: ${e.message}` : String(e));
    }
    const v = vm.dump(r.value);
    r.value.dispose();
    return v;
  };
  results['quickjs-emscripten'] = {
    setupMs,
    callsMs,
    rssPerRuntimeMb: Number(((rss() - r0) / 9).toFixed(1)),
    wasm: vm.dump(vm.unwrapResult(vm.evalCode('typeof WebAssembly'))),
    loop: await outcome(() => run(LOOP)),
    alloc2GB: await outcome(() => run(BIG)),
    heapBomb: await outcome(() => run(BOMB)),
  };
}

{
  const r0 = rss();
  const src = `const { parentPort } = require('node:worker_threads'); const vm = require('node:vm');
    const c = vm.createContext({}); vm.runInContext(${JSON.stringify(SIGN)}, c);
    parentPort.on('message', (m) => { try { parentPort.postMessage(m.code ? String(vm.runInContext(m.code, c, { timeout: 2000 })) : vm.runInContext('sign', c)(m.arg)); } catch (e) { parentPort.postMessage('threw: ' + e.message); } });
    parentPort.postMessage('ready');`;
  const start = () =>
    new Promise<Worker>((resolve) => {
      const w = new Worker(src, { eval: true, resourceLimits: { maxOldGenerationSizeMb: 64 } });
      w.once('message', () => resolve(w));
    });
  const ask = (w: Worker, m: unknown) =>
    new Promise<string>((resolve) => {
      const onError = (e: Error) => resolve(`worker died: ${e.message.slice(0, 80)}`);
      w.once('message', (v: string) => {
        w.off('error', onError);
        resolve(v);
      });
      w.once('error', onError);
      w.postMessage(m);
    });
  let t = performance.now();
  const w = await start();
  const setupMs = ms(t);
  t = performance.now();
  for (let i = 0; i < N; i++) await ask(w, { arg: `hello world ${i}` });
  const callsMs = ms(t);
  const more = [];
  for (let i = 0; i < 8; i++) more.push(await start());
  const rssPerRuntimeMb = Number(((rss() - r0) / 9).toFixed(1));
  results['node:vm in a worker'] = {
    setupMs,
    callsMs,
    rssPerRuntimeMb,
    wasm: await ask(w, { code: 'typeof WebAssembly' }),
    nodeReachable: await ask(w, { code: 'this.constructor.constructor("return typeof process")()' }),
    loop: await ask(w, { code: LOOP }),
    alloc2GB: await ask(await start(), { code: BIG }),
    heapBomb: await ask(await start(), { code: BOMB }),
  };
  for (const x of [w, ...more]) await x.terminate();
}

console.log(JSON.stringify({ calls: N, node: process.version, results }, null, 2));
process.exit(0);

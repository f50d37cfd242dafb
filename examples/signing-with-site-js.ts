// A JSON API that only answers requests signed by the site's own JavaScript, which calls into
// the site's WebAssembly. Instead of reimplementing the signature, run the site's code as it
// is — in a sandbox (isolated-vm) with no access to Node, the file system or the network, a
// time limit per call and a memory limit per isolate.
// Runs offline against mocra's fixture site (needs the optional package isolated-vm):
//
//   node --import tsx --conditions=@mocra/source examples/signing-with-site-js.ts
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { JsWorkerPool } from 'mocra/sandbox';

interface Item {
  id: number;
  title: string;
  priceCents: number;
}

const site = await startFixtureSite();
let pool: JsWorkerPool | undefined;

const signed = defineSpider<Item>({
  name: 'signed-api',
  startUrls: [`${site.url}/data/signed`],
  async parse(res, cx) {
    const step = res.request.meta.step as string | undefined;
    if (step === undefined) {
      // The page: where its script, its WASM and its API are.
      const app = res.$('#app');
      cx.follow(res.$('script[src]').attr('src') ?? '', {
        meta: {
          step: 'script',
          wasm: app.attr('data-wasm'),
          api: app.attr('data-api'),
          pages: Number(app.attr('data-pages')),
        },
      });
    } else if (step === 'script') {
      cx.follow(String(res.request.meta.wasm), {
        meta: { ...res.request.meta, step: 'wasm', script: res.text() },
      });
    } else if (step === 'wasm') {
      const { script, api, pages } = res.request.meta as { script: string; api: string; pages: number };
      const wasm = res.body;
      // Two isolates, each set up like the page: WASM exports on `signerWasm`, then the script.
      pool = new JsWorkerPool({
        size: 2,
        timeoutMs: 500,
        memoryLimitMb: 32,
        async setup(rt) {
          await rt.instantiateWasm('signerWasm', wasm);
          await rt.exec(script, { filename: 'signer.js' });
        },
      });
      const ts = Math.floor(Date.now() / 1000);
      for (let page = 1; page <= pages; page++) {
        const path = `${api}?page=${page}`;
        const signature = await pool.call('signRequest', path, ts);
        cx.follow(`${path}&ts=${ts}`, {
          headers: { 'x-signature': String(signature) },
          meta: { step: 'api' },
        });
      }
    } else {
      for (const item of res.json<{ items: Item[] }>().items) cx.emit(item);
    }
  },
});

const items: Item[] = [];
const summary = await Mocra.builder()
  .spider(signed, (item) => {
    items.push(item);
  })
  .logging({ level: 'error' })
  .run();
await pool?.close();

items.sort((a, b) => a.id - b.id);
console.log(`first: ${JSON.stringify(items[0])}`);
console.log(`${summary.items} items from ${summary.pages} pages, ${summary.deadLettered} given up`);
await site.close();

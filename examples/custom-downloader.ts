// A downloader of your own: this one serves pages from an in-memory map, so the crawl needs no
// network and prints the same thing every time. The same shape fits a downloader that reads
// a directory of saved pages, calls an API client, or replays a HAR file.
//
//   node --import tsx --conditions=@mocra/source examples/custom-downloader.ts
import { type Downloader, defineSpider, Mocra, type Request, Response } from 'mocra';

const SHOP = 'https://shop.example';

// The whole "site": five pages, one of them linked but missing (a 404).
const pages = new Map<string, string>([
  [
    `${SHOP}/`,
    '<h1>Shop</h1><a href="/item/1">Kettle</a> <a href="/item/2">Teapot</a> <a href="/item/3">Mug</a> <a href="/item/4">Gone</a>',
  ],
  [`${SHOP}/item/1`, '<h1 class="name">Kettle</h1><p class="price">24.00</p><a href="/item/2">see also</a>'],
  [`${SHOP}/item/2`, '<h1 class="name">Teapot</h1><p class="price">31.50</p>'],
  [`${SHOP}/item/3`, '<h1 class="name">Mug</h1><p class="price">8.75</p>'],
]);

/**
 * A downloader is an object with a name, `download(request, signal)` and `close()`. It builds
 * the Response itself; the request goes into it, so parse code sees the request's meta.
 */
function createMemoryDownloader(name: string, site: ReadonlyMap<string, string>): Downloader {
  let served = 0;
  return {
    name,
    async download(request: Request): Promise<Response> {
      served++;
      const html = site.get(request.url);
      return new Response({
        url: request.url,
        status: html === undefined ? 404 : 200, // a missing page is a response, not an error
        headers: { 'content-type': 'text/html; charset=utf-8' },
        body: Buffer.from(html ?? '<h1>Not found</h1>'),
        request,
      });
    },
    async close() {
      console.log(`${name} downloader closed after serving ${served} requests`);
    },
  };
}

interface Item {
  name: string;
  price: number;
}

const shop = defineSpider<Item>({
  name: 'shop',
  downloader: 'memory', // every request of this spider goes through the downloader named 'memory'
  startUrls: [`${SHOP}/`],
  parse(res, cx) {
    if (res.status === 404) {
      console.log(`missing: ${res.url}`);
      return;
    }
    for (const a of res.$('a[href]').toArray()) cx.follow(a.attribs.href!);
    const name = res.$('h1.name').text();
    if (name) cx.emit({ name, price: Number(res.$('p.price').text()) });
  },
});

const items: Item[] = [];
const summary = await Mocra.builder()
  .spider(shop, (item) => void items.push(item))
  .downloader(createMemoryDownloader('memory', pages)) // register it by name
  .concurrency(1) // one request at a time: the output is in crawl order, the same on every run
  .handleSignals(false)
  .run();

for (const item of items.sort((a, b) => a.name.localeCompare(b.name))) {
  console.log(`${item.name.padEnd(8)} ${item.price.toFixed(2)}`);
}
console.log(`${summary.pages} pages, ${summary.items} items, ${summary.errors} errors (${summary.reason})`);

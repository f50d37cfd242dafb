/**
 * A page whose JSON API wants every request signed by the site's own code: `signer.js` (a
 * little obfuscated, as such scripts are) calls into `signer.wasm`. A crawler has to run both
 * — in a sandbox — or reimplement them; the server checks the signature and the timestamp.
 *
 *   GET /data/signed            HTML: <script src=signer.js>, data-wasm, data-api, data-pages
 *   GET /data/signer.js         defines signRequest(path, ts) on the global object; it reads
 *                               the WASM exports from globalThis.signerWasm
 *   GET /data/signer.wasm       exports mix(h, c) and fin(h) (i32)
 *   GET /data/api/items?page=N&ts=T   with X-Signature: signRequest('/data/api/items?page=N', T)
 *                               → 200 { page, pages, items } | 403 { error }
 */
import { bookSummaryAt } from '../catalog/data.js';
import type { ResolvedFixtureSiteOptions } from '../site/options.js';

export const SIGNED_PAGE_PATH = '/data/signed';
export const SIGNER_JS_PATH = '/data/signer.js';
export const SIGNER_WASM_PATH = '/data/signer.wasm';
export const SIGNED_API_PATH = '/data/api/items';
export const SIGNATURE_HEADER = 'x-signature';
/** Pages of the signed API, and items per page. */
export const SIGNED_PAGES = 3;
export const SIGNED_PER_PAGE = 10;
/** How far a request's `ts` (Unix seconds) may be from the server's clock. */
export const SIGNATURE_WINDOW_S = 300;

const KEY = 'fx-7Qk'; // the "secret" the script hides as char codes

/** One item of the signed API. */
export interface SignedItem {
  id: number;
  title: string;
  priceCents: number;
}

export const SIGNER_JS = `(function (g) {
  var _0x = [${[...KEY].map((c) => `0x${c.charCodeAt(0).toString(16)}`).join(', ')}];
  function _h(n) { return ('0000000' + (n >>> 0).toString(16)).slice(-8); }
  g.signRequest = function (p, t) {
    var w = g.signerWasm, h = -2128831035, s = String.fromCharCode.apply(null, _0x) + '|' + p + '|' + t;
    for (var i = 0; i < s.length; i++) h = w.mix(h, s.charCodeAt(i));
    return _h(w.fin(h));
  };
})(this);
`;

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

const section = (id: number, payload: number[]) => [id, ...uleb(payload.length), ...payload];
const body = (code: number[]) => [...uleb(code.length + 1), 0x00, ...code];
const name = (s: string) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];
const I32 = 0x7f;

/** The WASM module, assembled here: mix(h, c) = (h ^ c) × 16777619, fin(h) = h ^ (h >>> 15). */
export const SIGNER_WASM = Uint8Array.from([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00,
  ...section(1, [2, 0x60, 2, I32, I32, 1, I32, 0x60, 1, I32, 1, I32]),
  ...section(3, [2, 0, 1]),
  ...section(7, [2, ...name('mix'), 0x00, 0, ...name('fin'), 0x00, 1]),
  ...section(10, [
    2,
    ...body([0x20, 0, 0x20, 1, 0x73, 0x41, ...sleb(16777619), 0x6c, 0x0b]),
    ...body([0x20, 0, 0x20, 0, 0x41, ...sleb(15), 0x76, 0x73, 0x0b]),
  ]),
]);

/** What signer.js + signer.wasm compute, in plain TypeScript (the server checks with this). */
export function expectedSignature(path: string, ts: number | string): string {
  let h = -2128831035;
  const s = `${KEY}|${path}|${ts}`;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return ((h ^ (h >>> 15)) >>> 0).toString(16).padStart(8, '0');
}

export function renderSignedPage(): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Signed API</title>
<script src="${SIGNER_JS_PATH}"></script></head>
<body><h1>Signed API</h1>
<div id="app" data-wasm="${SIGNER_WASM_PATH}" data-api="${SIGNED_API_PATH}" data-pages="${SIGNED_PAGES}">Loading…</div>
<script>
WebAssembly.instantiateStreaming(fetch('${SIGNER_WASM_PATH}')).then(function (r) {
  window.signerWasm = r.instance.exports;
  var path = '${SIGNED_API_PATH}?page=1', ts = Math.floor(Date.now() / 1000);
  return fetch(path + '&ts=' + ts, { headers: { 'X-Signature': signRequest(path, ts) } });
}).then(function (r) { return r.json(); }).then(function (d) {
  document.getElementById('app').textContent = d.items.map(function (i) { return i.title; }).join(', ');
});
</script></body></html>`;
}

/** Items on page `page` (1-based) of the signed API. */
export function signedItemsPage(cfg: ResolvedFixtureSiteOptions, page: number): SignedItem[] {
  const out: SignedItem[] = [];
  for (let i = 0; i < SIGNED_PER_PAGE; i++) {
    const id = (page - 1) * SIGNED_PER_PAGE + i + 1;
    if (id > cfg.catalog.books) break;
    const book = bookSummaryAt(cfg, id);
    out.push({ id, title: book.title, priceCents: book.priceCents });
  }
  return out;
}

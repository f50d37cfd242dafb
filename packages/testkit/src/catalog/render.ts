/** HTML of the catalog pages. String building only; the category sidebar is built once per site. */
import { htmlPage } from '../content/html.js';
import type { Book, Category } from './data.js';
import { RATING_WORDS } from './data.js';

const HEADER = '<header class="site-header"><a class="brand" href="/books/page/1">Fixture Books</a></header>';

export function sidebar(categories: readonly Category[]): string {
  const items = categories.map((c) => `<li><a href="${c.url}">${c.name}</a></li>`).join('\n');
  return `<aside class="sidebar"><h2>Categories</h2>\n<ul class="categories">\n${items}\n</ul></aside>`;
}

function pod(b: Book): string {
  return `<li><article class="product_pod" data-id="${b.id}">
<h3><a href="${b.url}" title="${b.title}">${b.title}</a></h3>
<p class="star-rating ${RATING_WORDS[b.rating - 1]}" data-rating="${b.rating}"></p>
<div class="product_price"><p class="price_color">${b.price}</p>
<p class="availability ${b.inStock ? 'instock' : 'outofstock'}">${b.inStock ? 'In stock' : 'Out of stock'}</p></div>
</article></li>`;
}

function pager(base: string, page: number, pages: number): string {
  const prev = page > 1 ? `<li class="previous"><a href="${base}/page/${page - 1}">previous</a></li>` : '';
  const next = page < pages ? `<li class="next"><a href="${base}/page/${page + 1}">next</a></li>` : '';
  return `<ul class="pager">${prev}<li class="current">Page ${page} of ${pages}</li>${next}</ul>`;
}

export interface ListingView {
  heading: string;
  /** `/books` or `/books/category/<slug>`; pages are `<base>/page/N`. */
  base: string;
  page: number;
  pages: number;
  total: number;
  /** 1-based position of the first book of this page in the whole listing. */
  from: number;
  books: Book[];
  sidebar: string;
}

export function renderListing(v: ListingView): string {
  const body = `${HEADER}
<div class="layout">
${v.sidebar}
<main class="listing">
<h1>${v.heading}</h1>
<p class="result-count"><strong>${v.total}</strong> results${v.books.length > 0 ? ` - showing ${v.from} to ${v.from + v.books.length - 1}` : ''}</p>
<ol class="row">
${v.books.map(pod).join('\n')}
</ol>
${pager(v.base, v.page, v.pages)}
</main>
</div>`;
  return htmlPage(`${v.heading} | Page ${v.page} of ${v.pages} | Fixture Books`, body);
}

export function renderBook(b: Book, categoryUrl: string): string {
  const body = `${HEADER}
<ul class="breadcrumb"><li><a href="/books/page/1">Home</a></li><li><a href="${categoryUrl}">${b.category}</a></li><li class="active">${b.title}</li></ul>
<article class="product" data-id="${b.id}">
<h1>${b.title}</h1>
<p class="price price_color">${b.price}</p>
<p class="availability ${b.inStock ? 'instock' : 'outofstock'}" data-stock="${b.stock}">${b.availability}</p>
<p class="star-rating ${RATING_WORDS[b.rating - 1]}" data-rating="${b.rating}">Rated ${b.rating} of 5</p>
<p class="category"><a href="${categoryUrl}">${b.category}</a></p>
<div id="product_description" class="description"><h2>Description</h2><p>${b.description}</p></div>
<table class="product-info">
<tr><th>UPC</th><td class="upc">${b.upc}</td></tr>
<tr><th>Price</th><td>${b.price}</td></tr>
<tr><th>Availability</th><td>${b.availability}</td></tr>
<tr><th>Category</th><td>${b.category}</td></tr>
</table>
</article>`;
  return htmlPage(`${b.title} | Fixture Books`, body, `<link rel="canonical" href="${b.url}">\n`);
}

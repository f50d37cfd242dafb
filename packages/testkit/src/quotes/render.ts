/** HTML of the quotes site. */
import { escapeHtml, htmlPage } from '../content/html.js';
import type { Author, Quote } from './data.js';

function header(user: string | undefined): string {
  const auth =
    user === undefined
      ? '<a class="login" href="/quotes/login">Login</a>'
      : `Logged in as <span class="username">${escapeHtml(user)}</span> <a class="logout" href="/quotes/logout">Logout</a>`;
  return `<header class="site-header"><a class="brand" href="/quotes/page/1">Fixture Quotes</a>
<p class="auth">${auth}</p></header>`;
}

export function renderQuote(q: Quote): string {
  const tags = q.tags.map((t) => `<a class="tag" href="/quotes/tag/${t}/page/1">${t}</a>`).join(' ');
  return `<div class="quote" data-id="${q.id}">
<span class="text">“${q.text}”</span>
<span>by <small class="author">${q.author}</small> <a class="author-link" href="${q.authorUrl}">(about)</a></span>
<div class="tags">Tags: <meta class="keywords" content="${q.tags.join(',')}"> ${tags}</div>
</div>`;
}

function pager(base: string, page: number, pages: number): string {
  const prev = page > 1 ? `<li class="previous"><a href="${base}/page/${page - 1}">previous</a></li>` : '';
  const next = page < pages ? `<li class="next"><a href="${base}/page/${page + 1}">next</a></li>` : '';
  return `<ul class="pager">${prev}<li class="current">Page ${page} of ${pages}</li>${next}</ul>`;
}

export function tagSidebar(tags: readonly string[]): string {
  return `<aside class="tags-box"><h2>Tags</h2>\n${tags
    .map((t) => `<a class="tag-item" href="/quotes/tag/${t}/page/1">${t}</a>`)
    .join('\n')}\n</aside>`;
}

export interface QuoteListView {
  heading: string;
  base: string;
  page: number;
  pages: number;
  quotes: Quote[];
  sidebar: string;
  user: string | undefined;
}

export function renderQuoteList(v: QuoteListView): string {
  const body = `${header(v.user)}
<div class="layout">
<main class="quotes">
<h1>${v.heading}</h1>
${v.quotes.map(renderQuote).join('\n')}
${pager(v.base, v.page, v.pages)}
</main>
${v.sidebar}
</div>`;
  return htmlPage(`${v.heading} | Page ${v.page} | Fixture Quotes`, body);
}

export function renderAuthor(a: Author, user: string | undefined): string {
  const body = `${header(user)}
<main class="author-details" data-index="${a.index}">
<h1 class="author-title">${a.name}</h1>
<p><strong>Born:</strong> <span class="author-born-date">${a.born}</span> <span class="author-born-location">${a.bornIn}</span></p>
<div class="author-description">${a.bio}</div>
<p class="author-quote-count">${a.quotes} quotes</p>
</main>`;
  return htmlPage(`${a.name} | Fixture Quotes`, body);
}

export function renderLogin(
  csrf: string,
  next: string,
  error: string | undefined,
  user: string | undefined,
): string {
  const body = `${header(user)}
<main class="login">
<h1>Login</h1>
${error === undefined ? '' : `<p class="error">${escapeHtml(error)}</p>\n`}<form class="login-form" action="/quotes/login" method="post">
<input type="hidden" name="csrf_token" value="${escapeHtml(csrf)}">
<input type="hidden" name="next" value="${escapeHtml(next)}">
<label>Username <input type="text" name="username" id="username"></label>
<label>Password <input type="password" name="password" id="password"></label>
<input type="submit" value="Login">
</form>
</main>`;
  return htmlPage('Login | Fixture Quotes', body);
}

export function renderAccount(user: string, saved: Quote[]): string {
  const body = `${header(user)}
<main class="account">
<h1>Account</h1>
<p class="welcome">Welcome back, <span class="account-username">${escapeHtml(user)}</span>.</p>
<h2>Saved quotes</h2>
<div class="saved-quotes">
${saved.map(renderQuote).join('\n')}
</div>
</main>`;
  return htmlPage('Account | Fixture Quotes', body);
}

/** JSON embedded in a `<script>`: `<` escaped so no text can close the element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

const RENDER_SCRIPT = `function quoteEl(q) {
  var d = document.createElement('div'); d.className = 'quote'; d.setAttribute('data-id', String(q.id));
  var t = document.createElement('span'); t.className = 'text'; t.textContent = '\\u201c' + q.text + '\\u201d'; d.appendChild(t);
  var by = document.createElement('span'); by.appendChild(document.createTextNode('by '));
  var a = document.createElement('small'); a.className = 'author'; a.textContent = q.author.name; by.appendChild(a);
  var l = document.createElement('a'); l.className = 'author-link'; l.href = q.author.url; l.textContent = ' (about)'; by.appendChild(l);
  d.appendChild(by);
  var tags = document.createElement('div'); tags.className = 'tags'; tags.appendChild(document.createTextNode('Tags: '));
  q.tags.forEach(function (name) {
    var g = document.createElement('a'); g.className = 'tag'; g.href = '/quotes/tag/' + name + '/page/1'; g.textContent = name;
    tags.appendChild(g); tags.appendChild(document.createTextNode(' '));
  });
  d.appendChild(tags);
  return d;
}`;

/** A page whose quotes exist only after its script runs (built from inline JSON, optionally after a delay). */
export function renderJsPage(apiPage: unknown, page: number, pages: number, delayMs: number): string {
  const body = `<header class="site-header"><a class="brand" href="/quotes/page/1">Fixture Quotes</a></header>
<main class="quotes js-rendered">
<h1>Quotes rendered by JavaScript</h1>
<div id="quotes"></div>
<ul class="pager" id="pager"></ul>
<noscript><p class="noscript">This page needs JavaScript.</p></noscript>
</main>
<script>
var data = ${scriptJson(apiPage)};
var page = ${page}, pages = ${pages}, delayMs = ${delayMs};
${RENDER_SCRIPT}
function render() {
  var box = document.getElementById('quotes');
  data.quotes.forEach(function (q) { box.appendChild(quoteEl(q)); });
  var pager = document.getElementById('pager');
  if (page > 1) pager.insertAdjacentHTML('beforeend', '<li class="previous"><a href="/quotes/js/page/' + (page - 1) + '">previous</a></li>');
  if (page < pages) pager.insertAdjacentHTML('beforeend', '<li class="next"><a href="/quotes/js/page/' + (page + 1) + '">next</a></li>');
  document.body.setAttribute('data-rendered', 'true');
}
if (delayMs > 0) setTimeout(render, delayMs); else render();
</script>`;
  return htmlPage(`JavaScript quotes | Page ${page} | Fixture Quotes`, body);
}

/** An infinite-scroll page: its script fetches /api/quotes page by page as the user scrolls. */
export function renderScrollPage(): string {
  const body = `<header class="site-header"><a class="brand" href="/quotes/page/1">Fixture Quotes</a></header>
<main class="quotes infinite-scroll">
<h1>Quotes, infinite scroll</h1>
<div id="quotes"></div>
<p class="loading" id="loading">Loading…</p>
<noscript><p class="noscript">This page needs JavaScript.</p></noscript>
</main>
<script>
${RENDER_SCRIPT}
var next = 1, busy = false, done = false;
function more() {
  if (busy || done) return;
  busy = true;
  fetch('/api/quotes?page=' + next).then(function (r) { return r.json(); }).then(function (data) {
    var box = document.getElementById('quotes');
    data.quotes.forEach(function (q) { box.appendChild(quoteEl(q)); });
    next = data.page + 1; done = !data.has_next; busy = false;
    document.body.setAttribute('data-pages-loaded', String(data.page));
    if (done) { document.getElementById('loading').textContent = 'No more quotes.'; document.body.setAttribute('data-complete', 'true'); }
    else if (document.documentElement.scrollHeight <= window.innerHeight + 10) more();
  });
}
window.addEventListener('scroll', function () {
  if (window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 200) more();
});
more();
</script>`;
  return htmlPage('Infinite scroll | Fixture Quotes', body);
}

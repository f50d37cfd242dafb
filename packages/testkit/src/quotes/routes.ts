/**
 * Routes of the quotes site: listing, tag and author pages, the login form with its CSRF token,
 * the cookie-protected account page, the JSON API and the two JavaScript-only pages. Cookies and
 * form bodies are parsed only inside this scope, so other routes pay nothing for them.
 */
import fastifyCookie from '@fastify/cookie';
import fastifyFormbody from '@fastify/formbody';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HTML_TYPE, JSON_TYPE } from '../content/html.js';
import { hash32, STREAM } from '../content/random.js';
import type { RouteRegistrar } from '../site/context.js';
import { badRequest, notFound, positiveInt, queryInt } from '../site/http.js';
import {
  type Author,
  authorAt,
  type Quote,
  quoteAt,
  quoteIdsWithTag,
  quotePage,
  quotePageCount,
  tagNames,
} from './data.js';
import {
  renderAccount,
  renderAuthor,
  renderJsPage,
  renderLogin,
  renderQuoteList,
  renderScrollPage,
  tagSidebar,
} from './render.js';

export const CSRF_COOKIE = 'fixture_csrf';
export const SESSION_COOKIE = 'fixture_session';

/** The JSON shape of one quote in `/api/quotes`. */
export interface ApiQuote {
  id: number;
  text: string;
  author: { name: string; slug: string; url: string };
  tags: string[];
}

/** The JSON body of `/api/quotes?page=N`. */
export interface ApiQuotesPage {
  page: number;
  per_page: number;
  has_next: boolean;
  /** Quotes in the whole (optionally tag-filtered) listing. */
  total: number;
  quotes: ApiQuote[];
}

export function apiQuote(q: Quote): ApiQuote {
  return {
    id: q.id,
    text: q.text,
    author: { name: q.author, slug: q.authorSlug, url: q.authorUrl },
    tags: q.tags,
  };
}

/** Where to go after login: only a same-site path, never `//host` or a full URL. */
function safeNext(value: unknown): string {
  return typeof value === 'string' && /^\/(?![/\\])[^\s]*$/.test(value) ? value : '/quotes/account';
}

export const registerQuotesRoutes: RouteRegistrar = (app, ctx) => {
  const cfg = ctx.cfg;
  const { sessions } = ctx;
  const { count, perPage, authors } = cfg.quotes;
  const pages = quotePageCount(cfg);
  const tags = tagNames(cfg);
  const side = tagSidebar(tags);
  const authorBySlug = new Map<string, Author>();
  for (let a = 0; a < authors; a++) {
    const author = authorAt(cfg, a);
    authorBySlug.set(author.slug, author);
  }
  // Quote ids per tag, computed on the first request for that tag (at most 20 small arrays).
  const tagIds = new Map<string, readonly number[]>();
  const idsWithTag = (tag: string): readonly number[] => {
    let ids = tagIds.get(tag);
    if (ids === undefined) {
      ids = quoteIdsWithTag(cfg, tag);
      tagIds.set(tag, ids);
    }
    return ids;
  };
  const ttlSeconds = cfg.login.sessionTtlMs > 0 ? Math.ceil(cfg.login.sessionTtlMs / 1000) : undefined;

  app.register(async (scope) => {
    await scope.register(fastifyCookie);
    await scope.register(fastifyFormbody, { bodyLimit: 64 * 1024 });

    const userOf = (req: FastifyRequest): string | undefined =>
      sessions.verifySession(req.cookies[SESSION_COOKIE]);

    const sendLogin = (reply: FastifyReply, status: number, next: string, error: string | undefined) => {
      const csrf = sessions.issueCsrf();
      return reply
        .code(status)
        .setCookie(CSRF_COOKIE, csrf, { path: '/quotes', httpOnly: true, sameSite: 'lax' })
        .header('cache-control', 'no-store')
        .type(HTML_TYPE)
        .send(renderLogin(csrf, next, error, undefined));
    };

    scope.get('/quotes', (_req, reply) => reply.redirect('/quotes/page/1', 302));

    scope.get<{ Params: { n: string } }>('/quotes/page/:n', (req, reply) => {
      const page = positiveInt(req.params.n);
      if (page < 1 || page > pages) return notFound(reply);
      return reply.type(HTML_TYPE).send(
        renderQuoteList({
          heading: 'Quotes',
          base: '/quotes',
          page,
          pages,
          quotes: quotePage(cfg, page),
          sidebar: side,
          user: userOf(req),
        }),
      );
    });

    scope.get<{ Params: { tag: string; n: string } }>('/quotes/tag/:tag/page/:n', (req, reply) => {
      const tag = req.params.tag;
      if (!tags.includes(tag)) return notFound(reply);
      const ids = idsWithTag(tag);
      const tagPages = Math.max(1, Math.ceil(ids.length / perPage));
      const page = positiveInt(req.params.n);
      if (page < 1 || page > tagPages) return notFound(reply);
      return reply.type(HTML_TYPE).send(
        renderQuoteList({
          heading: `Viewing tag: ${tag}`,
          base: `/quotes/tag/${tag}`,
          page,
          pages: tagPages,
          quotes: ids.slice((page - 1) * perPage, page * perPage).map((id) => quoteAt(cfg, id)),
          sidebar: side,
          user: userOf(req),
        }),
      );
    });

    scope.get<{ Params: { slug: string } }>('/quotes/author/:slug', (req, reply) => {
      const author = authorBySlug.get(req.params.slug);
      if (author === undefined) return notFound(reply);
      return reply.type(HTML_TYPE).send(renderAuthor(author, userOf(req)));
    });

    scope.get<{ Querystring: { next?: string } }>('/quotes/login', (req, reply) =>
      sendLogin(reply, 200, safeNext(req.query.next), undefined),
    );

    scope.post<{ Body: Record<string, unknown> | undefined }>('/quotes/login', (req, reply) => {
      const body = req.body ?? {};
      const next = safeNext(body.next);
      if (!sessions.checkCsrf(body.csrf_token, req.cookies[CSRF_COOKIE])) {
        sessions.counters.csrfFailures += 1;
        return sendLogin(reply, 403, next, 'Invalid or missing CSRF token.');
      }
      const { username, password } = body;
      const expected = typeof username === 'string' ? cfg.login.users[username] : undefined;
      if (
        typeof username !== 'string' ||
        !Object.hasOwn(cfg.login.users, username) ||
        typeof password !== 'string' ||
        password !== expected
      ) {
        sessions.counters.credentialFailures += 1;
        return sendLogin(reply, 401, next, 'Invalid username or password.');
      }
      sessions.counters.logins += 1;
      return reply
        .setCookie(SESSION_COOKIE, sessions.issueSession(username), {
          path: '/',
          httpOnly: true,
          sameSite: 'lax',
          ...(ttlSeconds === undefined ? {} : { maxAge: ttlSeconds }),
        })
        .clearCookie(CSRF_COOKIE, { path: '/quotes' })
        .redirect(next, 302);
    });

    scope.get('/quotes/logout', (_req, reply) =>
      reply.clearCookie(SESSION_COOKIE, { path: '/' }).redirect('/quotes/page/1', 302),
    );

    scope.get('/quotes/account', (req, reply) => {
      const user = userOf(req);
      if (user === undefined) {
        sessions.counters.rejectedSessions += 1;
        return reply.redirect(`/quotes/login?next=${encodeURIComponent('/quotes/account')}`, 302);
      }
      // Five saved quotes per user, drawn from the username so they are stable across logins.
      const saved: Quote[] = [];
      let h = hash32(
        cfg.seed,
        STREAM.accountQuotes,
        [...user].reduce((acc, ch) => acc * 31 + ch.charCodeAt(0), 7),
      );
      for (let k = 0; k < Math.min(5, count); k++) {
        saved.push(quoteAt(cfg, 1 + (h % count)));
        h = hash32(h, k + 1);
      }
      return reply.header('cache-control', 'no-store').type(HTML_TYPE).send(renderAccount(user, saved));
    });

    scope.get('/api/me', (req, reply) => {
      const user = userOf(req);
      if (user === undefined) {
        sessions.counters.rejectedSessions += 1;
        return reply.code(401).type(JSON_TYPE).send('{"error":"not logged in"}');
      }
      return reply.type(JSON_TYPE).send(JSON.stringify({ username: user }));
    });
  });

  const apiPage = (page: number, tag: string | undefined): ApiQuotesPage => {
    if (tag === undefined) {
      return {
        page,
        per_page: perPage,
        has_next: page * perPage < count,
        total: count,
        quotes: quotePage(cfg, page).map(apiQuote),
      };
    }
    const ids = idsWithTag(tag);
    return {
      page,
      per_page: perPage,
      has_next: page * perPage < ids.length,
      total: ids.length,
      quotes: ids.slice((page - 1) * perPage, page * perPage).map((id) => apiQuote(quoteAt(cfg, id))),
    };
  };

  app.get<{ Querystring: { page?: string; tag?: string } }>('/api/quotes', (req, reply) => {
    const page = queryInt(req.query.page, 1, 1e9);
    if (page < 1) return badRequest(reply, 'page must be a positive integer');
    const tag = req.query.tag;
    if (tag !== undefined && !tags.includes(tag)) return badRequest(reply, 'unknown tag');
    return reply.type(JSON_TYPE).send(JSON.stringify(apiPage(page, tag)));
  });

  app.get<{ Params: { n: string }; Querystring: { delay?: string } }>('/quotes/js/page/:n', (req, reply) => {
    const page = positiveInt(req.params.n);
    if (page < 1 || page > pages) return notFound(reply);
    const delay = queryInt(req.query.delay, 0, 60_000);
    if (delay < 0) return badRequest(reply, 'delay must be 0 … 60000 ms');
    return reply.type(HTML_TYPE).send(renderJsPage(apiPage(page, undefined), page, pages, delay));
  });

  const scroll = renderScrollPage();
  app.get('/quotes/scroll', (_req, reply) => reply.type(HTML_TYPE).send(scroll));
};

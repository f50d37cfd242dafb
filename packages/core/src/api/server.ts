/**
 * The control-plane HTTP server (fastify): the dashboard, read-only observability endpoints
 * and authenticated control endpoints, all answered from a {@link ControlPlane}.
 *
 * ```
 *  request ─▶ Host? ─▶ CORS ─▶ route ─▶ [auth?] ─▶ [rate limit? mutating only] ─▶ validate ─▶ control plane
 *               │                          │              │                          │        (bounded by
 *               ▼                          ▼              ▼                          ▼         callTimeoutMs)
 *              421                      401/403          429                        400
 *                     every error: { error: { code, message, status }, requestId }
 * ```
 *
 * A browser page of another origin reads nothing unless its origin is in `corsOrigins`, and a
 * request for a host name the API does not serve is refused (host-check.ts), so neither a
 * hostile page nor DNS rebinding reaches the logs, metrics or hosts of a crawl on 127.0.0.1.
 *
 * Start-up is all or nothing: `listen()` either resolves with the bound address or rejects with
 * an ApiBindError after closing the server, so a failed bind never leaves a half-started
 * process behind (a headless process still running without its API).
 */

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { MOCRA_VERSION } from '../downloader/version.js';
import {
  ApiBindError,
  ApiHostNotAllowedError,
  ApiKeyNotConfiguredError,
  ApiNotFoundError,
  ApiRateLimitedError,
  ApiUnauthorizedError,
  ApiUnavailableError,
  ApiValidationError,
  type ApiValidationIssue,
  InvalidArgumentError,
  isMocraError,
} from '../errors.js';
import type { LogBuffer } from '../observability/log-buffer.js';
import type { Logger } from '../observability/logger.js';
import { SystemSampler } from '../observability/metrics/system-sampler.js';
import { lazyRequire } from '../optional-dependency.js';
import { ApiKeyChecker } from './auth.js';
import { dashboardHtml } from './dashboard.js';
import { errorResponse } from './error-status.js';
import { createHostCheck, type HostCheck } from './host-check.js';
import { openApiDocument } from './openapi.js';
import { RateLimiter } from './rate-limit.js';
import { API_ROUTES, type RouteId, type RouteSpec } from './routes.js';
import {
  type dlqListQuerySchema,
  type logsQuerySchema,
  type startWorkBodySchema,
  startWorkInputOf,
} from './schemas.js';
import type { ControlPlane, DlqSelection, MetricsSource } from './types.js';

// Loaded when a server is built: a crawl without the control API never loads fastify.
const fastify = lazyRequire<typeof import('fastify')>('fastify');
const fastifyCors = lazyRequire<typeof import('@fastify/cors')>('@fastify/cors');

export interface ApiServerOptions {
  /** What the endpoints observe and steer. */
  controlPlane: ControlPlane;
  /** What `/metrics` renders (a MocraMetrics or a prom-client Registry). Without it `/metrics` is a 503. */
  metrics?: MetricsSource;
  /** The ring `/observability/logs` reads. Without it that endpoint is a 503. */
  logs?: LogBuffer;
  /** @default a new SystemSampler */
  system?: SystemSampler;
  /** Interface to bind. Use '0.0.0.0' to be reachable from other machines or containers. @default '127.0.0.1' */
  host?: string;
  /** 0 picks a free port (see `listen()`'s result). @default 8905 */
  port?: number;
  /** Key(s) accepted by the authenticated endpoints. None: those endpoints answer 403. */
  apiKey?: string | readonly string[];
  /**
   * Origins (`https://grafana.example.com`) whose pages may call the API from a browser
   * (CORS); `'*'` allows any. The dashboard served here is same-origin and needs none.
   * @default [] (no cross-origin access)
   */
  corsOrigins?: readonly string[];
  /**
   * Host names (the `Host` header) served besides the bind host, this machine's name,
   * `localhost` and IP addresses; `'*'` serves any. Others answer 421 (DNS rebinding).
   * @default []
   */
  allowedHosts?: readonly string[];
  /** Mutating requests per second per key (token bucket); 0 turns the limit off. @default 10 */
  rateLimit?: number;
  /** Bucket size of the rate limit. @default 2 × rateLimit */
  rateLimitBurst?: number;
  /** Largest accepted request body, in bytes. @default 1048576 */
  bodyLimit?: number;
  /** Serve the dashboard at `/` (else `/` answers a small JSON description). @default true */
  dashboard?: boolean;
  /** A control-plane call slower than this answers 503 instead of hanging the request. @default 5000 */
  callTimeoutMs?: number;
  /** Where server-side failures (5xx) are logged. @default none */
  logger?: Logger;
}

export interface ApiAddress {
  host: string;
  port: number;
  /** `http://host:port` (a wildcard host is shown as 127.0.0.1). */
  url: string;
}

/** Failed authentications per client address: 10 at once, then one a second. */
const AUTH_FAILURE_RATE = { ratePerSecond: 1, burst: 10 } as const;

export const DEFAULT_API_PORT = 8905;

export function createApiServer(options: ApiServerOptions): ApiServer {
  return new ApiServer(options);
}

type Handler = (
  req: FastifyRequest,
  reply: FastifyReply,
  input: { query: unknown; body: unknown },
) => Promise<unknown>;

export class ApiServer {
  readonly host: string;
  readonly port: number;
  readonly #app: FastifyInstance;
  readonly #plane: ControlPlane;
  readonly #metrics: MetricsSource | undefined;
  readonly #logs: LogBuffer | undefined;
  readonly #system: SystemSampler;
  readonly #keys: ApiKeyChecker;
  readonly #limiter: RateLimiter;
  readonly #authFailures = new RateLimiter(AUTH_FAILURE_RATE);
  readonly #callTimeoutMs: number;
  readonly #dashboard: boolean;
  readonly #logger: Logger | undefined;
  readonly #corsOrigins: readonly string[];
  readonly #hostAllowed: HostCheck;
  #listening: Promise<ApiAddress> | undefined;
  #address: ApiAddress | undefined;
  #closed = false;

  constructor(options: ApiServerOptions) {
    const port = options.port ?? DEFAULT_API_PORT;
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new InvalidArgumentError(`api port must be an integer from 0 to 65535, got ${port}`);
    }
    const rate = options.rateLimit ?? 10;
    if (!(rate >= 0) || !Number.isFinite(rate)) {
      throw new InvalidArgumentError(`api rateLimit must be a number ≥ 0, got ${rate}`);
    }
    this.host = options.host ?? '127.0.0.1';
    this.port = port;
    this.#plane = options.controlPlane;
    this.#metrics = options.metrics;
    this.#logs = options.logs;
    this.#system = options.system ?? new SystemSampler();
    const keys =
      options.apiKey === undefined
        ? []
        : typeof options.apiKey === 'string'
          ? [options.apiKey]
          : [...options.apiKey];
    this.#keys = new ApiKeyChecker(keys);
    this.#limiter = new RateLimiter(
      options.rateLimitBurst === undefined
        ? { ratePerSecond: rate }
        : { ratePerSecond: rate, burst: options.rateLimitBurst },
    );
    this.#callTimeoutMs = options.callTimeoutMs ?? 5000;
    this.#dashboard = options.dashboard ?? true;
    this.#logger = options.logger;
    this.#corsOrigins = options.corsOrigins ?? [];
    this.#hostAllowed = createHostCheck(this.host, options.allowedHosts);
    this.#app = this.#build(options.bodyLimit ?? 1024 * 1024);
  }

  /** The bound address once `listen()` resolved. */
  get address(): ApiAddress | undefined {
    return this.#address;
  }

  get url(): string | undefined {
    return this.#address?.url;
  }

  /**
   * Bind and serve. Resolves with the address (the real port when `port` was 0); rejects with
   * ApiBindError after closing everything it opened. Calling it again returns the same promise.
   */
  listen(): Promise<ApiAddress> {
    this.#listening ??= this.#listen();
    return this.#listening;
  }

  /** Stop accepting connections and close open ones (keep-alive dashboards included). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#app.close();
  }

  async #listen(): Promise<ApiAddress> {
    if (this.#closed)
      throw new ApiBindError(this.host, this.port, { cause: new Error('the server was closed') });
    try {
      await this.#app.listen({ host: this.host, port: this.port });
    } catch (err) {
      this.#closed = true;
      await this.#app.close().catch(() => {});
      throw new ApiBindError(this.host, this.port, { cause: err });
    }
    const bound = this.#app.server.address();
    const port = typeof bound === 'object' && bound !== null ? bound.port : this.port;
    const shownHost = this.host === '0.0.0.0' || this.host === '::' ? '127.0.0.1' : this.host;
    const urlHost = shownHost.includes(':') ? `[${shownHost}]` : shownHost;
    this.#address = { host: this.host, port, url: `http://${urlHost}:${port}` };
    return this.#address;
  }

  #build(bodyLimit: number): FastifyInstance {
    const app = fastify().fastify({
      logger: false,
      bodyLimit,
      genReqId: () => randomUUID(),
      // Dashboards keep connections alive; close() must not wait for them.
      forceCloseConnections: true,
      return503OnClosing: true,
    });

    // An empty JSON body is "no body" (a bodiless POST /control/pause from curl -H content-type).
    // Bodies are JSON or nothing: without a text parser, any other type is a 415.
    app.removeContentTypeParser('text/plain');
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      if (text.trim() === '') return done(null, undefined);
      try {
        done(null, JSON.parse(text));
      } catch (err) {
        done(
          new ApiValidationError([{ path: 'body', message: `not valid JSON: ${(err as Error).message}` }]),
          undefined,
        );
      }
    });

    // First, before CORS answers a preflight: a request for a host this API does not serve.
    app.addHook('onRequest', async (req) => {
      if (!this.#hostAllowed(req.headers.host)) throw new ApiHostNotAllowedError(req.headers.host ?? '');
    });

    // Without configured origins there are no CORS headers at all: browsers keep other
    // origins' pages from reading any answer.
    if (this.#corsOrigins.length > 0) {
      void app.register(fastifyCors().fastifyCors, {
        origin: this.#corsOrigins.includes('*') ? '*' : [...this.#corsOrigins],
        methods: ['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS'],
        allowedHeaders: ['authorization', 'x-api-key', 'content-type'],
        exposedHeaders: ['retry-after', 'x-request-id', 'x-ratelimit-remaining'],
        maxAge: 600,
      });
    }

    app.addHook('onSend', async (req, reply) => {
      reply.header('x-request-id', req.id);
      reply.header('x-content-type-options', 'nosniff');
    });

    app.setNotFoundHandler((req, reply) => {
      this.#sendError(req, reply, new ApiNotFoundError(req.method, req.url.split('?')[0] ?? req.url));
    });
    app.setErrorHandler((err, req, reply) => {
      this.#sendError(req, reply, err);
    });

    const handlers = this.#handlers();
    for (const route of API_ROUTES) {
      const handler = handlers[route.id];
      app.route({
        method: route.method,
        url: route.url,
        handler: async (req, reply) => {
          this.#authorize(route, req, reply);
          const input = {
            query: route.query === undefined ? undefined : validate(route.query, req.query ?? {}, 'query'),
            body: route.body === undefined ? undefined : validate(route.body, req.body ?? {}, 'body'),
          };
          const result = await handler(req, reply, input);
          if (reply.sent) return reply;
          if (reply.statusCode === 200 && route.status !== 200) reply.code(route.status);
          return result;
        },
      });
    }
    return app;
  }

  #authorize(route: RouteSpec, req: FastifyRequest, reply: FastifyReply): void {
    if (!route.auth) return;
    const check = this.#keys.check(req.headers);
    if (check.kind === 'not-configured') throw new ApiKeyNotConfiguredError();
    if (check.kind === 'rejected') {
      // Guessing keys costs a token per try from the caller's address.
      const decision = this.#authFailures.take(`ip:${req.ip}`);
      if (!decision.allowed) throw new ApiRateLimitedError(decision.retryAfterMs);
      throw new ApiUnauthorizedError(
        check.presented
          ? 'the API key is wrong'
          : 'a valid API key is required (Authorization: Bearer <key> or x-api-key: <key>)',
      );
    }
    if (!route.rateLimited) return;
    const decision = this.#limiter.take(check.id);
    if (!decision.allowed) throw new ApiRateLimitedError(decision.retryAfterMs);
    if (Number.isFinite(decision.remaining)) reply.header('x-ratelimit-remaining', decision.remaining);
  }

  #handlers(): Record<RouteId, Handler> {
    const plane = this.#plane;
    const call = <T>(what: string, fn: () => Promise<T>) => this.#call(what, fn);
    return {
      dashboard: async (_req, reply) => {
        if (!this.#dashboard) {
          return { name: 'mocra', version: MOCRA_VERSION, dashboard: false, openapi: '/openapi.json' };
        }
        const html = dashboardHtml();
        reply
          .type('text/html; charset=utf-8')
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .header(
            'content-security-policy',
            // The page talks to its own origin only (the API key never leaves it).
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
          );
        return html;
      },
      openapi: async () => openApiDocument(),
      health: async (_req, reply) => {
        const health = await call('health', () => plane.health());
        if (health.status === 'down') reply.code(503);
        return health;
      },
      metrics: async (_req, reply) => {
        const source = this.#metrics;
        if (source === undefined)
          throw new ApiUnavailableError('no metrics registry is attached to this API server');
        const text = await call('metrics', () => source.metrics());
        reply.type(source.contentType).header('cache-control', 'no-store');
        return text;
      },
      engine: async () => call('engine', () => plane.engine()),
      cluster: async () => call('cluster', () => plane.cluster()),
      system: async () => this.#system.sample(),
      history: async () => call('history', () => plane.history()),
      logs: async (_req, _reply, { query }) => {
        const logs = this.#logs;
        if (logs === undefined) throw new ApiUnavailableError('no log buffer is attached to this API server');
        const q = query as z.output<typeof logsQuerySchema>;
        return {
          records: logs.query({
            limit: q.limit,
            ...(q.level === undefined ? {} : { level: q.level }),
            ...(q.module === undefined ? {} : { module: q.module }),
            ...(q.after === undefined ? {} : { after: q.after }),
          }),
          capacity: logs.capacity,
          disabled: logs.disabled,
          lastSeq: logs.lastSeq,
        };
      },
      hosts: async () => call('hosts', () => plane.hosts()),
      queues: async () => call('queues', () => plane.queues()),
      startWork: async (_req, _reply, { body }) => {
        const task = startWorkInputOf(body as z.output<typeof startWorkBodySchema>);
        return call('start_work', () => plane.startWork(task));
      },
      pause: async () => call('pause', () => plane.pause()),
      resume: async () => call('resume', () => plane.resume()),
      stop: async () => call('stop', () => plane.stop()),
      nodes: async () => call('nodes', () => plane.nodes()),
      dlqList: async (_req, _reply, { query }) => {
        const q = query as z.output<typeof dlqListQuerySchema>;
        if (q.topic !== undefined) this.#checkTopic(q.topic, 'query');
        return call('dlq', () =>
          plane.listDeadLetters({
            limit: q.limit,
            offset: q.offset,
            ...(q.topic === undefined ? {} : { topic: q.topic }),
            ...(q.reasonIncludes === undefined ? {} : { reasonIncludes: q.reasonIncludes }),
          }),
        );
      },
      dlqReplay: async (_req, _reply, { body }) => {
        const selection = selectionOf(body as DlqSelection);
        if (selection.topic !== undefined) this.#checkTopic(selection.topic, 'body');
        return call('dlq replay', () => plane.replayDeadLetters(selection));
      },
      dlqPurge: async (_req, _reply, { query }) => {
        const selection = selectionOf(query as DlqSelection);
        if (selection.topic !== undefined) this.#checkTopic(selection.topic, 'query');
        return call('dlq purge', () => plane.purgeDeadLetters(selection));
      },
    };
  }

  #checkTopic(topic: string, where: 'query' | 'body'): void {
    const topics = this.#plane.dlqTopics();
    if (!topics.includes(topic)) {
      throw new ApiValidationError([
        { path: `${where}.topic`, message: `unknown topic '${topic}'; one of ${topics.join(', ')}` },
      ]);
    }
  }

  /** A control-plane call, bounded in time; a non-mocra failure becomes ApiUnavailableError. */
  async #call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new ApiUnavailableError(`${what} did not answer within ${this.#callTimeoutMs} ms`)),
        this.#callTimeoutMs,
      );
    });
    try {
      return await Promise.race([fn(), timeout]);
    } catch (err) {
      if (isMocraError(err)) throw err;
      throw new ApiUnavailableError(`${what} failed: ${err instanceof Error ? err.message : String(err)}`, {
        cause: err,
      });
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  #sendError(req: FastifyRequest, reply: FastifyReply, err: unknown): void {
    const { status, body } = errorResponse(err, String(req.id));
    if (status >= 500)
      this.#logger?.error({ err, requestId: req.id, url: req.url }, 'control API request failed');
    if (body.error.retryAfterMs !== undefined)
      reply.header('retry-after', Math.max(1, Math.ceil(body.error.retryAfterMs / 1000)));
    void reply.code(status).type('application/json; charset=utf-8').send(body);
  }
}

function validate(schema: z.ZodType, value: unknown, where: 'query' | 'body'): unknown {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues: ApiValidationIssue[] = closestIssues(result.error.issues).map((issue) => {
    const path = [where, ...issue.path.map(String)].join('.');
    const keys = 'keys' in issue && Array.isArray(issue.keys) ? issue.keys : undefined;
    if (issue.code === 'unrecognized_keys' && keys !== undefined) {
      return { path, message: `unknown ${keys.length === 1 ? 'field' : 'fields'}: ${keys.join(', ')}` };
    }
    return { path, message: issue.message };
  });
  throw new ApiValidationError(issues);
}

/**
 * A body that fits none of a union's shapes (`/start_work` takes two) is told what is wrong
 * with the shape it is closest to — the one with the fewest issues — not "invalid input".
 */
function closestIssues(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [issue];
    const best = issue.errors.reduce((a, b) => (b.length < a.length ? b : a));
    return closestIssues(best).map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] }));
  });
}

function selectionOf(input: DlqSelection): DlqSelection {
  const out: DlqSelection = {};
  if (input.topic !== undefined) out.topic = input.topic;
  if (input.ids !== undefined) out.ids = input.ids;
  if (input.reasonIncludes !== undefined) out.reasonIncludes = input.reasonIncludes;
  if (input.since !== undefined) out.since = input.since;
  if (input.all !== undefined) out.all = input.all;
  return out;
}

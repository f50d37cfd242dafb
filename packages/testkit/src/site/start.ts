/**
 * `startFixtureSite()`: one fastify app served on one or more loopback addresses.
 *
 *   client ─▶ http.Server (127.0.0.1:p) ─┐
 *   client ─▶ http.Server (127.0.0.2:p) ─┼─▶ track (counters, log) ─▶ [latency] ─▶ fastify routing
 *   client ─▶ http.Server (127.0.0.3:p) ─┘
 *
 * Every listener shares the same handler, so all hosts serve the same content and one tracker
 * sees them all; each request is attributed to the host it arrived on.
 */

import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyServerFactoryHandler } from 'fastify';
import { registerCatalogRoutes } from '../catalog/routes.js';
import { CONTROL_PREFIX, registerControlRoutes } from '../control/routes.js';
import { registerCrawlRuleRoutes } from '../crawl-rules/routes.js';
import { registerDataSourceRoutes } from '../data-sources/routes.js';
import { FixtureListenError, FixtureOptionError, UnknownHostError } from '../errors.js';
import { registerStatusRoutes } from '../failures/status-routes.js';
import { registerTransportRoutes } from '../failures/transport-routes.js';
import { type GraphSpec, graphPath } from '../graph/graph.js';
import { registerGraphRoutes, serveGraphFast } from '../graph/routes.js';
import { registerInspectRoutes } from '../inspect/routes.js';
import { registerQuotesRoutes } from '../quotes/routes.js';
import { SessionAuthority } from '../quotes/sessions.js';
import { registerWebSocketRoutes } from '../realtime/websocket.js';
import type { HostStats } from '../stats/tracker.js';
import { RequestTracker } from '../stats/tracker.js';
import type { SiteContext } from './context.js';
import { registerHomeRoutes } from './home-routes.js';
import { notFound } from './http.js';
import {
  type FixtureSiteOptions,
  type ResolvedFixtureSiteOptions,
  type RobotsOption,
  resolveFixtureOptions,
  resolveRobots,
} from './options.js';
import { type FixtureSiteStats, resetSiteStats, siteStats } from './site-stats.js';

/** A running fixture site. Close it when done (`await site.close()`). */
export interface FixtureSite {
  /** Origin of host 0, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  /** Origin of every host, index = host index (`urls[0] === url`). */
  readonly urls: readonly string[];
  /** Port of host 0 (other hosts use the same port unless it was taken on their address). */
  readonly port: number;
  /** The options in force at start, with defaults filled in. */
  readonly options: ResolvedFixtureSiteOptions;
  /** Origin of host `index` (0-based). Throws `MOCRA_ERR_TESTKIT_UNKNOWN_HOST` when out of range. */
  hostUrl(index: number): string;
  /** Absolute URL of a link-graph page on host `host` (default: page 0 on host 0). */
  graphUrl(spec: GraphSpec, index?: number, host?: number): string;
  /** Counters and the request log. Pass `{ log: false }` to skip copying the log. */
  stats(options?: { log?: boolean }): FixtureSiteStats;
  /** Counters of host `index` (requests, inFlight, maxInFlight), keyed by its `host:port`. */
  hostStats(index: number): HostStats;
  /** Zeroes counters and the log, login counters and `/flaky` attempt counts. Sessions stay valid. */
  resetStats(): void;
  /** Ends every login session, or only `username`'s; protected pages then redirect to the login. */
  invalidateSessions(username?: string): void;
  /** Replaces what `/robots.txt` serves, on every host or only on host `hostIndex`. */
  setRobots(robots: RobotsOption, hostIndex?: number): void;
  /** Changes the latency added before every request (ms) and its random jitter. */
  setLatency(latencyMs: number, jitterMs?: number): void;
  /** Stops every listener and drops open connections (in-flight responses are cut). Idempotent. */
  close(): Promise<void>;
}

function listen(server: http.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen({ host, port }, () => {
      server.removeListener('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function checkLatency(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > 600_000) {
    throw new FixtureOptionError(name, `expected an integer 0 … 600000, got ${String(value)}`);
  }
}

/**
 * Starts the fixture site on 127.0.0.1 (and 127.0.0.2 … with `hosts`). Resolves once every host
 * listens. Throws `MOCRA_ERR_TESTKIT_INVALID_OPTION` for bad options and
 * `MOCRA_ERR_TESTKIT_LISTEN_FAILED` when an address cannot be bound.
 */
export async function startFixtureSite(options: FixtureSiteOptions = {}): Promise<FixtureSite> {
  const cfg = resolveFixtureOptions(options);
  const ctx: SiteContext = {
    cfg,
    sessions: new SessionAuthority(cfg.login.sessionTtlMs),
    tracker: new RequestTracker(cfg.requestLogSize, cfg.maxTrackedPaths),
    robotsOverrides: new Map(),
    flakyCounts: new Map(),
    upgraded: new WeakSet(),
  };
  let latency = cfg.latencyMs;
  let jitter = cfg.latencyJitterMs;
  let route: FastifyServerFactoryHandler | undefined;

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (req.url!.startsWith('/graph/') && serveGraphFast(cfg.seed, req, res)) return;
    route!(req, res);
  };
  const dispatch = (req: IncomingMessage, res: ServerResponse): void => {
    if (!(cfg.controlRoutes && req.url?.startsWith(CONTROL_PREFIX))) {
      ctx.tracker.begin(req, res);
      const delay = jitter > 0 ? latency + Math.floor(Math.random() * jitter) : latency;
      if (delay > 0) {
        setTimeout(handle, delay, req, res);
        return;
      }
    }
    handle(req, res);
  };
  const makeServer = (): http.Server => {
    const server = http.createServer({ noDelay: true, keepAliveTimeout: 72_000 }, dispatch);
    return server;
  };

  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    bodyLimit: 1 << 20,
    serverFactory: (handler) => {
      route = handler;
      return makeServer();
    },
  });
  const primary = app.server;
  // Upgraded sockets leave the HTTP server's connection tracking, so neither `server.close()`
  // nor fastify's `forceCloseConnections` ends them: an upgrade to a path with no WebSocket
  // route (answered 404 on a kept-alive socket) would otherwise hold `close()` forever.
  const upgradeSockets = new Set<Duplex>();
  primary.prependListener('upgrade', (req: IncomingMessage, socket: Duplex) => {
    upgradeSockets.add(socket);
    socket.once('close', () => upgradeSockets.delete(socket));
    if (!(cfg.controlRoutes && req.url?.startsWith(CONTROL_PREFIX))) {
      ctx.tracker.beginUpgrade(req, socket, () => ctx.upgraded.has(req));
    }
  });

  registerHomeRoutes(app, ctx);
  registerCatalogRoutes(app, ctx);
  registerQuotesRoutes(app, ctx);
  registerGraphRoutes(app, ctx);
  registerCrawlRuleRoutes(app, ctx);
  registerStatusRoutes(app, ctx);
  registerTransportRoutes(app, ctx);
  registerInspectRoutes(app, ctx);
  registerDataSourceRoutes(app, ctx);
  registerWebSocketRoutes(app, ctx);
  if (cfg.controlRoutes) registerControlRoutes(app, ctx);
  app.setNotFoundHandler((_req, reply) => notFound(reply));

  const extras: http.Server[] = [];
  const closeAll = async (): Promise<void> => {
    for (const socket of upgradeSockets) socket.destroy();
    await Promise.all(extras.map(closeServer));
    await app.close();
  };

  let port: number;
  try {
    await app.listen({ host: '127.0.0.1', port: cfg.port });
    port = (primary.address() as AddressInfo).port;
  } catch (err) {
    await app.close().catch(() => undefined);
    throw new FixtureListenError('127.0.0.1', cfg.port, err);
  }
  const urls = [`http://127.0.0.1:${port}`];
  for (let i = 1; i < cfg.hosts; i++) {
    const address = `127.0.0.${i + 1}`;
    const server = makeServer();
    // Upgrades reach the WebSocket plugin through the primary server's 'upgrade' listeners.
    server.on('upgrade', (req, socket, head) => primary.emit('upgrade', req, socket, head));
    extras.push(server);
    try {
      let hostPort: number;
      try {
        hostPort = await listen(server, address, port);
      } catch (err) {
        // With an ephemeral port, another address may already use this number: take any port.
        if (cfg.port !== 0 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        hostPort = await listen(server, address, 0);
      }
      urls.push(`http://${address}:${hostPort}`);
    } catch (err) {
      await closeAll().catch(() => undefined);
      throw new FixtureListenError(address, port, err);
    }
  }

  let closing: Promise<void> | undefined;
  const hostUrl = (index: number): string => {
    const u = Number.isInteger(index) ? urls[index] : undefined;
    if (u === undefined) throw new UnknownHostError(index, urls.length);
    return u;
  };

  return {
    url: urls[0]!,
    urls,
    port,
    options: cfg,
    hostUrl,
    graphUrl: (spec, index = 0, host = 0) => `${hostUrl(host)}${graphPath(spec, index)}`,
    stats: (o = {}) => siteStats(ctx, o.log !== false),
    hostStats: (index) => ctx.tracker.hostStats(new URL(hostUrl(index)).host),
    resetStats: () => resetSiteStats(ctx),
    invalidateSessions: (username) => ctx.sessions.invalidate(username),
    setRobots: (robots, hostIndex) => {
      const resolved = resolveRobots(robots);
      if (hostIndex === undefined) {
        for (let i = 0; i < urls.length; i++) ctx.robotsOverrides.set(i, resolved);
      } else {
        hostUrl(hostIndex);
        ctx.robotsOverrides.set(hostIndex, resolved);
      }
    },
    setLatency: (latencyMs, jitterMs = 0) => {
      checkLatency('latencyMs', latencyMs);
      checkLatency('latencyJitterMs', jitterMs);
      latency = latencyMs;
      jitter = jitterMs;
    },
    close: () => {
      closing ??= closeAll();
      return closing;
    },
  };
}

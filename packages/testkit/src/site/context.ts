/** What every route family receives: the resolved options and the site's small mutable state. */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { SessionAuthority } from '../quotes/sessions.js';
import type { RequestTracker } from '../stats/tracker.js';
import type { ResolvedFixtureSiteOptions, ResolvedRobots } from './options.js';

export interface SiteContext {
  readonly cfg: ResolvedFixtureSiteOptions;
  readonly sessions: SessionAuthority;
  readonly tracker: RequestTracker;
  /** robots.txt per host index; a missing entry means `cfg.robots`. */
  readonly robotsOverrides: Map<number, ResolvedRobots>;
  /** Requests seen per `/flaky/<key>/…` key (bounded, see failures/routes.ts). */
  readonly flakyCounts: Map<string, number>;
  /** Upgrade requests whose WebSocket handshake completed (for the request log's status 101). */
  readonly upgraded: WeakSet<IncomingMessage>;
}

export type RouteRegistrar = (app: FastifyInstance, ctx: SiteContext) => void;

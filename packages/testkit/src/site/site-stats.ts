/** The combined counters `site.stats()` returns, and the reset behind `site.resetStats()`. */
import type { AuthCounters } from '../quotes/sessions.js';
import type { FixtureStats } from '../stats/tracker.js';
import type { SiteContext } from './context.js';

export interface FixtureSiteStats extends FixtureStats {
  /** Login outcomes of the quotes site. */
  auth: AuthCounters;
}

export function siteStats(ctx: SiteContext, includeLog = true): FixtureSiteStats {
  return { ...ctx.tracker.snapshot(includeLog), auth: { ...ctx.sessions.counters } };
}

/** Zeroes request counters, the log, login counters and the `/flaky` attempt counts. Sessions stay valid. */
export function resetSiteStats(ctx: SiteContext): void {
  ctx.tracker.reset();
  ctx.sessions.resetCounters();
  ctx.flakyCounts.clear();
}

/**
 * `cx.enqueueLinks(options)`: the links of the page being parsed, filtered (scope, include,
 * exclude, nofollow, depth), transformed, and followed — in one streaming pass over the HTML.
 * The requests it makes are ordinary follow-ups (`cx.follows`): they go through the frontier
 * (dedup, maxDepth, maxPages) like any other, with the page's depth + 1.
 *
 * Responses that are not HTML (a Content-Type that names neither html nor xml) have no links
 * to enqueue.
 */
import { applyRequestInit, PARSED_URL, Request } from '../../model/request.js';
import type { Response } from '../../model/response.js';
import { checkedUrlOf, type LinkPlan, linkPlannerFor, type PlanLinksOptions } from './plan-links.js';

export interface EnqueueLinksOptions extends PlanLinksOptions {
  /** Module whose node parses the responses. @default the current module */
  module?: string;
}

export interface EnqueueLinksResult {
  /** Requests followed. */
  enqueued: number;
  /** http(s) links found on the page, before filtering. */
  found: number;
  /** The page's `<title>`. */
  title: string | undefined;
  /** Links not followed, by reason. */
  dropped: LinkPlan['dropped'];
}

/** The part of the parse context enqueueLinks writes to. */
export interface LinkSink {
  readonly response: Response;
  readonly follows: { request: Request; module: string | undefined; node: string | undefined }[];
}

const NO_LINKS: LinkPlan['dropped'] = Object.freeze({
  nofollow: 0,
  filtered: 0,
  depth: 0,
  transform: 0,
  limit: 0,
});

/** Whether a response can hold HTML links (no Content-Type counts as yes). */
export function isLinkBearing(response: Response): boolean {
  const type = response.contentType;
  return type === undefined || type.includes('html') || type.includes('xml');
}

export function enqueueLinks(cx: LinkSink, options?: EnqueueLinksOptions): EnqueueLinksResult {
  const response = cx.response;
  if (!isLinkBearing(response)) return { enqueued: 0, found: 0, title: undefined, dropped: { ...NO_LINKS } };
  const plan = linkPlannerFor(options).plan({
    url: response.url,
    requestedUrl: response.request.url,
    html: response.text(),
    depth: response.request.depth,
  });
  for (const target of plan.targets) {
    const request = new Request(target.url);
    applyRequestInit(request, target.request);
    if (target.label !== undefined) request.meta.label = target.label;
    request.depth = target.depth;
    // The planner resolved the URL already; admission reuses it while `url` is unchanged.
    request[PARSED_URL] = checkedUrlOf(target);
    cx.follows.push({ request, module: options?.module, node: target.node });
  }
  return { enqueued: plan.targets.length, found: plan.found, title: plan.title, dropped: plan.dropped };
}

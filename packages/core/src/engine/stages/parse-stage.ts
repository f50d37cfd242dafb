/** response ▶ node.parse ▶ items ▶ sink (before the ack); follow-ups ▶ admission | follow-up topic */
import { isMocraError, ParseFailedError, SinkFailedError } from '../../errors.js';
import { fingerprintRequest } from '../../frontier/fingerprint.js';
import { type ErrorEvent, type FollowUpTask, TOPICS } from '../../model/events.js';
import type { ItemMeta } from '../../model/item.js';
import { Request } from '../../model/request.js';
import { Response } from '../../model/response.js';
import { ParseContext } from '../../module/parse-context.js';
import type { RegisteredModule } from '../../module/registry.js';
import type { JoinReady } from '../../module/run-ledger.js';
import {
  DEFAULT_ACCOUNT,
  DEFAULT_PLATFORM,
  type ModuleScope,
  type RouteResult,
} from '../../module/runtime.js';
import type { ModuleNode } from '../../module/types.js';
import { channels } from '../../observability/channels.js';
import type { Delivery } from '../../queue/types.js';
import { splitFollowUps } from '../inline-follow-ups.js';
import type { HandlerResult } from '../stage-runner.js';
import {
  admitAndPublish,
  claimRequest,
  dropIfStopped,
  publishJoins,
  stoppedJoins,
  type WorkOrigin,
} from './common-steps.js';
import { admissionClaimOf, errorEvent, keyOf, type StageEnv, workOf } from './stage-env.js';
import { composeSteps, type Step, type StepOutcome } from './steps.js';

interface ParseWork {
  delivery: Delivery<Response>;
  response: Response;
  request: Request;
  signal: AbortSignal;
  registered: RegisteredModule;
  node: ModuleNode;
  runId: string;
  scope: ModuleScope;
  ctx: ParseContext<unknown>;
}

export function parseStage(env: StageEnv) {
  const steps: Step<ParseWork>[] = [
    function admitByPolicy({ request }) {
      const refused = env.policy.admit?.('parse', workOf(request));
      if (refused !== undefined && 'error' in refused) throw refused.error;
      return undefined;
    },
    function resolveNode(w) {
      w.registered = env.registry.get(w.request.module);
      w.node = env.registry.node(w.registered, w.request.node);
      w.runId = w.request.runId ?? env.runId;
      return undefined;
    },
    dropIfStopped(
      env,
      ({ runId }) => runId,
      ({ registered }) => registered.module.name,
      ({ request, registered, node, runId, response }) => ({
        runId,
        module: registered.module.name,
        node: node.id,
        stage: 'parse',
        url: response.url,
        origin: request,
      }),
    ),
    function resolveScope(w) {
      const { request, registered } = w;
      const scope = env.modules.scope(
        registered,
        request.account ?? DEFAULT_ACCOUNT,
        request.platform ?? DEFAULT_PLATFORM,
        w.signal,
        { login: false },
      );
      if (scope instanceof Promise) {
        return scope.then((s) => {
          w.scope = s;
          return undefined;
        });
      }
      w.scope = scope;
      return undefined;
    },
    // A parse that returns no promise is followed by the next steps in the same turn, so the
    // links it found reach the queue before other pages' work runs (see Frontier.admit).
    function parse(w) {
      const { registered, node, response, scope } = w;
      w.ctx = new ParseContext<unknown>({
        response,
        module: registered.module.name,
        node: node.id,
        runId: w.runId,
        log: env.log,
        signal: w.signal,
        account: scope.account,
        platform: scope.platform,
        config: scope.config,
        settings: scope.settings,
        login: scope.login,
      });
      const failed = (err: unknown): never => {
        if (isMocraError(err)) throw err;
        throw new ParseFailedError({ module: registered.module.name, node: node.id, url: response.url }, err);
      };
      let parsed: unknown;
      try {
        parsed = node.parse(response, w.ctx);
      } catch (err) {
        failed(err);
      }
      if (isThenable(parsed)) return Promise.resolve(parsed).then(() => undefined, failed);
      return undefined;
    },
  ];
  const journal = env.journal;
  if (journal !== undefined) {
    // Before any item is written: from now on a redelivered request must not fetch the page again.
    steps.push(async function markParsed({ request }) {
      await journal.markParsed(request);
      return undefined;
    });
  }
  steps.push(
    function writeItems(w) {
      return w.ctx.items.length > 0 ? writeItemsOf(env, w) : undefined;
    },
    // Follows, hand-offs to successors (fan-out), other modules' runs, the advance gate, the stop
    // signal: decided in one place (module/runtime.ts `route`).
    function routeFollowUps(w) {
      const routed = env.modules.route(w.ctx, w.registered, w.request);
      return routed instanceof Promise
        ? routed.then((r) => followRouted(env, w, r))
        : followRouted(env, w, routed);
    },
  );
  return composeSteps<Response, ParseWork>((delivery, signal) => {
    const response = Response.from(delivery.payload);
    return { delivery, response, request: response.request, signal } as ParseWork;
  }, steps);
}

/** What `route` made of a parse: rejects reported, hand-offs queued, carried follow-ups admitted. */
function followRouted(env: StageEnv, w: ParseWork, routed: RouteResult): Promise<StepOutcome> {
  const { ctx, registered, request, delivery, runId } = w;
  const rejected = ctx.rejected.map(({ request: r, error }) =>
    errorEvent(
      'parse',
      TOPICS.request,
      r ?? { url: (error as unknown as { url?: string }).url },
      error,
      1,
      0,
      undefined,
    ),
  );
  for (const { payload, error } of routed.rejected) {
    rejected.push(errorEvent('parse', TOPICS.request, payload, error, 1, 0, undefined));
  }
  // Follow-ups that carry their requests (cx.follow, cx.enqueueLinks) are admitted right here:
  // the hop through the follow-up topic would only add a queue round trip per page. Hand-offs
  // that run a node's generate still go through it. (engine/inline-follow-ups.ts)
  const { carried, queued } = splitFollowUps(routed.followUps);
  for (const followUp of queued) env.credits?.stamp(delivery, followUp);
  const done = { rejected, request, runId, module: registered.module.name, node: w.node.id };
  // Hand-offs that run a node's generate go through the follow-up topic first (rare: most
  // pages only follow links, which go straight on).
  if (queued.length > 0) {
    return env.topics.followUp
      .publish(queued.map((payload) => ({ payload, priority: delivery.priority, ...keyOf(payload.account) })))
      .then(() => {
        env.modules.onFollowUpsPublished(queued);
        return admitAndFinish(env, carried, delivery, done);
      });
  }
  return admitAndFinish(env, carried, delivery, done);
}

function admitAndFinish(
  env: StageEnv,
  carried: readonly FollowUpTask[],
  delivery: Delivery<Response>,
  done: Parameters<typeof parseDone>[1],
): Promise<StepOutcome> {
  if (carried.length === 0) return parseDone(env, done).then(ended);
  // The frames that called this hold the parse context and every follow-up request, which must
  // not stay on the heap while the admitted requests are written (see publishAdmitted).
  return admitCarried(env, carried, delivery)
    .then((putBack) => (putBack === undefined ? parseDone(env, done) : putBack))
    .then(ended);
}

function ended(result: HandlerResult) {
  return { ended: result };
}

/**
 * The page's items through the data and store middleware to the sink. Without middleware and
 * with a sink that returns no promise, nothing here waits (and nothing is awaited).
 */
function writeItemsOf(env: StageEnv, w: ParseWork): Promise<undefined> | undefined {
  const { ctx, request, registered, node, runId, response, scope } = w;
  const moduleName = registered.module.name;
  const fingerprint = request.fingerprint ?? fingerprintRequest(request);
  const sink = registered.sink;
  // Ids are fixed before middleware runs, so a dropped item never shifts the others' ids.
  const emitted = ctx.items.map((item, i) => ({
    item,
    meta: {
      itemId: `${fingerprint}:${i}`,
      index: i,
      url: response.url,
      module: moduleName,
      node: node.id,
      runId,
    } satisfies ItemMeta,
  }));
  const mctx = env.modules.middlewareContext(registered, node.id, runId, scope, w.signal);
  // Data middleware (transform, drop), then store middleware (beforeStore → store → afterStore).
  const processed = env.modules.processItems(emitted, registered, scope, request, mctx);
  const write = (
    items: readonly { item: unknown; meta: ItemMeta }[],
    from: number,
  ): Promise<undefined> | undefined => {
    for (let i = from; i < items.length; i++) {
      const { item, meta } = items[i]!;
      const failed = (err: unknown): never => {
        throw new SinkFailedError({ module: moduleName, itemId: meta.itemId }, err);
      };
      let written: unknown;
      try {
        written = sink.write(item, meta);
      } catch (err) {
        failed(err);
      }
      if (isThenable(written)) {
        return Promise.resolve(written).then(() => {
          if (channels.item.hasSubscribers) channels.item.publish({ item, meta });
          return write(items, i + 1);
        }, failed);
      }
      if (channels.item.hasSubscribers) channels.item.publish({ item, meta });
    }
    env.counters.items += items.length;
    env.db?.counted(runId, moduleName, 'items', items.length);
    return undefined;
  };
  return processed instanceof Promise ? processed.then((items) => write(items, 0)) : write(processed, 0);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}

/** The end of a parse whose follow-ups are admitted: its rejects reported, its unit done. */
async function parseDone(
  env: StageEnv,
  done: { rejected: ErrorEvent[]; request: Request; runId: string; module: string; node: string },
): Promise<HandlerResult> {
  if (done.rejected.length > 0) await env.topics.error.publish(done.rejected.map((payload) => ({ payload })));
  env.policy.succeeded?.('parse', workOf(done.request));
  await publishJoins(env, env.modules.onUnitDone(done.runId, done.module, done.node), done.request);
  return undefined;
}

/**
 * What the follow-up stage does for follow-ups that carry requests, done inline by the parse
 * that made them: the same stop check, claim, admission (one batch, claimed under the parsed
 * response's message id) and unit bookkeeping, in the same order.
 */
function admitCarried(
  env: StageEnv,
  followUps: readonly FollowUpTask[],
  delivery: Delivery<Response>,
): Promise<HandlerResult> {
  env.modules.onFollowUpsPublished(followUps);
  // The stop checks first: answered here (the usual case), the links are admitted and written
  // to the queue in this same turn (see Frontier.admit).
  let waits = false;
  const stopped = followUps.map((followUp) => {
    const joins = stoppedJoins(env, {
      runId: followUp.runId,
      module: env.registry.get(followUp.module).module.name,
      node: followUp.node,
      stage: 'followUp',
    });
    if (joins instanceof Promise) waits = true;
    return joins;
  });
  if (waits) return Promise.all(stopped).then((joins) => admitUnstopped(env, followUps, joins, delivery));
  return admitUnstopped(env, followUps, stopped as (JoinReady[] | undefined)[], delivery);
}

function admitUnstopped(
  env: StageEnv,
  followUps: readonly FollowUpTask[],
  stopped: readonly (JoinReady[] | undefined)[],
  delivery: Delivery<Response>,
): Promise<HandlerResult> {
  const requests: Request[] = [];
  const admitted: (WorkOrigin & { runId: string; module: string; node: string })[] = [];
  const dropped: Promise<void>[] = [];
  for (let i = 0; i < followUps.length; i++) {
    const followUp = followUps[i]!;
    const joins = stopped[i];
    if (joins !== undefined) {
      dropped.push(publishJoins(env, joins, followUp));
      continue;
    }
    const registered = env.registry.get(followUp.module);
    const node = env.registry.node(registered, followUp.node);
    for (const payload of followUp.requests) {
      const r = Request.from(payload);
      claimRequest(r, registered, node, followUp.runId, followUp, followUp.depth, { env, delivery });
      requests.push(r);
    }
    // Only what the unit bookkeeping needs: the follow-up itself holds its requests.
    const { runId, module, account, platform } = followUp;
    admitted.push({ runId, module, node: followUp.node, account, platform });
  }
  // Returned, not awaited: this frame holds the requests (see publishAdmitted).
  const published = admitAndPublish(env, requests, 'parse', admissionClaimOf(delivery));
  return Promise.resolve(published).then(async (result) => {
    await Promise.all(dropped);
    if (result !== undefined) return result; // put back: the parse runs again (same item ids)
    for (const unit of admitted) {
      await publishJoins(env, env.modules.onUnitDone(unit.runId, unit.module, unit.node), unit);
    }
    return undefined;
  });
}

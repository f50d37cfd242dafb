/** response ▶ node.parse ▶ items ▶ sink (before the ack); follow-ups ▶ admission | follow-up topic */
import { isMocraError, ParseFailedError, SinkFailedError } from '../../errors.js';
import { fingerprintRequest } from '../../frontier/fingerprint.js';
import { type ErrorEvent, type FollowUpTask, TOPICS } from '../../model/events.js';
import type { ItemMeta } from '../../model/item.js';
import { Request } from '../../model/request.js';
import { Response } from '../../model/response.js';
import { ParseContext } from '../../module/parse-context.js';
import type { RegisteredModule } from '../../module/registry.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM, type ModuleScope } from '../../module/runtime.js';
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
import { composeSteps, type Step } from './steps.js';

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
    async function parse(w) {
      const { request, registered, node, response } = w;
      w.scope = await env.modules.scope(
        registered,
        request.account ?? DEFAULT_ACCOUNT,
        request.platform ?? DEFAULT_PLATFORM,
        w.signal,
        { login: false },
      );
      const { scope } = w;
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
      try {
        await node.parse(response, w.ctx);
      } catch (err) {
        if (isMocraError(err)) throw err;
        throw new ParseFailedError({ module: registered.module.name, node: node.id, url: response.url }, err);
      }
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
    async function writeItems(w) {
      if (w.ctx.items.length > 0) await writeItemsOf(env, w);
      return undefined;
    },
    // Follows, hand-offs to successors (fan-out), other modules' runs, the advance gate, the stop
    // signal: decided in one place (module/runtime.ts `route`).
    async function routeFollowUps(w) {
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
      const routed = await env.modules.route(ctx, registered, request);
      for (const { payload, error } of routed.rejected) {
        rejected.push(errorEvent('parse', TOPICS.request, payload, error, 1, 0, undefined));
      }
      // Follow-ups that carry their requests (cx.follow, cx.enqueueLinks) are admitted right here:
      // the hop through the follow-up topic would only add a queue round trip per page. Hand-offs
      // that run a node's generate still go through it. (engine/inline-follow-ups.ts)
      const { carried, queued } = splitFollowUps(routed.followUps);
      for (const followUp of queued) env.credits?.stamp(delivery, followUp);
      if (queued.length > 0) {
        await env.topics.followUp.publish(
          queued.map((payload) => ({ payload, priority: delivery.priority, ...keyOf(payload.account) })),
        );
        env.modules.onFollowUpsPublished(queued);
      }
      const done = { rejected, request, runId, module: registered.module.name, node: w.node.id };
      if (carried.length === 0) return parseDone(env, done).then(ended);
      // Not awaited here: this frame holds the parse context and every follow-up request, which
      // must not stay on the heap while the admitted requests are written (see publishAdmitted).
      return admitCarried(env, carried, delivery)
        .then((putBack) => (putBack === undefined ? parseDone(env, done) : putBack))
        .then(ended);
    },
  );
  return composeSteps<Response, ParseWork>((delivery, signal) => {
    const response = Response.from(delivery.payload);
    return { delivery, response, request: response.request, signal } as ParseWork;
  }, steps);
}

function ended(result: HandlerResult) {
  return { ended: result };
}

async function writeItemsOf(env: StageEnv, w: ParseWork): Promise<void> {
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
  const items = await env.modules.processItems(emitted, registered, scope, request, mctx);
  for (const { item, meta } of items) {
    try {
      const written = sink.write(item, meta);
      if (written !== undefined && typeof (written as Promise<void>).then === 'function') await written;
    } catch (err) {
      throw new SinkFailedError({ module: moduleName, itemId: meta.itemId }, err);
    }
    if (channels.item.hasSubscribers) channels.item.publish({ item, meta });
  }
  env.counters.items += items.length;
  env.db?.counted(runId, moduleName, 'items', items.length);
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
async function admitCarried(
  env: StageEnv,
  followUps: readonly FollowUpTask[],
  delivery: Delivery<Response>,
): Promise<HandlerResult> {
  env.modules.onFollowUpsPublished(followUps);
  const requests: Request[] = [];
  const admitted: (WorkOrigin & { runId: string; module: string; node: string })[] = [];
  for (const followUp of followUps) {
    const registered = env.registry.get(followUp.module);
    const node = env.registry.node(registered, followUp.node);
    const joins = await stoppedJoins(env, {
      runId: followUp.runId,
      module: registered.module.name,
      node: node.id,
      stage: 'followUp',
    });
    if (joins !== undefined) {
      await publishJoins(env, joins, followUp);
      continue;
    }
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
  return admitAndPublish(env, requests, 'parse', admissionClaimOf(delivery)).then(async (result) => {
    if (result !== undefined) return result; // put back: the parse runs again (same item ids)
    for (const unit of admitted) {
      await publishJoins(env, env.modules.onUnitDone(unit.runId, unit.module, unit.node), unit);
    }
    return undefined;
  });
}

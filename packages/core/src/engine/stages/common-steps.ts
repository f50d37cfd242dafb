/**
 * Steps more than one stage takes: the stop check, running a node's generate, claiming and
 * admitting requests, and handing on joins that became ready.
 */
import { GenerateFailedError, InvalidArgumentError, isMocraError } from '../../errors.js';
import type { AdmissionResult } from '../../frontier/frontier.js';
import { type FollowUpTask, type StageName, type TaskEvent, TOPICS } from '../../model/events.js';
import { Request, type RequestData } from '../../model/request.js';
import type { RegisteredModule } from '../../module/registry.js';
import type { JoinReady } from '../../module/run-ledger.js';
import type { ModuleDropMessage, ModuleScope } from '../../module/runtime.js';
import type { GenerateContext, GenerateOutput, ModuleNode } from '../../module/types.js';
import type { PublishMessage } from '../../queue/types.js';
import type { HandlerResult } from '../stage-runner.js';
import { type AdmissionClaim, errorEvent, keyOf, type StageEnv } from './stage-env.js';
import { DONE, type Step, type StepOutcome } from './steps.js';

/** Whose session and partition a piece of work belongs to (joins it makes inherit them). */
export interface WorkOrigin {
  account?: string | undefined;
  platform?: string | undefined;
}

/** A unit of work the stop check looks at. */
export interface StopCheckUnit extends Omit<ModuleDropMessage, 'reason'> {
  origin: WorkOrigin;
}

/**
 * The joins made ready by dropping this unit because its run was stopped (the ledger counts it
 * done), or undefined when the run goes on.
 */
export function stoppedJoins(
  env: StageEnv,
  unit: Omit<ModuleDropMessage, 'reason'>,
): JoinReady[] | undefined | Promise<JoinReady[] | undefined> {
  const reason = env.modules.stoppedReason(unit.runId, unit.module);
  if (reason === undefined) return undefined;
  if (reason instanceof Promise) {
    return reason.then((r) =>
      r === undefined ? undefined : env.modules.dropStopped({ ...unit, reason: r }),
    );
  }
  return env.modules.dropStopped({ ...unit, reason });
}

/**
 * The stop check as a step: work of a stopped run is dropped (acked), its joins handed on. It
 * runs twice per page, and a run is rarely stopped: the unit it reports is only made then, and
 * a check answered here (see RunLedger.stoppedReason) costs no await.
 */
export function dropIfStopped<TWork>(
  env: StageEnv,
  runOf: (work: TWork) => string,
  moduleOf: (work: TWork) => string,
  unitOf: (work: TWork) => StopCheckUnit,
): Step<TWork> {
  const drop = (work: TWork, reason: string | undefined): undefined | Promise<StepOutcome> => {
    if (reason === undefined) return undefined;
    const { origin, ...unit } = unitOf(work);
    const joins = env.modules.dropStopped({ ...unit, reason });
    return publishJoins(env, joins, origin).then(() => DONE);
  };
  return function dropIfStopped(work) {
    const reason = env.modules.stoppedReason(runOf(work), moduleOf(work));
    return reason instanceof Promise ? reason.then((r) => drop(work, r)) : drop(work, reason);
  };
}

/** Join nodes whose predecessors all finished: one hand-off each (module/run-ledger.ts). */
export function publishJoins(
  env: StageEnv,
  ready: readonly JoinReady[],
  origin: WorkOrigin,
  credits?: readonly string[],
): Promise<void> {
  // Every page ends here, and almost every time nothing became ready.
  if (ready.length === 0) return NOTHING_PUBLISHED;
  return publishReadyJoins(env, ready, origin, credits);
}

const NOTHING_PUBLISHED: Promise<void> = Promise.resolve();

async function publishReadyJoins(
  env: StageEnv,
  ready: readonly JoinReady[],
  origin: WorkOrigin,
  credits?: readonly string[],
): Promise<void> {
  // With shared coordination the ledger sees one process's share: join credit decides instead.
  const joins = credits === undefined ? ready.filter((j) => env.credits?.tracks(j.module) !== true) : ready;
  if (joins.length === 0) return;
  const tasks = env.modules.joinTasks(joins, {
    account: origin.account,
    platform: origin.platform,
    depth: 0,
  });
  if (credits !== undefined) {
    for (const [i, task] of tasks.entries()) {
      const credit = credits[i];
      if (credit !== undefined) task.credit = credit;
    }
  }
  await env.topics.followUp.publish(tasks.map((payload) => ({ payload, ...keyOf(payload.account) })));
  env.modules.onFollowUpsPublished(tasks);
}

export function generateContext(
  env: StageEnv,
  registered: RegisteredModule,
  node: ModuleNode,
  runId: string,
  signal: AbortSignal,
  scope: ModuleScope,
  source: { task?: TaskEvent; followUp?: FollowUpTask },
): GenerateContext {
  return {
    module: registered.module.name,
    node: node.id,
    runId,
    trigger: source.task ? 'task' : (source.followUp?.trigger ?? 'follow-up'),
    task: source.task,
    followUp: source.followUp,
    params: source.task?.params ?? source.followUp?.meta ?? {},
    account: scope.account,
    platform: scope.platform,
    config: scope.config,
    settings: scope.settings,
    login: scope.login,
    signal,
    log: env.log,
  };
}

export async function runGenerate(
  registered: RegisteredModule,
  node: ModuleNode,
  ctx: GenerateContext,
): Promise<Request[]> {
  if (!node.generate) return [];
  try {
    return await collectRequests(await node.generate(ctx));
  } catch (err) {
    if (isMocraError(err)) throw err;
    throw new GenerateFailedError({ module: registered.module.name, node: node.id }, err);
  }
}

/** The engine owns these fields: which node parses the response, in which run. */
export function claimRequest(
  request: Request,
  registered: RegisteredModule,
  node: ModuleNode,
  runId: string,
  origin: WorkOrigin,
  minDepth: number,
  credit?: { env: StageEnv; delivery: object },
): void {
  request.module = registered.module.name;
  request.node = node.id;
  request.runId = runId;
  if (origin.account !== undefined && request.account === undefined) request.account = origin.account;
  if (origin.platform !== undefined) request.platform ??= origin.platform;
  if (request.depth < minDepth) request.depth = minDepth;
  // The request's share of the join credit of the unit that made it (distributed/join-credits.ts).
  credit?.env.credits?.stamp(credit.delivery, request);
}

/**
 * `admission.claim` names the work being handled (admissionClaimOf): a shared deduplicator
 * re-admits what it marked if that work is delivered again (its handler died between marking
 * and publishing). For the same reason a failed publish of the admitted requests puts this
 * same message back (nack), instead of a retry that would be a new message with another id —
 * and so does a failed mark: a broker that went away may have done the mark and lost only its
 * reply, and a retry under another claim would then find every new link already seen.
 */
export function admitAndPublish(
  env: StageEnv,
  requests: Request[],
  stage: StageName,
  admission: AdmissionClaim,
): HandlerResult | Promise<HandlerResult> {
  if (requests.length === 0) return undefined;
  let result: AdmissionResult | Promise<AdmissionResult>;
  try {
    result = env.frontier.admit(requests, admission);
  } catch (err) {
    return putBack(env, err, stage, 'admitting requests');
  }
  // Answered at once (an in-memory dedup set): published in the same turn (see Frontier.admit).
  if (!(result instanceof Promise)) return publishFound(env, requests, result, stage, admission);
  return result.then(
    (found) => publishFound(env, requests, found, stage, admission),
    (err: unknown) => putBack(env, err, stage, 'admitting requests'),
  );
}

function publishFound(
  env: StageEnv,
  requests: readonly Request[],
  result: AdmissionResult,
  stage: StageName,
  admission: AdmissionClaim,
): Promise<HandlerResult> {
  if (env.credits !== undefined && result.admitted.length + result.invalid.length < requests.length) {
    const kept = new Set<Request>([...result.admitted, ...result.invalid.map((i) => i.request)]);
    env.credits.dropped(requests.filter((r) => !kept.has(r))); // already seen: done now
  }
  // Returned, not awaited (see publishAdmitted).
  return publishAdmitted(env, result.admitted, result.invalid, stage, admission.claim);
}

/** A retryable failure of admission or its publish: the message being handled goes back as is. */
function putBack(env: StageEnv, err: unknown, stage: StageName, what: string): HandlerResult {
  if (!(isMocraError(err) && err.retryable)) throw err;
  env.log.warn({ err, stage }, `${what} failed; the message is put back`);
  return { nack: { delayMs: 1_000, reason: err.message } };
}

/**
 * Publish what admission let through and report what it found invalid. Not `async` on
 * purpose: a suspended async function keeps every local and argument alive, and this waits
 * for the queue's write (a frontier spilling to disk) — the admitted requests, a page's
 * thousand links, would be kept on the heap (and promoted) until then. The callbacks below
 * hold only counts and the invalid requests.
 */
function publishAdmitted(
  env: StageEnv,
  admitted: readonly Request[],
  invalid: AdmissionResult['invalid'],
  stage: StageName,
  claim: string,
): Promise<HandlerResult> {
  let published: Promise<HandlerResult> = Promise.resolve(undefined);
  if (admitted.length > 0) {
    const messages: PublishMessage<Request>[] = new Array(admitted.length);
    for (let i = 0; i < admitted.length; i++) {
      const r = admitted[i]!;
      messages[i] =
        r.account === undefined
          ? { payload: r, priority: r.priority }
          : { payload: r, priority: r.priority, key: r.account };
    }
    const units = env.modules.unitsOf(admitted);
    // Join credit: a redelivery of this message must admit the same requests again (its
    // dropped ones return their credit), so the claim of a join module's unit only expires.
    const keepClaim = env.credits !== undefined && admitted.some((r) => env.credits!.tracks(r.module));
    published = env.topics.request.publish(messages).then(
      () => {
        if (!keepClaim) env.frontier.releaseClaim(claim);
        env.modules.onAdmitted(units);
        return undefined;
      },
      (err: unknown): HandlerResult => putBack(env, err, stage, 'publishing admitted requests'),
    );
  }
  if (invalid.length === 0) return published;
  return published.then(async (putBack) => {
    if (putBack !== undefined) return putBack;
    await env.topics.error.publish(
      invalid.map(({ request, error }) => ({
        payload: errorEvent(stage, TOPICS.request, request, error, 1, request.priority, request.account),
      })),
    );
    return undefined;
  });
}

/** Accepts what a generate may reasonably return: Requests, URL strings or request data. */
async function collectRequests(output: GenerateOutput): Promise<Request[]> {
  if (output === undefined || output === null) return [];
  const out: Request[] = [];
  if (Symbol.asyncIterator in (output as object)) {
    for await (const r of output as AsyncIterable<unknown>) out.push(toRequest(r));
  } else {
    for (const r of output as Iterable<unknown>) out.push(toRequest(r));
  }
  return out;
}

function toRequest(value: unknown): Request {
  if (value instanceof Request) return value;
  if (typeof value === 'string') return new Request(value);
  if (value !== null && typeof value === 'object' && typeof (value as { url?: unknown }).url === 'string') {
    return Request.from(value as RequestData);
  }
  throw new InvalidArgumentError(`generate produced something that is not a request: ${String(value)}`);
}

/** request ▶ gate ▶ downloader ▶ response (parsed here when the parse stage has room) */
import type { ModuleDownloadSettings } from '../../downloader/download-router.js';
import type { Downloader } from '../../downloader/types.js';
import { ConnectionError, HttpStatusError, isMocraError } from '../../errors.js';
import { ATTEMPT_HEADER } from '../../model/events.js';
import { Request, type RequestData } from '../../model/request.js';
import type { Response } from '../../model/response.js';
import type { RegisteredModule } from '../../module/registry.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM, type ModuleScope } from '../../module/runtime.js';
import { channels } from '../../observability/channels.js';
import { parseRetryAfterMs } from '../../policy/backoff.js';
import type { WorkScope } from '../../policy/types.js';
import type { Delivery } from '../../queue/types.js';
import { REPLAYED_HEADER } from '../dead-letters.js';
import { LocalDelivery } from '../local-delivery.js';
import { pageKeyOf } from '../persistence.js';
import type { HandlerResult } from '../stage-runner.js';
import { dropIfStopped, publishJoins } from './common-steps.js';
import { attemptsOf, keyOf, parseClaimHeaders, type StageEnv, workOf } from './stage-env.js';
import { composeSteps, DONE, end, type Step, type StepOutcome } from './steps.js';

interface DownloadWork {
  delivery: Delivery<Request | RequestData>;
  request: Request;
  signal: AbortSignal;
  registered: RegisteredModule;
  /** The module's config for the request's account × platform (set once the gate let it in). */
  scope: ModuleScope;
  settings: ModuleDownloadSettings;
  downloader: Downloader;
  response: Response;
  /** What the policy was told about this download at admission. */
  work: WorkScope;
}

export function downloadStage(env: StageEnv) {
  const gate = env.frontier.gate;
  const steps: Step<DownloadWork>[] = [];
  const pages = env.journal === undefined ? undefined : new PagesInHand();
  if (pages !== undefined) steps.push(skipIfParsed(env), onePageAtATime(env, pages));
  steps.push(
    function resolveModule(w) {
      w.registered = env.registry.get(w.request.module);
      return undefined;
    },
    dropIfStopped(
      env,
      ({ request }) => request.runId ?? env.runId,
      ({ registered }) => registered.module.name,
      ({ request, registered }) => ({
        runId: request.runId ?? env.runId,
        module: registered.module.name,
        node: request.node,
        stage: 'download',
        url: request.url,
        origin: request,
      }),
    ),
    async function admitByPolicy(w) {
      const { delivery, request } = w;
      w.work = workOf(request, attemptsOf(delivery));
      const admission = env.policy.admit?.('download', w.work);
      if (admission === undefined) return undefined;
      if ('error' in admission) throw admission.error;
      // A circuit breaker is open: put the request back without counting a failure.
      await republish(env, delivery, request, admission.deferMs);
      return DONE;
    },
    async function enterGate({ delivery, request, signal }) {
      const decided = gate.enter(request, signal);
      const decision = decided instanceof Promise ? await decided : decided;
      if (decision === undefined) return undefined;
      // Not downloaded now: a breaker probe this request may have been goes to the next one.
      env.policy.released?.('download', workOf(request));
      if ('deferMs' in decision) {
        await republish(env, delivery, request, decision.deferMs);
      } else {
        env.counters.dropped++;
        if (channels.drop.hasSubscribers) channels.drop.publish({ request, reason: decision.drop });
        if (env.debug)
          env.log.debug({ url: request.url, reason: decision.drop }, 'dropped by the download gate');
        await publishJoins(env, env.modules.onAbandoned(request), request);
      }
      return DONE;
    },
    // The module's config (downloader, middleware, session) for the request's account × platform;
    // a module with shouldLogin logs in here first.
    function selectDownloader(w) {
      const { request, registered } = w;
      if (channels.request.hasSubscribers) channels.request.publish({ request });
      // A failure here frees the request's place at the gate before it takes the failure path.
      const leave = (err: unknown): never => {
        gate.leave(request, { error: err });
        throw err;
      };
      const select = (scope: ModuleScope): StepOutcome | Promise<StepOutcome> => {
        try {
          w.scope = scope;
          w.settings = env.modules.downloadSettings(registered, scope);
          w.downloader = env.downloads.select(request, w.settings);
        } catch (err) {
          leave(err);
        }
        return w.downloader.stream === undefined ? undefined : stream(env, w).then(end);
      };
      let scope: ModuleScope | Promise<ModuleScope>;
      try {
        scope = env.modules.scope(
          registered,
          request.account ?? DEFAULT_ACCOUNT,
          request.platform ?? DEFAULT_PLATFORM,
          w.signal,
        );
      } catch (err) {
        return leave(err);
      }
      return scope instanceof Promise ? scope.then(select, leave) : select(scope);
    },
    // Middleware (beforeRequest/afterResponse), the session's cookies and login check.
    async function fetch(w) {
      const { request } = w;
      try {
        const out = await env.modules.download(request, w.registered, w.scope, w.signal);
        if (out.response === undefined) {
          gate.leave(request, {});
          await publishJoins(env, out.joins, request);
          return DONE;
        }
        w.response = out.response;
      } catch (err) {
        gate.leave(request, { error: err });
        if (isMocraError(err)) throw err;
        throw new ConnectionError(request.url, 'headers', err instanceof Error ? err.message : String(err), {
          cause: err,
        });
      }
      const { response } = w;
      gate.leave(request, {
        status: response.status,
        durationMs: response.durationMs,
        headers: response.headers,
      });
      if (env.debug) env.log.debug({ url: response.url, status: response.status }, 'downloaded');
      return undefined;
    },
    function checkStatus({ delivery, request, response, work }) {
      if (env.policy.retryStatus(response, attemptsOf(delivery))) {
        throw new HttpStatusError(
          response.url,
          response.status,
          parseRetryAfterMs(response.header('retry-after'), Date.now()),
        );
      }
      // A new object (the policy may have kept the one it admitted), without parsing the URL again.
      env.policy.succeeded?.('download', {
        module: work.module,
        runId: work.runId,
        url: work.url,
        fingerprint: work.fingerprint,
        host: work.host,
        attempt: work.attempt,
        status: response.status,
      });
      countResponse(env, request, response);
      return undefined;
    },
    function handToParse({ delivery, request, response }) {
      const parseHere = env.parseHere;
      if (parseHere !== undefined) {
        // Parsed here when the parse stage has a free slot: no broker round trip, the body never
        // leaves the process. The request stays leased until the parse is done, so a crash in
        // between fetches it again instead of losing the page. (docs/architecture.md#two-hops-that-stay-in-the-process)
        const local = new LocalDelivery(env.topics.response, {
          id: `${delivery.id}>parse`,
          payload: response,
          priority: delivery.priority,
          key: delivery.key,
          headers: parseClaimHeaders(delivery),
          putBackHeaders: parseClaimHeaders(delivery, true),
        });
        // A join module's parse holds its ack until its credit is written in a batch: the
        // request waits for that too, and must not count as a busy download slot meanwhile
        // (the credit writer bounds how many wait and for how long).
        const hold = env.credits?.tracks(request.module) === true;
        if (parseHere(local)) return end({ settleAfter: local.settled, ...(hold ? { hold } : {}) });
      }
      return publishResponse(env, delivery, response, parseClaimHeaders(delivery)).then(() => DONE);
    },
  );
  const handler = composeSteps<Request | RequestData, DownloadWork>(
    (delivery, signal) => ({ delivery, request: Request.from(delivery.payload), signal }) as DownloadWork,
    steps,
  );
  if (pages === undefined) return handler;
  // A page is let go once its delivery is settled: after an inline parse, when there is one.
  return (delivery: Delivery<Request | RequestData>, signal: AbortSignal): Promise<HandlerResult> =>
    handler(delivery, signal).then(
      (result) => {
        if (result === undefined || !('settleAfter' in result)) {
          pages.letGo(delivery);
          return result;
        }
        return { ...result, settleAfter: result.settleAfter.finally(() => pages.letGo(delivery)) };
      },
      (err: unknown) => {
        pages.letGo(delivery);
        throw err;
      },
    );
}

/** The pages this process is downloading (and parsing in line) now, by fingerprint. */
class PagesInHand {
  readonly #held = new Set<string>();
  readonly #by = new WeakMap<object, string>();

  /** False when another delivery holds the page. */
  take(delivery: object, fingerprint: string): boolean {
    if (this.#held.has(fingerprint)) return false;
    this.#held.add(fingerprint);
    this.#by.set(delivery, fingerprint);
    return true;
  }

  letGo(delivery: object): void {
    const fingerprint = this.#by.get(delivery);
    if (fingerprint === undefined) return;
    this.#by.delete(delivery);
    this.#held.delete(fingerprint);
  }
}

/**
 * `persist`: one copy of a page at a time. After a restart the same request can be on the queue
 * twice — a redelivered parse re-admits the links it had claimed when the process died after
 * publishing them but before the claim was released — and both copies can reach the front
 * together. The second waits (put back for a second) until the first is done; then
 * {@link skipIfParsed} finds the page parsed. A request that skips dedup is not held.
 */
function onePageAtATime(env: StageEnv, pages: PagesInHand): Step<DownloadWork> {
  return async function onePageAtATime({ delivery, request }) {
    if (request.skipDedup || pages.take(delivery, pageKeyOf(request))) return undefined;
    if (env.debug) env.log.debug({ url: request.url }, 'the same page is being fetched; put back for 1 s');
    await republish(env, delivery, request, 1_000);
    return DONE;
  };
}

/**
 * `persist`: a first delivery of a request whose page was already parsed (the process died
 * after the parse began but before this request was acked) is acked without fetching again —
 * its response is on the response topic. Retries and replays fetch as they are meant to.
 */
function skipIfParsed(env: StageEnv): Step<DownloadWork> {
  const journal = env.journal!;
  return async function skipIfParsed({ delivery, request }) {
    // A request that skips dedup is fetched again on purpose (a page polled for changes).
    if (
      request.skipDedup ||
      delivery.headers[ATTEMPT_HEADER] !== undefined ||
      delivery.headers[REPLAYED_HEADER] !== undefined
    )
      return undefined;
    if (!(await journal.parsed(request))) return undefined;
    if (env.debug) env.log.debug({ url: request.url }, 'already parsed before a restart; not fetched again');
    return DONE;
  };
}

/** Put a request back on its topic after `delayMs` (a deferral, not a failure). */
function republish(
  env: StageEnv,
  delivery: Delivery<Request | RequestData>,
  request: Request,
  delayMs: number,
): Promise<void> {
  env.credits?.continued(delivery); // the request's unit goes on in the republished message
  return env.topics.request.publish([
    {
      payload: request,
      priority: delivery.priority,
      delayMs,
      headers: delivery.headers as Record<string, string>,
      ...keyOf(delivery.key),
    },
  ]);
}

function countResponse(env: StageEnv, request: Request, response: Response): void {
  env.counters.pages++;
  env.counters.bytes += response.body.length;
  env.db?.counted(request.runId, request.module, 'requests');
  if (channels.response.hasSubscribers) channels.response.publish({ request, response });
}

function publishResponse(
  env: StageEnv,
  delivery: Delivery<Request | RequestData>,
  response: Response,
  headers?: Record<string, string>,
): Promise<void> {
  env.credits?.continued(delivery); // the request's unit goes on in its response
  return env.topics.response.publish([
    {
      payload: response,
      priority: delivery.priority,
      ...keyOf(delivery.key),
      ...(headers === undefined ? {} : { headers }),
    },
  ]);
}

/**
 * request ▶ streaming downloader (WebSocket) ▶ many responses. The request stays leased (the
 * stage extends its lease) while the stream runs; each response is published as it arrives,
 * so a full response topic slows the stream instead of growing memory. The gate is left once
 * the stream delivered its first response: a long stream must not hold a host's download slot.
 * A stream that ends normally acks the request; one that fails takes the retry path.
 */
async function stream(env: StageEnv, w: DownloadWork): Promise<undefined> {
  const { delivery, request } = w;
  const gate = env.frontier.gate;
  const started = performance.now();
  let left = false;
  const leave = (outcome: { status?: number; error?: unknown }): void => {
    if (left) return;
    left = true;
    gate.leave(request, { ...outcome, durationMs: performance.now() - started });
  };
  try {
    await env.downloads.stream(w.downloader, request, w.settings, w.signal, async (response) => {
      leave({ status: response.status });
      countResponse(env, request, response);
      await publishResponse(env, delivery, response);
    });
  } catch (err) {
    leave({ error: err });
    if (isMocraError(err)) throw err;
    throw new ConnectionError(request.url, 'body', err instanceof Error ? err.message : String(err), {
      cause: err,
    });
  }
  leave({ status: 200 });
  return undefined;
}

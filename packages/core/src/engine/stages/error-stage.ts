/** error ▶ policy ▶ report ▶ retry (republish, delayed) | dead-letter | drop | stop */
import { InternalError, isMocraError } from '../../errors.js';
import {
  ATTEMPT_HEADER,
  type ErrorEvent,
  STAGE_TOPICS,
  type StageName,
  TOPICS,
  type TopicName,
  withCurrentStage,
} from '../../model/events.js';
import { Request } from '../../model/request.js';
import { Response } from '../../model/response.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM } from '../../module/runtime.js';
import type { PolicyDecision } from '../../policy/types.js';
import type { Delivery } from '../../queue/types.js';
import type { HandlerResult } from '../stage-runner.js';
import { publishJoins } from './common-steps.js';
import { attemptsOf, errorEvent, keyOf, type StageEnv, topicByName } from './stage-env.js';
import { composeSteps, DONE, end } from './steps.js';

interface ErrorWork {
  event: ErrorEvent;
  delivery: Delivery<ErrorEvent>;
  decision: PolicyDecision;
}

export function errorStage(env: StageEnv) {
  return composeSteps<ErrorEvent, ErrorWork>(
    (delivery) => ({ event: withCurrentStage(delivery.payload), delivery }) as ErrorWork,
    [
      function decide(w) {
        try {
          w.decision = env.policy.decide(w.event);
        } catch (err) {
          env.log.error({ err }, 'the failure policy threw; dead-lettering the failure');
          w.decision = {
            action: 'dead-letter',
            reason: `policy failed: ${err instanceof Error ? err.message : String(err)}`,
          };
        }
        env.report(w.event, w.decision);
        return undefined;
      },
      // Given up on: its unit of work will never be done, which may let a join fire.
      async function abandon({ event, decision, delivery }) {
        if (decision.action === 'retry') {
          env.credits?.continued(delivery); // the unit goes on in the republished message
          return undefined;
        }
        await publishJoins(env, env.modules.onAbandoned(event.payload), { account: event.key }).catch(
          (err: unknown) => env.log.error({ err }, 'publishing a join after a dead letter failed'),
        );
        await env.credits?.done(delivery); // given up: its join credit comes back first
        return undefined;
      },
      async function act({ event, decision }) {
        switch (decision.action) {
          case 'retry': {
            env.counters.retries++;
            const target = event.kind === 'session-expired' ? reloginRetry(env, event) : event;
            await topicByName(env.topics, target.topic).publish([
              {
                payload: target.payload,
                priority: event.priority,
                delayMs: decision.delayMs,
                headers: { [ATTEMPT_HEADER]: String(event.attempt) },
                ...keyOf(event.key),
              },
            ]);
            return DONE;
          }
          case 'stop':
            env.counters.deadLettered++;
            env.stopCritical();
            return end({ deadLetter: decision.reason });
          case 'drop':
            // dlq = never: given up and not kept (reported above, counted in errors).
            return DONE;
          default:
            env.counters.deadLettered++;
            return end({ deadLetter: decision.reason });
        }
      },
    ],
  );
}

/** A handler of `stage` threw: turn it into an error event (the error stage decides), then ack. */
export async function reportStageFailure(
  env: StageEnv,
  stage: StageName,
  delivery: Delivery<unknown>,
  error: unknown,
): Promise<HandlerResult> {
  const err = isMocraError(error)
    ? error
    : new InternalError(
        `stage '${stage}' failed: ${error instanceof Error ? error.message : String(error)}`,
        {
          cause: error,
        },
      );
  if (stage === 'error') {
    // Reporting the failure of reporting would loop: put the event back for a later try.
    env.log.error({ err }, 'the error stage failed; retrying the event in 1 s');
    return { nack: { delayMs: 1_000, reason: err.message } };
  }
  const event = errorEvent(
    stage,
    STAGE_TOPICS[stage],
    delivery.payload,
    err,
    attemptsOf(delivery) + 1,
    delivery.priority,
    delivery.key,
  );
  await env.topics.error.publish([{ payload: event }]);
  return undefined;
}

/**
 * A session expired: end the login (so the retry's download logs in again) and, when parse
 * found out, retry the download rather than re-parse the same stale page. A download that saw
 * a login status has ended the login itself (by generation); here only a login that is older
 * than the failure is ended, so a re-login that already happened is kept.
 */
function reloginRetry(env: StageEnv, event: ErrorEvent): { topic: TopicName; payload: unknown } {
  let request: Request;
  try {
    request =
      event.topic === TOPICS.response
        ? Response.from(event.payload as Response).request
        : Request.from(event.payload as Request);
  } catch {
    return event;
  }
  const session = env.modules.sessions.get(
    request.account ?? DEFAULT_ACCOUNT,
    request.platform ?? DEFAULT_PLATFORM,
  );
  const login = session.login;
  if (login !== undefined && login.loggedInAt <= event.at) session.invalidate();
  return event.topic === TOPICS.response ? { topic: TOPICS.request, payload: request } : event;
}

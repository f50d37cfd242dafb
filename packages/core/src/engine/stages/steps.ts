/**
 * A stage's handler as a short list of named steps over one work object, composed once (the
 * shape of Crawlee's ContextPipeline and fastify's hooks). Each step reads the work, adds what
 * it found, and either lets the next step run (returns nothing) or ends the handler with how
 * the delivery is settled:
 *
 * ```
 *   delivery ─▶ begin ─▶ step ─▶ step ─▶ … ─▶ step ─▶ ack
 *                          │       │
 *                          └───────┴─▶ end(result): ack | nack | dead-letter | settleAfter
 *   a step that throws ─▶ the stage's failure path (an error event; the error stage decides)
 * ```
 *
 * A synchronous step costs no await, so a stage pays only for the steps that wait. The last
 * step's promise is handed on as it is: a step that writes a page's thousand links to the queue
 * can let go of them (its own frame) before the write ends — nothing here keeps the work alive.
 */
import type { Delivery } from '../../queue/types.js';
import type { HandlerResult } from '../stage-runner.js';

/** How a step ended the handler. */
export interface Ended {
  readonly ended: HandlerResult;
}

/** Nothing: run the next step. */
export type StepOutcome = Ended | undefined;

export type Step<TWork> = (work: TWork) => StepOutcome | Promise<StepOutcome>;

/** End the handler here, acking the delivery. */
export const DONE: Ended = Object.freeze({ ended: undefined });

/** End the handler here, settling the delivery as `result` says. */
export function end(result: HandlerResult): Ended {
  return result === undefined ? DONE : { ended: result };
}

/** The stage's handler: `begin` makes the work from the delivery, then the steps run in order. */
export function composeSteps<TPayload, TWork>(
  begin: (delivery: Delivery<TPayload>, signal: AbortSignal) => TWork,
  steps: readonly Step<TWork>[],
): (delivery: Delivery<TPayload>, signal: AbortSignal) => Promise<HandlerResult> {
  return (delivery, signal) => {
    try {
      return Promise.resolve(runFrom(steps, 0, begin(delivery, signal)));
    } catch (err) {
      return Promise.reject(err);
    }
  };
}

function runFrom<TWork>(
  steps: readonly Step<TWork>[],
  from: number,
  work: TWork,
): HandlerResult | Promise<HandlerResult> {
  for (let i = from; i < steps.length; i++) {
    const outcome = steps[i]!(work);
    if (outcome instanceof Promise) {
      if (i === steps.length - 1) return outcome.then(resultOf);
      return continueFrom(steps, i, work, outcome);
    }
    if (outcome !== undefined) return outcome.ended;
  }
  return undefined;
}

/**
 * The rest of the steps once one has to be waited for: one async frame for the whole handler
 * rather than a closure and a promise per step that waits.
 */
async function continueFrom<TWork>(
  steps: readonly Step<TWork>[],
  at: number,
  work: TWork | undefined,
  pending: Promise<StepOutcome>,
): Promise<HandlerResult> {
  let outcome = await pending;
  for (let i = at + 1; i < steps.length; i++) {
    if (outcome !== undefined) return outcome.ended;
    const next = steps[i]!(work as TWork);
    if (next instanceof Promise) {
      // The last step: this frame lets go of the work while it waits (see the module comment).
      if (i === steps.length - 1) work = undefined;
      outcome = await next;
    } else {
      outcome = next;
    }
  }
  return outcome?.ended;
}

function resultOf(outcome: StepOutcome): HandlerResult {
  return outcome?.ended;
}

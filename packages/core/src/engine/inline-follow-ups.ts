/**
 * Which follow-ups of a parse the parse stage admits itself and which go through the
 * `parser_task` topic. A follow-up that carries requests (`cx.follow`, `cx.enqueueLinks`) only
 * needs admission — dedup, limits, one publish to `request` (unbounded, so it never blocks the
 * parse) — and doing it inline saves a queue round trip, a handler and a lease per page. A
 * follow-up without requests runs a node's `generate`, which may be slow: it keeps its own
 * stage.
 */
import type { FollowUpTask } from '../model/events.js';

export function splitFollowUps(followUps: readonly FollowUpTask[]): {
  carried: FollowUpTask[];
  queued: FollowUpTask[];
} {
  const carried: FollowUpTask[] = [];
  const queued: FollowUpTask[] = [];
  for (const f of followUps) (f.requests.length > 0 ? carried : queued).push(f);
  return { carried, queued };
}

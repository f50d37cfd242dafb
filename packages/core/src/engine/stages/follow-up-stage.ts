/** follow-up ▶ (carried requests | generate(target node)) ▶ admit ▶ request */
import type { FollowUpTask } from '../../model/events.js';
import { Request } from '../../model/request.js';
import type { RegisteredModule } from '../../module/registry.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM } from '../../module/runtime.js';
import type { ModuleNode } from '../../module/types.js';
import type { Delivery } from '../../queue/types.js';
import {
  admitAndPublish,
  claimRequest,
  dropIfStopped,
  generateContext,
  publishJoins,
  runGenerate,
} from './common-steps.js';
import { admissionClaimOf, type StageEnv } from './stage-env.js';
import { composeSteps, DONE, end } from './steps.js';

interface FollowUpWork {
  delivery: Delivery<FollowUpTask>;
  followUp: FollowUpTask;
  signal: AbortSignal;
  registered: RegisteredModule;
  node: ModuleNode;
  requests: Request[];
}

export function followUpStage(env: StageEnv) {
  return composeSteps<FollowUpTask, FollowUpWork>(
    (delivery, signal) => {
      const followUp = delivery.payload;
      const registered = env.registry.get(followUp.module);
      return {
        delivery,
        followUp,
        signal,
        registered,
        node: env.registry.node(registered, followUp.node),
        requests: [],
      };
    },
    [
      async function claimJoin(w) {
        // A join's hand-off published twice (after a crash) runs once (distributed/join-credits.ts).
        const { followUp, registered, node, delivery } = w;
        if (followUp.trigger !== 'join' || env.credits?.tracks(registered.module.name) !== true)
          return undefined;
        return (await env.credits.claimJoin(delivery, followUp.runId, registered.module.name, node.id))
          ? undefined
          : DONE;
      },
      dropIfStopped(
        env,
        (w) => w.followUp.runId,
        (w) => w.registered.module.name,
        (w) => ({
          runId: w.followUp.runId,
          module: w.registered.module.name,
          node: w.node.id,
          stage: 'followUp',
          origin: w.followUp,
        }),
      ),
      async function requestsOf(w) {
        const { followUp, registered, node } = w;
        if (followUp.requests.length > 0) {
          w.requests = followUp.requests.map((r) => Request.from(r));
        } else {
          const scope = await env.modules.scope(
            registered,
            followUp.account ?? DEFAULT_ACCOUNT,
            followUp.platform ?? DEFAULT_PLATFORM,
            w.signal,
          );
          const ctx = generateContext(env, registered, node, followUp.runId, w.signal, scope, { followUp });
          w.requests = await runGenerate(registered, node, ctx);
        }
        for (const r of w.requests)
          claimRequest(r, registered, node, followUp.runId, followUp, followUp.depth, {
            env,
            delivery: w.delivery,
          });
        return undefined;
      },
      async function admit(w) {
        const result = await admitAndPublish(env, w.requests, 'followUp', admissionClaimOf(w.delivery));
        // Put back: the hand-off is not done yet.
        return result === undefined ? undefined : end(result);
      },
      async function handOnJoins({ followUp, registered, node }) {
        await publishJoins(
          env,
          env.modules.onUnitDone(followUp.runId, registered.module.name, node.id),
          followUp,
        );
        return undefined;
      },
    ],
  );
}

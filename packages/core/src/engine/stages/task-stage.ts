/** task ▶ generate(entry nodes of each module) ▶ admit ▶ request */
import type { TaskEvent } from '../../model/events.js';
import type { Request } from '../../model/request.js';
import type { RegisteredModule } from '../../module/registry.js';
import type { JoinReady } from '../../module/run-ledger.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM } from '../../module/runtime.js';
import type { Delivery } from '../../queue/types.js';
import { admitAndPublish, claimRequest, generateContext, publishJoins, runGenerate } from './common-steps.js';
import { admissionClaimOf, attemptsOf, type StageEnv } from './stage-env.js';
import { composeSteps, end } from './steps.js';

interface TaskWork {
  delivery: Delivery<TaskEvent>;
  task: TaskEvent;
  signal: AbortSignal;
  modules: readonly RegisteredModule[];
  requests: Request[];
  /** Modules whose entry nodes ran (their task is done once the requests are admitted). */
  started: RegisteredModule[];
  joins: JoinReady[];
}

export function taskStage(env: StageEnv) {
  return composeSteps<TaskEvent, TaskWork>(
    (delivery, signal) => ({
      delivery,
      task: delivery.payload,
      signal,
      modules: [],
      requests: [],
      started: [],
      joins: [],
    }),
    [
      async function resolveModules(w) {
        w.modules =
          env.db === undefined ? env.modules.modulesOf(w.task) : await env.db.modulesFor(w.task, env.modules);
        return undefined;
      },
      // Every entry node of every module of the task starts, not only the first.
      async function generateEntries(w) {
        const { task, signal } = w;
        const first = w.delivery.attempt === 1 && attemptsOf(w.delivery) === 0;
        for (const registered of w.modules) {
          const moduleName = registered.module.name;
          if (first) env.modules.onTaskStart(registered, task.runId);
          env.db?.runStarted(task, moduleName);
          const stopped = await env.modules.stoppedReason(task.runId, moduleName);
          if (stopped !== undefined) {
            for (const node of registered.entry) {
              w.joins.push(
                ...env.modules.dropStopped({
                  runId: task.runId,
                  module: moduleName,
                  node: node.id,
                  stage: 'task',
                  reason: stopped,
                }),
              );
            }
            continue;
          }
          const scope = await env.modules.scope(
            registered,
            task.account ?? DEFAULT_ACCOUNT,
            task.platform ?? DEFAULT_PLATFORM,
            signal,
          );
          await env.modules.runStart(registered, {
            module: moduleName,
            runId: task.runId,
            task,
            params: task.params ?? {},
            account: scope.account,
            platform: scope.platform,
            config: scope.config,
            settings: scope.settings,
            signal,
            log: env.log,
          });
          for (const node of registered.entry) {
            const ctx = generateContext(env, registered, node, task.runId, signal, scope, { task });
            const produced = await runGenerate(registered, node, ctx);
            for (const r of produced)
              claimRequest(r, registered, node, task.runId, task, 0, { env, delivery: w.delivery });
            w.requests.push(...produced);
          }
          w.started.push(registered);
        }
        return undefined;
      },
      async function admit(w) {
        const here =
          env.router === undefined || w.requests.length === 0
            ? w.requests
            : await env.router.routeSeeds(w.requests, w.task);
        const result = await admitAndPublish(env, here, 'task', admissionClaimOf(w.delivery));
        // Put back: the entry nodes are not done yet.
        return result === undefined ? undefined : end(result);
      },
      async function handOnJoins(w) {
        for (const registered of w.started) w.joins.push(...env.modules.onTaskDone(registered, w.task.runId));
        await publishJoins(env, w.joins, w.task);
        return undefined;
      },
    ],
  );
}

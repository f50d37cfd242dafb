/**
 * Cron for modules and spiders, with no database: each module with a `cron` gets one job per
 * target account × platform (default: one, for 'default'/'default'), and each firing submits a
 * task that starts a fresh run. The scheduler's claim makes each scheduled time fire once
 * cluster-wide; the job key is the account, so a partition gate keeps an account's schedule on
 * the node that owns its work.
 */
import { randomUUID } from 'node:crypto';
import type { TaskEvent } from '../model/events.js';
import type { CronInput } from '../schedule/cron.js';
import type { CronFiring, CronScheduler } from '../schedule/scheduler.js';
import type { ModuleRegistry, RegisteredModule } from './registry.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM } from './runtime.js';
import type { CronTarget, ModuleCron } from './types.js';

/** Submits the task a firing starts (the engine's `submit`). */
export type SubmitTask = (task: Omit<TaskEvent, 'runId'> & { runId: string }) => Promise<void>;

/**
 * Adds a job per module × cron target; returns how many jobs were added. `include` leaves out
 * modules whose targets come from elsewhere (the database's cron contexts).
 */
export function scheduleModuleCrons(
  registry: ModuleRegistry,
  scheduler: CronScheduler,
  submit: SubmitTask,
  onFire?: (firing: CronFiring, task: TaskEvent) => void,
  include?: (registered: RegisteredModule) => boolean,
): number {
  let added = 0;
  for (const registered of registry.values()) {
    const cron = registered.module.cron;
    if (cron === undefined || (include !== undefined && !include(registered))) continue;
    const { schedule, targets } = normalize(cron);
    for (const target of targets) {
      const account = target.account ?? DEFAULT_ACCOUNT;
      const platform = target.platform ?? DEFAULT_PLATFORM;
      const module = registered.module.name;
      scheduler.add({
        id: `${module}:${account}:${platform}`,
        key: account,
        schedule,
        fire: async (firing) => {
          const task: TaskEvent = {
            module,
            runId: randomUUID(),
            account,
            platform,
            params: { ...target.params, cron: { scheduledAt: firing.scheduledAt, reason: firing.reason } },
            ...(target.priority === undefined ? {} : { priority: target.priority }),
          };
          await submit(task);
          onFire?.(firing, task);
        },
      });
      added++;
    }
  }
  return added;
}

function normalize(cron: CronInput | ModuleCron): { schedule: CronInput; targets: readonly CronTarget[] } {
  if (typeof cron === 'object' && cron !== null && 'schedule' in cron) {
    return {
      schedule: cron.schedule,
      targets: cron.targets && cron.targets.length > 0 ? cron.targets : [{}],
    };
  }
  return { schedule: cron, targets: [{}] };
}

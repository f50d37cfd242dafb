export type { Clock, TimerHandle } from './clock.js';
export { ManualClock, systemClock } from './clock.js';
export type { CronInput, CronOptions, CronSchedule } from './cron.js';
export { CronBuilder, cron, every, nextFireTime, previousFireTime, runNow, toCronSchedule } from './cron.js';
export type {
  CronFireMessage,
  CronFiring,
  CronJob,
  CronJobInfo,
  CronSchedulerOptions,
  CronSkipMessage,
  CronSkipReason,
} from './scheduler.js';
export { CronScheduler, createCronScheduler, SCHEDULE_CHANNEL_NAMES } from './scheduler.js';

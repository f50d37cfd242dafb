export type { Clock, ClockTimer, ManualClock, RandomSource } from './clock.js';
export { createManualClock, systemClock } from './clock.js';

export type {
  EngineCronOptions,
  EngineOptions,
  EngineRouter,
  EngineState,
  EngineStats,
  EngineTopicOptions,
  ForwardedWork,
  RegisteredModules,
  RunSummary,
  StageConcurrency,
  StageStats,
  StopReason,
} from './engine.js';
export { createEngine, Engine } from './engine.js';
export type { LocalDeliveryFields } from './local-delivery.js';
export { LocalDelivery } from './local-delivery.js';
export type { PersistLock } from './persistence.js';
export { lockPersistDir } from './persistence.js';
export type { HandlerResult, StageRunnerOptions, StageRunnerStats } from './stage-runner.js';
export { StageRunner } from './stage-runner.js';
export type { EngineCounters } from './stages/stage-env.js';

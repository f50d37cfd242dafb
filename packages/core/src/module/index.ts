export type { SubmitTask } from './cron-jobs.js';
export { scheduleModuleCrons } from './cron-jobs.js';
export { defineModule } from './define.js';
export type { ModuleGraph } from './graph.js';
export { compileModuleGraph, graph, ModuleGraphBuilder } from './graph.js';
export type { CollectedFollow, FollowOptions, StartModuleOptions } from './parse-context.js';
export { ParseContext } from './parse-context.js';
export type { RegisteredModule } from './registry.js';
export { ModuleRegistry } from './registry.js';
export type { RouteTarget } from './router.js';
export { routeFollowUp } from './router.js';
export type { JoinReady, RunLedgerOptions } from './run-ledger.js';
export { RunLedger } from './run-ledger.js';
export type {
  ModuleDropMessage,
  ModuleFetch,
  ModuleFlowMessage,
  ModuleRuntimeOptions,
  ModuleRuntimeStats,
  ModuleScope,
  ModuleStopMessage,
  RouteResult,
} from './runtime.js';
export { DEFAULT_ACCOUNT, DEFAULT_PLATFORM, MODULE_CHANNEL_NAMES, ModuleRuntime } from './runtime.js';
export type {
  CronTarget,
  GenerateContext,
  GenerateOutput,
  GenerateTrigger,
  Module,
  ModuleCron,
  ModuleGraphDefinition,
  ModuleNode,
  NodeRef,
  RunEndContext,
  RunStartContext,
} from './types.js';

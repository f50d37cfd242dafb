export type { CollectedFollow, FollowOptions } from './parse-context.js';
export { ParseContext } from './parse-context.js';
export type { RegisteredModule } from './registry.js';
export { ModuleRegistry } from './registry.js';
export type { RouteTarget } from './router.js';
export { routeFollowUp } from './router.js';
export type { GenerateContext, GenerateOutput, Module, ModuleNode } from './types.js';

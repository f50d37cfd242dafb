/**
 * Where a follow-up goes. This is the one place routing is decided: a follow names an optional
 * module and node; the default is the node that parsed. Multi-node routing (named successors,
 * fan-out to every successor of a DAG node, the advance gate) replaces this function and
 * nothing else — hence a list of targets, although today there is always one.
 */
import type { ModuleRegistry } from './registry.js';

export interface RouteTarget {
  module: string;
  node: string;
}

/** Throws UnknownModuleError when the named module or node does not exist. */
export function routeFollowUp(
  registry: ModuleRegistry,
  from: RouteTarget,
  wanted: { module?: string | undefined; node?: string | undefined },
): RouteTarget[] {
  const moduleName = wanted.module ?? from.module;
  const module = registry.get(moduleName);
  const node =
    wanted.node !== undefined
      ? wanted.node
      : moduleName === from.module
        ? from.node
        : (module.entry[0]?.id ?? from.node);
  registry.node(module, node);
  return [{ module: moduleName, node }];
}

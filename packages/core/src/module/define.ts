/**
 * `defineModule`: checks a module definition once, where it is written, and returns it typed.
 *
 * ```ts
 * const catalog = defineModule<Book>({
 *   name: 'catalog',
 *   steps: [list, detail, api],          // or graph: graph().edge(list, detail).edge(list, api).build()
 *   cron: every.hours(6),
 * });
 * ```
 */
import { InvalidModuleError } from '../errors.js';
import { toCronSchedule } from '../schedule/cron.js';
import { compileModuleGraph } from './graph.js';
import type { Module, ModuleCron } from './types.js';

/** Validates a module (graph, login, cron) and returns it. Throws InvalidModuleError. */
export function defineModule<TItem = unknown>(module: Module<TItem>): Module<TItem> {
  if (module === null || typeof module !== 'object')
    throw new InvalidModuleError('(unnamed)', 'not an object');
  if (typeof module.name !== 'string' || module.name === '') {
    throw new InvalidModuleError('(unnamed)', 'a module needs a non-empty name');
  }
  compileModuleGraph(module);
  if (module.shouldLogin === true && typeof module.login !== 'function') {
    throw new InvalidModuleError(module.name, 'shouldLogin is set but there is no login(ctx) function');
  }
  for (const hook of ['onRunStart', 'onRunEnd'] as const) {
    if (module[hook] !== undefined && typeof module[hook] !== 'function') {
      throw new InvalidModuleError(module.name, `${hook} must be a function`);
    }
  }
  if (module.cron !== undefined) {
    const spec = module.cron as ModuleCron;
    const schedule =
      typeof spec === 'object' && spec !== null && 'schedule' in spec ? spec.schedule : module.cron;
    try {
      toCronSchedule(schedule as Parameters<typeof toCronSchedule>[0]);
    } catch (err) {
      throw new InvalidModuleError(
        module.name,
        `invalid cron: ${err instanceof Error ? err.message : String(err)}`,
        {
          cause: err,
        },
      );
    }
  }
  return module;
}

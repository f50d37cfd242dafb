/**
 * The modules an engine runs, each with its sink, validated once at registration (the node
 * graph included) so the hot path can look nodes up without checks.
 */
import { InvalidArgumentError, InvalidModuleError, UnknownModuleError } from '../errors.js';
import type { DataSink } from '../model/item.js';
import { toCronSchedule } from '../schedule/cron.js';
import { compileModuleGraph, type ModuleGraph } from './graph.js';
import type { Module, ModuleCron, ModuleNode } from './types.js';

export interface RegisteredModule<TItem = unknown> {
  readonly module: Module<TItem>;
  readonly sink: DataSink<TItem>;
  /** Entry nodes, in order: every one starts when a run of the module starts. */
  readonly entry: readonly ModuleNode<TItem>[];
  readonly nodes: ReadonlyMap<string, ModuleNode<TItem>>;
  readonly graph: ModuleGraph<TItem>;
}

export class ModuleRegistry {
  readonly #modules = new Map<string, RegisteredModule>();

  register<TItem>(module: Module<TItem>, sink: DataSink<TItem>): RegisteredModule<TItem> {
    if (module === null || typeof module !== 'object')
      throw new InvalidArgumentError('a module must be an object');
    if (typeof module.name !== 'string' || module.name === '') {
      throw new InvalidArgumentError('a module needs a non-empty name');
    }
    if (this.#modules.has(module.name)) {
      throw new InvalidArgumentError(`a module named '${module.name}' is already registered`);
    }
    if (typeof sink?.write !== 'function') {
      throw new InvalidArgumentError(`module '${module.name}': the sink has no write(item, meta) method`);
    }
    const graph = compileModuleGraph(module);
    validateModuleSettings(module);
    const registered: RegisteredModule<TItem> = {
      module,
      sink,
      entry: graph.entry.map((id) => graph.nodes.get(id)!),
      nodes: graph.nodes,
      graph,
    };
    this.#modules.set(module.name, registered as unknown as RegisteredModule);
    return registered;
  }

  /** The registered module, or UnknownModuleError. */
  get(name: string | undefined): RegisteredModule {
    const found = name === undefined ? undefined : this.#modules.get(name);
    if (!found) throw new UnknownModuleError(String(name));
    return found;
  }

  has(name: string): boolean {
    return this.#modules.has(name);
  }

  /** A node of a registered module, or UnknownModuleError. */
  node(module: RegisteredModule, id: string | undefined): ModuleNode {
    const node = id === undefined ? undefined : module.nodes.get(id);
    if (!node) throw new UnknownModuleError(module.module.name, String(id));
    return node;
  }

  names(): string[] {
    return [...this.#modules.keys()];
  }

  values(): IterableIterator<RegisteredModule> {
    return this.#modules.values();
  }

  get size(): number {
    return this.#modules.size;
  }
}

function validateModuleSettings(module: Module<unknown>): void {
  const name = module.name;
  if (module.shouldLogin === true && typeof module.login !== 'function') {
    throw new InvalidModuleError(name, 'shouldLogin is set but there is no login(ctx) function');
  }
  if (module.login !== undefined && typeof module.login !== 'function') {
    throw new InvalidModuleError(name, 'login must be a function');
  }
  if (module.sessionGone !== undefined && typeof module.sessionGone !== 'function') {
    throw new InvalidModuleError(name, 'sessionGone must be a function');
  }
  if (module.version !== undefined && !Number.isInteger(module.version)) {
    throw new InvalidModuleError(name, 'version must be an integer');
  }
  if (module.cron !== undefined) {
    const spec = module.cron as ModuleCron;
    const schedule =
      typeof spec === 'object' && spec !== null && 'schedule' in spec ? spec.schedule : module.cron;
    try {
      toCronSchedule(schedule as Parameters<typeof toCronSchedule>[0]);
    } catch (err) {
      throw new InvalidModuleError(
        name,
        `invalid cron: ${err instanceof Error ? err.message : String(err)}`,
        {
          cause: err,
        },
      );
    }
  }
}

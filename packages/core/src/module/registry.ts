/**
 * The modules an engine runs, each with its sink, validated once at registration so the hot
 * path can look nodes up without checks.
 */
import { InvalidArgumentError, UnknownModuleError } from '../errors.js';
import type { DataSink } from '../model/item.js';
import type { Module, ModuleNode } from './types.js';

export interface RegisteredModule<TItem = unknown> {
  readonly module: Module<TItem>;
  readonly sink: DataSink<TItem>;
  readonly entry: readonly ModuleNode<TItem>[];
  readonly nodes: ReadonlyMap<string, ModuleNode<TItem>>;
}

export class ModuleRegistry {
  readonly #modules = new Map<string, RegisteredModule>();

  register<TItem>(module: Module<TItem>, sink: DataSink<TItem>): RegisteredModule<TItem> {
    if (typeof module?.name !== 'string' || module.name === '') {
      throw new InvalidArgumentError('a module needs a non-empty name');
    }
    if (this.#modules.has(module.name)) {
      throw new InvalidArgumentError(`a module named '${module.name}' is already registered`);
    }
    if (!Array.isArray(module.nodes) || module.nodes.length === 0) {
      throw new InvalidArgumentError(`module '${module.name}' has no nodes`);
    }
    if (typeof sink?.write !== 'function') {
      throw new InvalidArgumentError(`module '${module.name}': the sink has no write(item, meta) method`);
    }
    const nodes = new Map<string, ModuleNode<TItem>>();
    for (const node of module.nodes) {
      if (typeof node?.id !== 'string' || node.id === '') {
        throw new InvalidArgumentError(`module '${module.name}': every node needs a non-empty id`);
      }
      if (typeof node.parse !== 'function') {
        throw new InvalidArgumentError(`module '${module.name}': node '${node.id}' has no parse()`);
      }
      if (nodes.has(node.id)) {
        throw new InvalidArgumentError(`module '${module.name}': two nodes are named '${node.id}'`);
      }
      nodes.set(node.id, node);
    }
    const entryIds = module.entry ?? [module.nodes[0]!.id];
    const entry = entryIds.map((id) => {
      const node = nodes.get(id);
      if (!node) throw new InvalidArgumentError(`module '${module.name}': entry node '${id}' does not exist`);
      return node;
    });
    const registered: RegisteredModule<TItem> = { module, sink, entry, nodes };
    this.#modules.set(module.name, registered as unknown as RegisteredModule);
    return registered;
  }

  /** The registered module, or UnknownModuleError. */
  get(name: string | undefined): RegisteredModule {
    const found = name === undefined ? undefined : this.#modules.get(name);
    if (!found) throw new UnknownModuleError(String(name));
    return found;
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

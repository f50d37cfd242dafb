import { ConfigTypeError } from '../errors.js';
import { type JsonObject, type JsonValue, jsonTypeOf } from '../model/json.js';

/**
 * The layers a module's config is built from, highest precedence first:
 *
 *   module > modulePlatform > moduleAccount > moduleDataMiddleware > moduleDownloadMiddleware
 *          > accountPlatform > platform > account > downloadMiddleware > dataMiddleware > defaults
 *
 * `defaults` is the engine's own fallback (config.toml, then hard-coded defaults).
 * The four middleware layers hold one object per middleware; inside such a layer the middleware
 * listed first (the one with the highest relation priority) wins.
 */
export const MODULE_CONFIG_PRECEDENCE = [
  'module',
  'modulePlatform',
  'moduleAccount',
  'moduleDataMiddleware',
  'moduleDownloadMiddleware',
  'accountPlatform',
  'platform',
  'account',
  'downloadMiddleware',
  'dataMiddleware',
  'defaults',
] as const;

export type ModuleConfigLayerName = (typeof MODULE_CONFIG_PRECEDENCE)[number];

/** A config object that belongs to one named middleware. */
export interface NamedConfig {
  name: string;
  config: JsonObject;
}

type PerMiddlewareLayer =
  | 'moduleDataMiddleware'
  | 'moduleDownloadMiddleware'
  | 'downloadMiddleware'
  | 'dataMiddleware';

/** Input of {@link buildModuleConfig}: every layer is optional. */
export type ModuleConfigLayers = {
  [K in Exclude<ModuleConfigLayerName, PerMiddlewareLayer>]?: JsonObject;
} & {
  [K in PerMiddlewareLayer]?: readonly NamedConfig[];
};

/** Where a value came from: the layer, and for middleware layers the middleware's name. */
export interface ConfigSource {
  layer: ModuleConfigLayerName;
  middleware?: string;
}

interface ResolvedLayer {
  source: ConfigSource;
  values: JsonObject;
}

const hasOwn = (o: object, k: string) => Object.hasOwn(o, k);

/**
 * A module's layered config with typed getters. Lookups are by top-level key: the highest layer
 * that has the key supplies the whole value (objects are not deep-merged, so a module that sets
 * `headers` replaces the platform's `headers` — the same rule `merged()` follows). Immutable.
 */
export class ModuleConfig {
  readonly layers: Readonly<ModuleConfigLayers>;
  readonly #ordered: readonly ResolvedLayer[];

  constructor(layers: ModuleConfigLayers = {}) {
    this.layers = layers;
    const ordered: ResolvedLayer[] = [];
    for (const layer of MODULE_CONFIG_PRECEDENCE) {
      const value = layers[layer];
      if (value === undefined) continue;
      if (Array.isArray(value)) {
        for (const named of value as readonly NamedConfig[]) {
          ordered.push({ source: { layer, middleware: named.name }, values: named.config });
        }
      } else {
        ordered.push({ source: { layer }, values: value as JsonObject });
      }
    }
    this.#ordered = ordered;
  }

  /** The value of `key` from the highest layer that has it, or `undefined`. */
  get(key: string): JsonValue | undefined {
    return this.#find(key)?.values[key];
  }

  has(key: string): boolean {
    return this.#find(key) !== undefined;
  }

  /** Which layer supplies `key` (for debugging "why is my timeout 5?"), or `undefined`. */
  source(key: string): ConfigSource | undefined {
    const found = this.#find(key);
    return found === undefined ? undefined : { ...found.source };
  }

  getString(key: string): string | undefined;
  getString(key: string, fallback: string): string;
  getString(key: string, fallback?: string): string | undefined {
    return this.#typed(key, 'a string', (v): v is string => typeof v === 'string') ?? fallback;
  }

  getNumber(key: string): number | undefined;
  getNumber(key: string, fallback: number): number;
  getNumber(key: string, fallback?: number): number | undefined {
    return this.#typed(key, 'a number', (v): v is number => typeof v === 'number') ?? fallback;
  }

  getInteger(key: string): number | undefined;
  getInteger(key: string, fallback: number): number;
  getInteger(key: string, fallback?: number): number | undefined {
    return this.#typed(key, 'an integer', (v): v is number => Number.isSafeInteger(v)) ?? fallback;
  }

  getBoolean(key: string): boolean | undefined;
  getBoolean(key: string, fallback: boolean): boolean;
  getBoolean(key: string, fallback?: boolean): boolean | undefined {
    return this.#typed(key, 'a boolean', (v): v is boolean => typeof v === 'boolean') ?? fallback;
  }

  getObject(key: string): JsonObject | undefined;
  getObject(key: string, fallback: JsonObject): JsonObject;
  getObject(key: string, fallback?: JsonObject): JsonObject | undefined {
    return (
      this.#typed(
        key,
        'an object',
        (v): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v),
      ) ?? fallback
    );
  }

  getArray(key: string): JsonValue[] | undefined;
  getArray(key: string, fallback: JsonValue[]): JsonValue[];
  getArray(key: string, fallback?: JsonValue[]): JsonValue[] | undefined {
    return this.#typed(key, 'an array', (v): v is JsonValue[] => Array.isArray(v)) ?? fallback;
  }

  /** All keys resolved by precedence into one object (shallow: see the class comment). */
  merged(): JsonObject {
    const out: JsonObject = {};
    for (let i = this.#ordered.length - 1; i >= 0; i--) Object.assign(out, this.#ordered[i]!.values);
    return out;
  }

  /**
   * The config a middleware itself should see: its relation to this module's config over the
   * middleware's own config (shallow). `undefined` when neither layer names it.
   */
  middlewareConfig(kind: 'download' | 'data', name: string): JsonObject | undefined {
    const rel = kind === 'download' ? this.layers.moduleDownloadMiddleware : this.layers.moduleDataMiddleware;
    const own = kind === 'download' ? this.layers.downloadMiddleware : this.layers.dataMiddleware;
    const a = own?.find((m) => m.name === name)?.config;
    const b = rel?.find((m) => m.name === name)?.config;
    if (a === undefined && b === undefined) return undefined;
    return { ...a, ...b };
  }

  /** A copy with `defaults` replaced (the engine adds config.toml values here). */
  withDefaults(defaults: JsonObject): ModuleConfig {
    return new ModuleConfig({ ...this.layers, defaults });
  }

  toJSON(): ModuleConfigLayers {
    return this.layers;
  }

  #find(key: string): ResolvedLayer | undefined {
    return this.#ordered.find((l) => hasOwn(l.values, key) && l.values[key] !== undefined);
  }

  #typed<T extends JsonValue>(key: string, expected: string, is: (v: JsonValue) => v is T): T | undefined {
    const found = this.#find(key);
    if (found === undefined) return undefined;
    const value = found.values[key] as JsonValue;
    // An explicit null at the winning layer switches the key off: lower layers are not consulted and
    // typed getters return their fallback.
    if (value === null) return undefined;
    if (!is(value)) {
      const layer = found.source.middleware
        ? `${found.source.layer}(${found.source.middleware})`
        : found.source.layer;
      throw new ConfigTypeError(key, expected, jsonTypeOf(value), layer);
    }
    return value;
  }
}

/** Builds the layered config of a module from its layers (pure; no database needed). */
export function buildModuleConfig(layers: ModuleConfigLayers): ModuleConfig {
  return new ModuleConfig(layers);
}

/**
 * A module's config for one account × platform, built from layers:
 *
 * ```
 *   provider layers                      ── module > module×platform > module×account > middleware
 *   (in memory now; a database later)       relations > account×platform > platform > account
 *                                           > middleware own config
 *   config.toml  [module_defaults]       ── the `defaults` layer, over …
 *   built-in defaults                       BUILT_IN_MODULE_DEFAULTS
 * ```
 *
 * A {@link ModuleConfigProvider} supplies the provider layers; the in-memory provider here is
 * fed by code and by the `[modules]`, `[accounts]` and `[platforms]` tables of config.toml, and
 * a database provider (on `@mocra/store`'s `loadTaskContext`) implements the same interface.
 * Either way the result is `@mocra/store`'s {@link ModuleConfig} (typed getters for the user's
 * own keys) plus {@link ModuleSettings}, the typed view of the keys the engine itself reads.
 */
import {
  buildModuleConfig,
  type JsonObject,
  MODULE_CONFIG_PRECEDENCE,
  type ModuleConfig,
  type ModuleConfigLayers,
} from '@mocra/store/config';
import { type ConfigIssue, ConfigValidationError, InvalidArgumentError } from '../errors.js';
import type { ProxyChoice } from '../model/request.js';
import { toConfigIssues } from './load.js';
import { moduleLayerSchema } from './schema.js';

/** Which module config to build. */
export interface ModuleConfigQuery {
  module: string;
  account: string;
  platform: string;
}

const QUERY_FIELDS: readonly (keyof ModuleConfigQuery)[] = ['module', 'account', 'platform'];

/** Where module-config layers come from. */
export interface ModuleConfigProvider {
  /** The layers for one module × account × platform, without `defaults` (the resolver adds those). */
  layers(query: ModuleConfigQuery): ModuleConfigLayers | Promise<ModuleConfigLayers>;
  /**
   * A value that changes whenever any layer may have changed; the resolver caches built configs
   * until it moves. Without it nothing is cached.
   */
  version?(): string | number | Promise<string | number>;
  /**
   * The in-memory layers under this provider's own, when it keeps some (a database provider
   * over config.toml's tables): a config reload replaces those.
   */
  readonly memory?: MemoryModuleConfigProvider | undefined;
}

/** The typed view of the module-config keys the engine reads (see `moduleSettingsShape`). */
export interface ModuleSettings {
  /** Name of the downloader, or undefined for the default one. */
  downloader: string | undefined;
  /** Proxy use (`use_proxy` key), or undefined when no layer sets it (the module's code decides). */
  proxy: ProxyChoice | undefined;
  enableSession: boolean;
  stickyHeaders: readonly string[];
  headers: Readonly<Record<string, string>>;
  timeoutMs: number | undefined;
  downloadMiddleware: readonly string[];
  dataMiddleware: readonly string[];
  storeMiddleware: readonly string[];
  middlewareWeights: Readonly<Record<string, number>>;
  loginStatuses: readonly number[];
  loginMaxAttempts: number;
}

/** The lowest layer: what a module gets when nothing else sets a key. */
export const BUILT_IN_MODULE_DEFAULTS: Readonly<JsonObject> = Object.freeze({
  enable_session: false,
  sticky_headers: [],
  headers: {},
  download_middleware: [],
  data_middleware: [],
  store_middleware: [],
  middleware_weights: {},
  login_statuses: [401],
  login_max_attempts: 3,
});

/** A module's resolved config: the layered config and the typed engine settings. */
export interface ResolvedModuleConfig {
  readonly query: ModuleConfigQuery;
  /** Typed getters for any key (`getString`, `getInteger`…), `source(key)` says which layer won. */
  readonly config: ModuleConfig;
  readonly settings: ModuleSettings;
}

/** Layers an in-memory provider holds. Relation keys join two names with `/`. */
export interface MemoryModuleConfigData {
  /** Module layer, by module name. */
  modules?: Record<string, JsonObject>;
  /** Account layer, by account name. */
  accounts?: Record<string, JsonObject>;
  /** Platform layer, by platform name. */
  platforms?: Record<string, JsonObject>;
  /** Account × platform layer, by `'account/platform'`. */
  accountPlatforms?: Record<string, JsonObject>;
  /** Module × account layer, by `'module/account'`. */
  moduleAccounts?: Record<string, JsonObject>;
  /** Module × platform layer, by `'module/platform'`. */
  modulePlatforms?: Record<string, JsonObject>;
  /** Download middleware's own config, by middleware name (what `config.middlewareConfig` reads). */
  downloadMiddleware?: Record<string, JsonObject>;
  /** Data middleware's own config, by middleware name. */
  dataMiddleware?: Record<string, JsonObject>;
}

/** Layers held in memory: given in code, or read from config.toml. No database. */
export class MemoryModuleConfigProvider implements ModuleConfigProvider {
  #data: MemoryModuleConfigData;
  #version = 0;

  constructor(data: MemoryModuleConfigData = {}) {
    this.#data = data;
  }

  /** Replaces every layer (a config reload does this); built configs are rebuilt on next use. */
  replace(data: MemoryModuleConfigData): void {
    this.#data = data;
    this.#version++;
  }

  /** Replaces one layer of one module (the others stay). */
  setModule(module: string, layer: JsonObject): void {
    this.#data = { ...this.#data, modules: { ...this.#data.modules, [module]: layer } };
    this.#version++;
  }

  get data(): Readonly<MemoryModuleConfigData> {
    return this.#data;
  }

  version(): number {
    return this.#version;
  }

  layers(query: ModuleConfigQuery): ModuleConfigLayers {
    const d = this.#data;
    const layers: ModuleConfigLayers = {};
    const pick = (table: Record<string, JsonObject> | undefined, k: string) =>
      table !== undefined && Object.hasOwn(table, k) ? table[k] : undefined;
    const set = (
      name: 'module' | 'modulePlatform' | 'moduleAccount' | 'accountPlatform' | 'platform' | 'account',
      v: JsonObject | undefined,
    ) => {
      if (v !== undefined) layers[name] = v;
    };
    set('module', pick(d.modules, query.module));
    set('modulePlatform', pick(d.modulePlatforms, `${query.module}/${query.platform}`));
    set('moduleAccount', pick(d.moduleAccounts, `${query.module}/${query.account}`));
    set('accountPlatform', pick(d.accountPlatforms, `${query.account}/${query.platform}`));
    set('platform', pick(d.platforms, query.platform));
    set('account', pick(d.accounts, query.account));
    if (d.downloadMiddleware) {
      layers.downloadMiddleware = Object.entries(d.downloadMiddleware).map(([name, config]) => ({
        name,
        config,
      }));
    }
    if (d.dataMiddleware) {
      layers.dataMiddleware = Object.entries(d.dataMiddleware).map(([name, config]) => ({ name, config }));
    }
    return layers;
  }
}

export function createMemoryModuleConfigProvider(
  data: MemoryModuleConfigData = {},
): MemoryModuleConfigProvider {
  return new MemoryModuleConfigProvider(data);
}

export interface ModuleConfigResolverOptions {
  /** @default an empty in-memory provider */
  provider?: ModuleConfigProvider;
  /** The config.toml layer (`[module_defaults]`). @default {} */
  defaults?: JsonObject;
}

/**
 * Builds {@link ResolvedModuleConfig}s: provider layers over config.toml defaults over built-in
 * defaults, validated (a typed key with a bad value in any layer is a ConfigValidationError that
 * names the layer), cached per module × account × platform while the provider's version holds.
 */
export class ModuleConfigResolver {
  #provider: ModuleConfigProvider;
  #defaults: JsonObject;
  /** Each module's own config, from its code: the base of its module layer. */
  readonly #code = new Map<string, JsonObject>();
  #generation = 0;
  readonly #cache = new Map<
    string,
    { version: string | number; generation: number; resolved: ResolvedModuleConfig }
  >();

  constructor(options: ModuleConfigResolverOptions = {}) {
    this.#provider = options.provider ?? new MemoryModuleConfigProvider();
    this.#defaults = validateLayer(options.defaults ?? {}, 'config.toml [module_defaults]');
  }

  get provider(): ModuleConfigProvider {
    return this.#provider;
  }

  /** Replaces the provider (the engine puts its database provider here); built configs are rebuilt on next use. */
  setProvider(provider: ModuleConfigProvider): void {
    this.#provider = provider;
    this.#cache.clear();
    this.#generation++;
  }

  /** Replaces the config.toml layer (live reload). Throws ConfigValidationError for a bad value. */
  setDefaults(defaults: JsonObject): void {
    this.#defaults = validateLayer(defaults, 'config.toml [module_defaults]');
    this.#generation++;
  }

  /**
   * A module's config from its code (`module.config`): the base of its module layer — a
   * provider's module layer (config.toml `[modules.<name>]`, a database row) overrides it key by
   * key. Throws ConfigValidationError for a bad value of a typed key.
   */
  setCodeLayer(module: string, config: JsonObject | undefined): void {
    if (config === undefined || Object.keys(config).length === 0) this.#code.delete(module);
    else this.#code.set(module, validateLayer(config, `module '${module}' config in code`));
    this.#generation++;
  }

  /** The module's config for an account × platform, built from its layers (or cached). */
  async resolve(query: ModuleConfigQuery): Promise<ResolvedModuleConfig> {
    for (const field of QUERY_FIELDS) {
      const value = query[field];
      if (typeof value !== 'string' || value === '') {
        throw new InvalidArgumentError(`module config query: '${field}' must be a non-empty string`);
      }
    }
    const asked = this.#provider.version?.();
    const version = asked instanceof Promise ? await asked : asked;
    const cacheKey = keyOf(query);
    return this.#cachedAt(cacheKey, version) ?? this.#build(query, version, cacheKey);
  }

  /**
   * What `resolve` answers, when it has it cached under a provider version known at once; else
   * undefined (ask `resolve`). Asked twice per page (download and parse): a page's stages go on
   * without waiting for a promise.
   */
  cached(query: ModuleConfigQuery): ResolvedModuleConfig | undefined {
    const version = this.#provider.version?.();
    if (version === undefined || version instanceof Promise) return undefined;
    return this.#cachedAt(keyOf(query), version);
  }

  #cachedAt(cacheKey: string, version: string | number | undefined): ResolvedModuleConfig | undefined {
    if (version === undefined) return undefined;
    const cached = this.#cache.get(cacheKey);
    return cached && cached.version === version && cached.generation === this.#generation
      ? cached.resolved
      : undefined;
  }

  async #build(
    query: ModuleConfigQuery,
    version: string | number | undefined,
    cacheKey: string,
  ): Promise<ResolvedModuleConfig> {
    let layers = await this.#provider.layers(query);
    const code = this.#code.get(query.module);
    if (code !== undefined) layers = { ...layers, module: { ...code, ...layers.module } };
    const issues: ConfigIssue[] = [];
    for (const [name, layer] of Object.entries(layers) as [string, unknown][]) {
      if (Array.isArray(layer)) {
        for (const named of layer as { name: string; config: JsonObject }[]) {
          collectLayerIssues(named.config, `${name}(${named.name})`, issues);
        }
      } else {
        collectLayerIssues(layer, name, issues);
      }
    }
    if (issues.length > 0) throw new ConfigValidationError(issues);
    const config = buildModuleConfig({
      ...layers,
      defaults: { ...BUILT_IN_MODULE_DEFAULTS, ...this.#defaults },
    });
    const resolved: ResolvedModuleConfig = { query: { ...query }, config, settings: settingsOf(config) };
    if (version !== undefined) {
      if (this.#cache.size > 10_000) this.#cache.clear();
      this.#cache.set(cacheKey, { version, generation: this.#generation, resolved });
    }
    return resolved;
  }
}

export function createModuleConfigResolver(options: ModuleConfigResolverOptions = {}): ModuleConfigResolver {
  return new ModuleConfigResolver(options);
}

function collectLayerIssues(layer: unknown, name: string, issues: ConfigIssue[]): void {
  // An empty layer (the default when nothing is configured) is valid: no schema is loaded for it.
  if (isEmptyObject(layer)) return;
  const result = moduleLayerSchema.safeParse(layer);
  if (!result.success) {
    issues.push(
      ...toConfigIssues(
        result.error.issues,
        layer,
        () => ({ kind: 'layer', layer: name }),
        moduleLayerSchema,
      ),
    );
  }
}

function validateLayer(layer: JsonObject, name: string): JsonObject {
  const issues: ConfigIssue[] = [];
  collectLayerIssues(layer, name, issues);
  if (issues.length > 0) throw new ConfigValidationError(issues);
  return layer;
}

function settingsOf(config: ModuleConfig): ModuleSettings {
  // Every layer passed validation, so these getters cannot meet a wrong type.
  const strings = (key: string) => (config.getArray(key) ?? []) as string[];
  return {
    downloader: config.getString('downloader'),
    // Validated by the layer schema (boolean or { provider, tier, session }).
    proxy: (higher(config, 'use_proxy', 'enable_proxy') === 'use_proxy'
      ? config.get('use_proxy')
      : config.getBoolean('enable_proxy')) as ProxyChoice | undefined,
    enableSession: config.getBoolean('enable_session', false),
    stickyHeaders: strings('sticky_headers'),
    headers: (config.getObject('headers') ?? {}) as Record<string, string>,
    timeoutMs:
      higher(config, 'timeout_ms', 'default_timeout') === 'timeout_ms'
        ? config.getInteger('timeout_ms')
        : secondsToMs(config.getNumber('default_timeout')),
    downloadMiddleware: strings('download_middleware'),
    dataMiddleware: strings('data_middleware'),
    storeMiddleware: strings('store_middleware'),
    middlewareWeights: (config.getObject('middleware_weights') ?? {}) as Record<string, number>,
    loginStatuses: (config.getArray('login_statuses') ?? []) as number[],
    loginMaxAttempts: config.getInteger('login_max_attempts', 3),
  };
}

/**
 * Of a native key and its Rust mocra name, the one the higher layer sets (the native one when
 * neither or the same layer sets both — validation refuses both in one layer).
 */
function higher<TNative extends string, TUpstream extends string>(
  config: ModuleConfig,
  native: TNative,
  upstream: TUpstream,
): TNative | TUpstream {
  const rank = (key: string) => {
    const layer = config.get(key) === undefined ? undefined : config.source(key)?.layer;
    return layer === undefined ? Number.POSITIVE_INFINITY : MODULE_CONFIG_PRECEDENCE.indexOf(layer);
  };
  return rank(upstream) < rank(native) ? upstream : native;
}

function secondsToMs(seconds: number | undefined): number | undefined {
  return seconds === undefined ? undefined : Math.max(1, Math.round(seconds * 1000));
}

/** The module-config parts of a loaded config: the in-memory layers and the config.toml defaults layer. */
export function moduleConfigOf(config: {
  module_defaults: Record<string, unknown>;
  modules: Record<string, Record<string, unknown>>;
  accounts: Record<string, Record<string, unknown>>;
  platforms: Record<string, Record<string, unknown>>;
}): { data: MemoryModuleConfigData; defaults: JsonObject } {
  return {
    data: {
      modules: config.modules as Record<string, JsonObject>,
      accounts: config.accounts as Record<string, JsonObject>,
      platforms: config.platforms as Record<string, JsonObject>,
    },
    defaults: config.module_defaults as JsonObject,
  };
}

function isEmptyObject(value: unknown): boolean {
  return (
    value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0
  );
}

function keyOf(query: ModuleConfigQuery): string {
  return `${query.module}\u0000${query.account}\u0000${query.platform}`;
}

export type { EngineConfigOptions } from './engine-options.js';
export { applyLiveConfig, engineOptionsFromConfig } from './engine-options.js';
export type { EnvOverrides, UnknownEnvVariable } from './env.js';
export { OTHER_ENV_VARIABLES, readEnvOverrides, unknownEnvVariables } from './env.js';
export type { ConfigKeyDescriptor, ConfigValueKind } from './keys.js';
export { configKey, configKeys, ENV_PREFIX, envNameOf } from './keys.js';
export type {
  ConfigChange,
  ConfigReloadErrorEvent,
  ConfigReloadEvent,
  LiveConfigOptions,
} from './live-config.js';
export { CONFIG_CHANNEL_NAMES, LiveConfig, openLiveConfig } from './live-config.js';
export type { ConfigEnv, LoadConfigOptions, ParsedToml, ResolveConfigOptions } from './load.js';
export { loadConfig, mergeTables, parseToml, readConfigFile, resolveConfig } from './load.js';
export type { KeySegment, SourcePosition } from './locate.js';
export { formatKeyPath, TomlKeyLocator } from './locate.js';
export type { CarriedKey, DroppedKey, MigrateRustConfigOptions, RustConfigMigration } from './migrate.js';
export { migrateRustConfig } from './migrate.js';
export type {
  MemoryModuleConfigData,
  ModuleConfigProvider,
  ModuleConfigQuery,
  ModuleConfigResolverOptions,
  ModuleSettings,
  ResolvedModuleConfig,
} from './module-config.js';
export {
  BUILT_IN_MODULE_DEFAULTS,
  createMemoryModuleConfigProvider,
  createModuleConfigResolver,
  MemoryModuleConfigProvider,
  ModuleConfigResolver,
  moduleConfigOf,
} from './module-config.js';
export type { ConfigKeyInfo, MocraConfig, MocraConfigInput, ModuleLayerInput } from './schema.js';
export {
  configKeyInfo,
  configSchema,
  LOG_LEVELS,
  moduleLayerSchema,
  moduleSettingsShape,
  REFUSED_UPSTREAM_MODULE_KEYS,
} from './schema.js';

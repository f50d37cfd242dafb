// @mocra/store/config — how a module's config is built from its layers, and the store's error
// classes: what an engine needs for module configs and to recognise a store's errors, without
// loading the repository, its drivers, migrations and item stores. Those load with a store.
export {
  buildModuleConfig,
  type ConfigSource,
  MODULE_CONFIG_PRECEDENCE,
  ModuleConfig,
  type ModuleConfigLayerName,
  type ModuleConfigLayers,
  type NamedConfig,
} from './config/module-config.js';
export {
  ConfigTypeError,
  ContextUnavailableError,
  type ContextUnavailableReason,
  isStoreError,
  STORE_ERROR_CODES,
  StoreError,
  type StoreErrorCode,
} from './errors.js';
export type { JsonObject, JsonValue } from './model/json.js';

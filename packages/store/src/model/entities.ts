import type { JsonObject } from './json.js';

/*
 * The catalog: who crawls what. Five named entities and five relations between them,
 * each relation with its own config, enabled flag and priority:
 *
 *   account ──rel_account_platform── platform
 *      │                                 │
 *  rel_module_account            rel_module_platform
 *      └──────────── module ─────────────┘
 *                      ├── rel_module_download_middleware ── download_middleware
 *                      └── rel_module_data_middleware ────── data_middleware
 *
 * Rows are addressed by name in this API (names are unique per entity); numeric ids exist for
 * joins and are returned for reference.
 */

interface Timestamps {
  createdAt: Date;
  updatedAt: Date;
}

export interface Account extends Timestamps {
  id: number;
  name: string;
  /** Names of modules this account is meant for. Informational: linking goes through `module_account`. */
  modules: string[];
  enabled: boolean;
  config: JsonObject;
  priority: number;
}

export interface Platform extends Timestamps {
  id: number;
  name: string;
  description: string | null;
  baseUrl: string | null;
  enabled: boolean;
  config: JsonObject;
}

/** A row of the `module` table (named `ModuleRecord` so it does not clash with the engine's modules). */
export interface ModuleRecord extends Timestamps {
  id: number;
  name: string;
  enabled: boolean;
  config: JsonObject;
  priority: number;
  version: number;
}

/** A row of `download_middleware` or `data_middleware`. */
export interface Middleware extends Timestamps {
  id: number;
  name: string;
  weight: number;
  enabled: boolean;
  config: JsonObject;
}

export interface AccountInput {
  name: string;
  /** @default [] */
  modules?: string[];
  /** @default true */
  enabled?: boolean;
  /** @default {} */
  config?: JsonObject;
  /** @default 0 */
  priority?: number;
}

export interface PlatformInput {
  name: string;
  /** @default null */
  description?: string | null;
  /** @default null */
  baseUrl?: string | null;
  /** @default true */
  enabled?: boolean;
  /** @default {} */
  config?: JsonObject;
}

export interface ModuleInput {
  name: string;
  /** @default true */
  enabled?: boolean;
  /** @default {} */
  config?: JsonObject;
  /** @default 0 */
  priority?: number;
  /** @default 1 */
  version?: number;
}

export interface MiddlewareInput {
  name: string;
  /** Order of execution among a module's middleware of one kind, after the relation priority. @default 0 */
  weight?: number;
  /** @default true */
  enabled?: boolean;
  /** @default {} */
  config?: JsonObject;
}

export type EntityKind = 'account' | 'platform' | 'module' | 'download_middleware' | 'data_middleware';

export interface EntityRecordMap {
  account: Account;
  platform: Platform;
  module: ModuleRecord;
  download_middleware: Middleware;
  data_middleware: Middleware;
}

export interface EntityInputMap {
  account: AccountInput;
  platform: PlatformInput;
  module: ModuleInput;
  download_middleware: MiddlewareInput;
  data_middleware: MiddlewareInput;
}

/** What every relation carries besides the two names it links. */
export interface RelationFields extends Timestamps {
  enabled: boolean;
  priority: number;
  config: JsonObject;
}

export interface AccountPlatformLink extends RelationFields {
  account: string;
  platform: string;
  accountId: number;
  platformId: number;
}

export interface ModuleAccountLink extends RelationFields {
  module: string;
  account: string;
  moduleId: number;
  accountId: number;
}

export interface ModulePlatformLink extends RelationFields {
  module: string;
  platform: string;
  moduleId: number;
  platformId: number;
}

export interface ModuleMiddlewareLink extends RelationFields {
  module: string;
  middleware: string;
  moduleId: number;
  middlewareId: number;
}

interface RelationInputFields {
  /** @default true */
  enabled?: boolean;
  /** Higher runs first / wins first. @default 0 */
  priority?: number;
  /** @default {} */
  config?: JsonObject;
}

export interface AccountPlatformInput extends RelationInputFields {
  account: string;
  platform: string;
}
export interface ModuleAccountInput extends RelationInputFields {
  module: string;
  account: string;
}
export interface ModulePlatformInput extends RelationInputFields {
  module: string;
  platform: string;
}
export interface ModuleMiddlewareInput extends RelationInputFields {
  module: string;
  middleware: string;
}

export type LinkKind =
  | 'account_platform'
  | 'module_account'
  | 'module_platform'
  | 'module_download_middleware'
  | 'module_data_middleware';

export interface LinkRecordMap {
  account_platform: AccountPlatformLink;
  module_account: ModuleAccountLink;
  module_platform: ModulePlatformLink;
  module_download_middleware: ModuleMiddlewareLink;
  module_data_middleware: ModuleMiddlewareLink;
}

export interface LinkInputMap {
  account_platform: AccountPlatformInput;
  module_account: ModuleAccountInput;
  module_platform: ModulePlatformInput;
  module_download_middleware: ModuleMiddlewareInput;
  module_data_middleware: ModuleMiddlewareInput;
}

/** The two names that identify a relation row, e.g. `{ module: 'quotes', account: 'acme' }`. */
export interface LinkKeyMap {
  account_platform: { account: string; platform: string };
  module_account: { module: string; account: string };
  module_platform: { module: string; platform: string };
  module_download_middleware: { module: string; middleware: string };
  module_data_middleware: { module: string; middleware: string };
}

export type LinkKey<K extends LinkKind> = LinkKeyMap[K];

// ── table metadata used to generate SQL ────────────────────────────────────────────────────────

export type ColumnKind = 'text' | 'integer' | 'boolean' | 'json';

export interface EntityColumn {
  column: string;
  prop: string;
  kind: ColumnKind;
  nullable: boolean;
  /** Value used when the input omits the property. */
  fallback: unknown;
}

export interface EntityTable {
  table: string;
  columns: readonly EntityColumn[];
}

const enabled: EntityColumn = {
  column: 'enabled',
  prop: 'enabled',
  kind: 'boolean',
  nullable: false,
  fallback: true,
};
const config: EntityColumn = {
  column: 'config',
  prop: 'config',
  kind: 'json',
  nullable: false,
  fallback: {},
};
const priority: EntityColumn = {
  column: 'priority',
  prop: 'priority',
  kind: 'integer',
  nullable: false,
  fallback: 0,
};
const weight: EntityColumn = {
  column: 'weight',
  prop: 'weight',
  kind: 'integer',
  nullable: false,
  fallback: 0,
};

export const ENTITY_TABLES: { readonly [K in EntityKind]: EntityTable } = {
  account: {
    table: 'account',
    columns: [
      { column: 'modules', prop: 'modules', kind: 'json', nullable: false, fallback: [] },
      enabled,
      config,
      priority,
    ],
  },
  platform: {
    table: 'platform',
    columns: [
      { column: 'description', prop: 'description', kind: 'text', nullable: true, fallback: null },
      { column: 'base_url', prop: 'baseUrl', kind: 'text', nullable: true, fallback: null },
      enabled,
      config,
    ],
  },
  module: {
    table: 'module',
    columns: [
      enabled,
      config,
      priority,
      { column: 'version', prop: 'version', kind: 'integer', nullable: false, fallback: 1 },
    ],
  },
  download_middleware: { table: 'download_middleware', columns: [weight, enabled, config] },
  data_middleware: { table: 'data_middleware', columns: [weight, enabled, config] },
};

export interface LinkEnd {
  entity: EntityKind;
  /** Property in the API (`account`, `middleware`). */
  prop: string;
  /** Id column in the relation table (`account_id`, `data_middleware_id`). */
  column: string;
  /** Id property in the returned record (`accountId`, `middlewareId`). */
  idProp: string;
}

export interface LinkTable {
  table: string;
  left: LinkEnd;
  right: LinkEnd;
}

const moduleEnd: LinkEnd = { entity: 'module', prop: 'module', column: 'module_id', idProp: 'moduleId' };

export const LINK_TABLES: { readonly [K in LinkKind]: LinkTable } = {
  account_platform: {
    table: 'rel_account_platform',
    left: { entity: 'account', prop: 'account', column: 'account_id', idProp: 'accountId' },
    right: { entity: 'platform', prop: 'platform', column: 'platform_id', idProp: 'platformId' },
  },
  module_account: {
    table: 'rel_module_account',
    left: moduleEnd,
    right: { entity: 'account', prop: 'account', column: 'account_id', idProp: 'accountId' },
  },
  module_platform: {
    table: 'rel_module_platform',
    left: moduleEnd,
    right: { entity: 'platform', prop: 'platform', column: 'platform_id', idProp: 'platformId' },
  },
  module_download_middleware: {
    table: 'rel_module_download_middleware',
    left: moduleEnd,
    right: {
      entity: 'download_middleware',
      prop: 'middleware',
      column: 'download_middleware_id',
      idProp: 'middlewareId',
    },
  },
  module_data_middleware: {
    table: 'rel_module_data_middleware',
    left: moduleEnd,
    right: {
      entity: 'data_middleware',
      prop: 'middleware',
      column: 'data_middleware_id',
      idProp: 'middlewareId',
    },
  },
};

export const ENTITY_KINDS = Object.keys(ENTITY_TABLES) as EntityKind[];
export const LINK_KINDS = Object.keys(LINK_TABLES) as LinkKind[];

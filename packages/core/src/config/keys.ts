/**
 * The flat list of config keys, read off {@link configSchema}: dotted name, environment
 * variable, live or not, type and default. The docs, the env-override reader and the reloader
 * all use this one list, so a key added to the schema is documented, overridable and
 * diffed without further edits.
 */
import type { z } from 'zod';
import { type ConfigKeyInfo, configKeyInfo, configSchema, RENAMED_CONFIG_KEYS } from './schema.js';
import { suggest } from './suggest.js';

/** How an environment variable's text is turned into a value. */
export type ConfigValueKind = 'string' | 'integer' | 'number' | 'boolean' | 'enum' | 'array' | 'table';

export interface ConfigKeyDescriptor extends ConfigKeyInfo {
  /** `crawler.task_concurrency` */
  key: string;
  path: readonly string[];
  /** `MOCRA_CRAWLER__TASK_CONCURRENCY` */
  env: string;
  kind: ConfigValueKind;
  /** `integer ≥ 1`, `'json' | 'msgpack'`, `array of integer 100–599`… */
  type: string;
  /** The default after validation, or undefined when the key has none. */
  default: unknown;
  /** The key's own schema (what a value from the environment is checked against). */
  schema: z.ZodType;
}

/** Environment variables that override config keys start with this. */
export const ENV_PREFIX = 'MOCRA_';

/** `['crawler', 'task_concurrency']` → `MOCRA_CRAWLER__TASK_CONCURRENCY`. */
export function envNameOf(path: readonly string[]): string {
  return ENV_PREFIX + path.map((p) => p.toUpperCase()).join('__');
}

interface Def {
  type: string;
  innerType?: z.ZodType;
  defaultValue?: unknown;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  entries?: Record<string, string>;
  catchall?: z.ZodType;
}

export function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { def: Def }).def;
}

/** Strips default/prefault/optional/nullable wrappers. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    if (
      (def.type === 'default' ||
        def.type === 'prefault' ||
        def.type === 'optional' ||
        def.type === 'nullable') &&
      def.innerType
    ) {
      current = def.innerType;
    } else return current;
  }
}

function defaultOf(schema: z.ZodType): unknown {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    if (def.type === 'default') return structuredClone(def.defaultValue);
    if ((def.type === 'optional' || def.type === 'nullable' || def.type === 'prefault') && def.innerType) {
      current = def.innerType;
    } else return undefined;
  }
}

function describeType(schema: z.ZodType): { kind: ConfigValueKind; type: string } {
  const inner = unwrap(schema);
  const def = defOf(inner);
  const bounds = inner as unknown as {
    minValue?: number | null;
    maxValue?: number | null;
    format?: string | null;
  };
  switch (def.type) {
    case 'number': {
      const isInt = bounds.format === 'safeint' || bounds.format === 'int32';
      const name = isInt ? 'integer' : 'number';
      const min = bounds.minValue;
      const max = bounds.maxValue;
      const hasMin = typeof min === 'number' && Number.isFinite(min) && min > Number.MIN_SAFE_INTEGER;
      const hasMax = typeof max === 'number' && Number.isFinite(max) && max < Number.MAX_SAFE_INTEGER;
      const range = hasMin && hasMax ? ` ${min}–${max}` : hasMin ? ` ≥ ${min}` : hasMax ? ` ≤ ${max}` : '';
      return { kind: isInt ? 'integer' : 'number', type: `${name}${range}` };
    }
    case 'string':
      return { kind: 'string', type: 'string' };
    case 'boolean':
      return { kind: 'boolean', type: 'boolean' };
    case 'enum':
      return {
        kind: 'enum',
        type: Object.values(def.entries ?? {})
          .map((v) => `'${v}'`)
          .join(' \\| '),
      };
    case 'array':
      return { kind: 'array', type: `array of ${describeType(def.element!).type}` };
    case 'record':
      return { kind: 'table', type: `table of ${describeType(def.valueType!).type}` };
    case 'object':
      return { kind: 'table', type: 'table' };
    default:
      return { kind: 'table', type: 'JSON value' };
  }
}

function collect(schema: z.ZodType, path: string[], out: ConfigKeyDescriptor[]): void {
  const info = configKeyInfo.get(schema);
  if (info) {
    out.push({
      ...info,
      key: path.join('.'),
      path,
      env: envNameOf(path),
      ...describeType(schema),
      default: defaultOf(schema),
      schema,
    });
    return;
  }
  const inner = unwrap(schema);
  const def = defOf(inner);
  if (def.type === 'object' && def.shape) {
    for (const [name, child] of Object.entries(def.shape)) collect(child, [...path, name], out);
  }
}

let cached: readonly ConfigKeyDescriptor[] | undefined;

/** Every key of the config schema, in schema order. */
export function configKeys(): readonly ConfigKeyDescriptor[] {
  if (!cached) {
    const out: ConfigKeyDescriptor[] = [];
    collect(configSchema, [], out);
    cached = Object.freeze(out);
  }
  return cached;
}

/** The descriptor of a dotted key, or undefined. */
export function configKey(key: string): ConfigKeyDescriptor | undefined {
  return configKeys().find((k) => k.key === key);
}

/**
 * The schema that applies at `path` (for "did you mean…" suggestions and type names), walking
 * objects by key, records by any key and arrays by index. Undefined past a leaf.
 */
export function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let current: z.ZodType | undefined = root;
  for (const segment of path) {
    if (!current) return undefined;
    const def = defOf(unwrap(current));
    if (def.type === 'object') current = def.shape?.[String(segment)] ?? def.catchall;
    else if (def.type === 'record') current = def.valueType;
    else if (def.type === 'array') current = def.element;
    else return undefined;
  }
  return current;
}

/** The keys a table at `path` accepts (empty when it accepts any key). */
export function knownKeysAt(root: z.ZodType, path: readonly PropertyKey[]): string[] {
  const at = schemaAt(root, path);
  if (!at) return [];
  const def = defOf(unwrap(at));
  return def.type === 'object' && def.shape ? Object.keys(def.shape) : [];
}

/**
 * Why the key at `path` under `root` is refused: a renamed key names the key that replaced it;
 * another one is unknown, with the likely spelling when it looks like a typo.
 */
export function unknownKeyMessage(root: z.ZodType, path: readonly PropertyKey[]): string {
  const renamed = RENAMED_CONFIG_KEYS[path.map(String).join('.')];
  if (renamed !== undefined) return `renamed: use '${renamed}'`;
  const hint = suggest(String(path.at(-1)), knownKeysAt(root, path.slice(0, -1)));
  return `unknown key${hint ? ` (did you mean '${hint}'?)` : ''}`;
}

/**
 * Loading configuration: a TOML file, config given in code and `MOCRA_*` environment
 * overrides, validated with one schema. Precedence, highest first:
 *
 *   environment (MOCRA_*)  >  code (`values`)  >  TOML file  >  built-in defaults
 *
 * Tables merge key by key; any other value (arrays included) is replaced whole.
 *
 * Each source is validated on its own before they are merged, so every issue names the source
 * it came from — `config.toml:12:3` (the key's line and column), `env MOCRA_X`, or `code` —
 * and every issue of every source is reported at once.
 */
import { readFile, stat } from 'node:fs/promises';
import type { z } from 'zod';
import {
  type ConfigIssue,
  type ConfigIssueSource,
  ConfigReadError,
  ConfigSyntaxError,
  ConfigValidationError,
} from '../errors.js';
import { lazyRequire } from '../optional-dependency.js';
import { readEnvOverrides } from './env.js';
import { unknownKeyMessage } from './keys.js';
import { formatKeyPath, type SourcePosition, TomlKeyLocator } from './locate.js';
import { configSchema, type MocraConfig, type MocraConfigInput } from './schema.js';

/** Environment variables as `process.env` holds them. */
export type ConfigEnv = Readonly<Record<string, string | undefined>>;

export interface ResolveConfigOptions {
  /** Text of a TOML config file. */
  toml?: string;
  /** The file's name in errors. @default 'config.toml' */
  file?: string;
  /** Config given in code (the same keys as the file); wins over the file. */
  values?: MocraConfigInput;
  /** Where `MOCRA_*` overrides are read from; `false` reads none. @default process.env */
  env?: ConfigEnv | false;
}

export interface LoadConfigOptions extends Omit<ResolveConfigOptions, 'toml'> {
  /** Path of the TOML file to read. Without it, only code, environment and defaults apply. */
  file?: string;
}

/** A parsed TOML document and where each of its keys was written. */
export interface ParsedToml {
  values: Record<string, unknown>;
  locator: TomlKeyLocator;
}

/** The TOML parser, loaded with the first file read (a crawl without one never needs it). */
const toml = lazyRequire<typeof import('smol-toml')>('smol-toml');

/** Parses TOML text; dates become ISO strings (config values are JSON). Throws ConfigSyntaxError. */
export function parseToml(text: string, file = 'config.toml'): ParsedToml {
  let table: Record<string, unknown>;
  const { parse, TomlDate, TomlError } = toml();
  try {
    table = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      throw new ConfigSyntaxError(file, err.line, err.column, err.message.split('\n', 1)[0]!, { cause: err });
    }
    throw new ConfigSyntaxError(file, 1, 1, err instanceof Error ? err.message : String(err), { cause: err });
  }
  return {
    values: datesToStrings(table, TomlDate) as Record<string, unknown>,
    locator: new TomlKeyLocator(text),
  };
}

/** Validates and merges the sources (see the module comment). Throws ConfigSyntaxError or ConfigValidationError. */
export function resolveConfig(options: ResolveConfigOptions = {}): MocraConfig {
  const file = options.file ?? 'config.toml';
  const layers: Layer[] = [];
  if (options.toml !== undefined) {
    const parsed = parseToml(options.toml, file);
    layers.push({
      values: parsed.values,
      sourceOf: (path) => fileSource(file, parsed.locator.find(path)),
    });
  }
  if (options.values !== undefined) {
    layers.push({ values: options.values as Record<string, unknown>, sourceOf: () => ({ kind: 'code' }) });
  }
  const issues: ConfigIssue[] = [];
  const env = options.env === false ? undefined : (options.env ?? process.env);
  if (env) {
    const overrides = readEnvOverrides(env);
    issues.push(...overrides.issues);
    if (overrides.variables.size > 0) {
      layers.push({
        values: overrides.values,
        sourceOf: (path) => {
          // The variable that set this key or one of its ancestors (a table given as JSON).
          for (let n = path.length; n > 0; n--) {
            const variable = overrides.variables.get(path.slice(0, n).map(String).join('.'));
            if (variable) return { kind: 'env', variable };
          }
          return { kind: 'env', variable: 'MOCRA_*' };
        },
      });
    }
  }

  for (const layer of layers) {
    const result = configSchema.safeParse(layer.values);
    // 'custom' issues come from checks across keys; alone a source would be checked against
    // defaults instead of the other sources' values, so those wait for the merged config.
    const own = result.success ? [] : result.error.issues.filter((i) => i.code !== 'custom');
    if (own.length > 0) issues.push(...toConfigIssues(own, layer.values, layer.sourceOf));
  }
  if (issues.length > 0) throw new ConfigValidationError(issues);

  let merged: Record<string, unknown> = {};
  for (const layer of layers) merged = mergeTables(merged, layer.values);
  const result = configSchema.safeParse(merged);
  if (result.success) return result.data;
  // Only checks across keys can fail here (each source passed alone); blame the source that set the key.
  throw new ConfigValidationError(
    toConfigIssues(result.error.issues, merged, (path) => {
      for (let k = layers.length - 1; k >= 0; k--) {
        if (valueAt(layers[k]!.values, path) !== undefined) return layers[k]!.sourceOf(path);
      }
      return { kind: 'code' };
    }),
  );
}

/** Reads `options.file` (if given) and resolves it with code and environment. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<MocraConfig> {
  if (options.file === undefined) return resolveConfig(options);
  const toml = await readConfigFile(options.file);
  return resolveConfig({ ...options, toml });
}

/** The text of a config file, or ConfigReadError. */
export async function readConfigFile(file: string): Promise<string> {
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new Error('not a regular file');
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigReadError(file, { cause: err });
  }
}

interface Layer {
  values: Record<string, unknown>;
  sourceOf: (path: readonly PropertyKey[]) => ConfigIssueSource;
}

function fileSource(file: string, position: SourcePosition | undefined): ConfigIssueSource {
  return { kind: 'file', file, line: position?.line ?? 1, column: position?.column ?? 1 };
}

/**
 * Turns zod issues into config issues: an unknown key names the key itself (with a suggestion
 * when it looks like a typo), a wrong type says what was expected and what was found, a bad
 * value says what is allowed.
 */
export function toConfigIssues(
  issues: readonly z.core.$ZodIssue[],
  input: unknown,
  sourceOf: (path: readonly PropertyKey[]) => ConfigIssueSource,
  schema: z.ZodType = configSchema,
): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of issues) {
    const path = issue.path;
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const unknown of issue.keys) {
          const at = [...path, unknown];
          out.push({
            kind: 'unknown-key',
            key: formatKeyPath(at),
            message: unknownKeyMessage(schema, at),
            source: sourceOf(at),
          });
        }
        break;
      case 'invalid_type':
        out.push({
          kind: 'type',
          key: formatKeyPath(path),
          message: `expected ${article(issue.expected)}, got ${describeValue(valueAt(input, path))}`,
          source: sourceOf(path),
        });
        break;
      case 'invalid_union':
        out.push({
          kind: 'type',
          key: formatKeyPath(path),
          message: `expected a JSON value (string, number, boolean, array or table), got ${describeValue(valueAt(input, path))}`,
          source: sourceOf(path),
        });
        break;
      case 'invalid_key':
        out.push({
          kind: 'value',
          key: formatKeyPath(path),
          message: `invalid key name: ${issue.issues.map((i) => valueMessage(i)).join('; ')}`,
          source: sourceOf(path),
        });
        break;
      default:
        out.push({
          kind: 'value',
          key: formatKeyPath(path),
          message: valueMessage(issue),
          source: sourceOf(path),
        });
    }
  }
  return out;
}

function valueMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'too_small': {
      const n = Number(issue.minimum);
      if (issue.origin === 'string')
        return n <= 1 ? 'must not be empty' : `must be at least ${n} characters long`;
      if (issue.origin === 'array') return `must have at least ${n} element${n === 1 ? '' : 's'}`;
      return issue.inclusive ? `must be ≥ ${n}` : `must be > ${n}`;
    }
    case 'too_big': {
      const n = Number(issue.maximum);
      if (issue.origin === 'string') return `must be at most ${n} characters long`;
      if (issue.origin === 'array') return `must have at most ${n} element${n === 1 ? '' : 's'}`;
      return issue.inclusive ? `must be ≤ ${n}` : `must be < ${n}`;
    }
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_type':
      return `expected ${article(issue.expected)}`;
    default:
      return issue.message;
  }
}

function article(expected: string): string {
  switch (expected) {
    case 'int':
      return 'an integer';
    case 'object':
    case 'record':
      return 'a table';
    case 'array':
      return 'an array';
    default:
      return `a ${expected}`;
  }
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'a table';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number')
    return Number.isInteger(value) ? `the integer ${value}` : `the number ${value}`;
  return `${typeof value === 'boolean' ? 'the boolean' : `a ${typeof value}`} ${String(value)}`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** `over` on top of `base`: tables merge key by key, everything else is replaced. Inputs are not mutated. */
export function mergeTables(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    const previous = out[k];
    out[k] = isTable(previous) && isTable(v) ? mergeTables(previous, v) : v;
  }
  return out;
}

function datesToStrings(value: unknown, TomlDate: typeof import('smol-toml').TomlDate): unknown {
  if (value instanceof TomlDate) return value.toISOString();
  if (Array.isArray(value)) return value.map((v) => datesToStrings(v, TomlDate));
  if (isTable(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = datesToStrings(v, TomlDate);
    return out;
  }
  return value;
}

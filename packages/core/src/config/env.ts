/**
 * Environment overrides. Every key has one variable: `MOCRA_` + the dotted key upper-cased with
 * `__` between tables — `crawler.task_concurrency` is `MOCRA_CRAWLER__TASK_CONCURRENCY`, `name`
 * is `MOCRA_NAME`. Values are read by the key's type: numbers, booleans (`true/false`, `1/0`,
 * `yes/no`, `on/off`), strings as given, arrays as JSON (`[401, 403]`) or a comma list
 * (`401,403`), tables as JSON objects.
 *
 * `MOCRA_<TABLE>__<KEY>` naming a known table but an unknown key is an error (a typo would
 * otherwise be silently ignored). The `MOCRA_*` variables of other components
 * (OTHER_ENV_VARIABLES: `MOCRA_LOG_LEVEL`, `MOCRA_NODE_ID`…) are left alone; any other `MOCRA_*`
 * variable is reported by unknownEnvVariables, with the closest known name.
 */
import type { ConfigIssue } from '../errors.js';
import {
  type ConfigKeyDescriptor,
  configKeys,
  defOf,
  ENV_PREFIX,
  unknownKeyMessage,
  unwrap,
} from './keys.js';
import { configSchema } from './schema.js';
import { suggest } from './suggest.js';

export interface EnvOverrides {
  /** The overrides as a nested config object (only the keys that are set). */
  values: Record<string, unknown>;
  /** Which variable set each key: dotted key → variable name. */
  variables: Map<string, string>;
  /** Variables that could not be read (bad number, bad JSON, unknown key). */
  issues: ConfigIssue[];
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);
const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** Reads every `MOCRA_*` override from `env`. Never throws; problems are returned as issues. */
export function readEnvOverrides(env: Readonly<Record<string, string | undefined>>): EnvOverrides {
  if (!setsMocraVariable(env)) return { values: {}, variables: new Map(), issues: [] };
  const byVariable = new Map<string, ConfigKeyDescriptor>();
  for (const descriptor of configKeys()) byVariable.set(descriptor.env, descriptor);
  const tables = new Set(
    configKeys()
      .filter((d) => d.path.length > 1)
      .map((d) => d.path[0]!.toUpperCase()),
  );
  const values: Record<string, unknown> = {};
  const variables = new Map<string, string>();
  const issues: ConfigIssue[] = [];

  for (const variable of Object.keys(env).sort()) {
    const text = env[variable];
    if (text === undefined || !variable.startsWith(ENV_PREFIX)) continue;
    const descriptor = byVariable.get(variable);
    if (!descriptor) {
      const rest = variable.slice(ENV_PREFIX.length);
      const parts = rest.split('__');
      if (parts.length > 1 && tables.has(parts[0]!)) {
        const path = parts.map((p) => p.toLowerCase());
        issues.push({
          kind: 'unknown-key',
          key: path.join('.'),
          message: unknownKeyMessage(configSchema, path),
          source: { kind: 'env', variable },
        });
      }
      continue;
    }
    const parsed = parseEnvValue(descriptor, text);
    if ('error' in parsed) {
      issues.push({
        kind: 'type',
        key: descriptor.key,
        message: parsed.error,
        source: { kind: 'env', variable },
      });
      continue;
    }
    let target = values;
    for (const segment of descriptor.path.slice(0, -1)) {
      const next = target[segment];
      if (typeof next === 'object' && next !== null) target = next as Record<string, unknown>;
      else {
        const created: Record<string, unknown> = {};
        target[segment] = created;
        target = created;
      }
    }
    target[descriptor.path.at(-1)!] = parsed.value;
    variables.set(descriptor.key, variable);
  }
  return { values, variables, issues };
}

function parseEnvValue(
  descriptor: ConfigKeyDescriptor,
  text: string,
): { value: unknown } | { error: string } {
  const trimmed = text.trim();
  switch (descriptor.kind) {
    case 'string':
    case 'enum':
      return { value: text };
    case 'integer':
    case 'number':
      return NUMBER.test(trimmed)
        ? { value: Number(trimmed) }
        : { error: `expected ${descriptor.kind === 'integer' ? 'an integer' : 'a number'}, got '${text}'` };
    case 'boolean': {
      const lower = trimmed.toLowerCase();
      if (TRUE.has(lower)) return { value: true };
      if (FALSE.has(lower)) return { value: false };
      return { error: `expected a boolean (true/false, 1/0, yes/no, on/off), got '${text}'` };
    }
    case 'array': {
      if (trimmed.startsWith('[')) return parseJson(trimmed, 'array');
      if (trimmed === '') return { value: [] };
      const element = defOf(unwrap(defOf(unwrap(descriptor.schema)).element!)).type;
      const parts = trimmed.split(',').map((p) => p.trim());
      if (element !== 'number') return { value: parts };
      const bad = parts.find((p) => !NUMBER.test(p));
      return bad === undefined
        ? { value: parts.map(Number) }
        : { error: `expected a list of numbers, got '${bad}'` };
    }
    case 'table':
      return parseJson(trimmed, 'table');
  }
}

function parseJson(text: string, expected: 'array' | 'table'): { value: unknown } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `expected JSON (${expected}): ${(err as Error).message}` };
  }
  const ok =
    expected === 'array'
      ? Array.isArray(value)
      : typeof value === 'object' && value !== null && !Array.isArray(value);
  return ok ? { value } : { error: `expected a JSON ${expected === 'array' ? 'array' : 'object'}` };
}

/**
 * `MOCRA_*` variables that are not config keys but are read by other parts of mocra: logging,
 * the distributed runtime and the Raft cluster, the browser downloader.
 */
export const OTHER_ENV_VARIABLES: readonly string[] = [
  'MOCRA_LOG_LEVEL',
  'MOCRA_DISABLE_LOGS',
  'MOCRA_QUEUE',
  'MOCRA_COORDINATION',
  'MOCRA_RUN_ID',
  'MOCRA_NODE_ID',
  'MOCRA_HTTP_ADDR',
  'MOCRA_DATA_DIR',
  'MOCRA_SEEDS',
  'MOCRA_CLUSTER_SECRET',
  'MOCRA_CHROMIUM_PATH',
];

/** Set aside for test suites (their fixture URLs and services); never read by mocra itself. */
const TEST_PREFIX = 'MOCRA_TEST_';

/** A `MOCRA_*` variable nothing reads, and the known name closest to it. */
export interface UnknownEnvVariable {
  variable: string;
  suggestion?: string;
  /** One line for a person: `MOCRA_CRAWLR__TASK_CONCURRENCY is not a mocra variable (did you mean …?)`. */
  message: string;
}

/**
 * The `MOCRA_*` variables of `env` that are neither config keys nor read by another part of
 * mocra — almost always a typo, which would otherwise change nothing without a word. A
 * misspelt key of a known table is not listed here: readEnvOverrides refuses it.
 */
export function unknownEnvVariables(env: Readonly<Record<string, string | undefined>>): UnknownEnvVariable[] {
  if (!setsMocraVariable(env)) return [];
  const known = new Set<string>([...configKeys().map((d) => d.env), ...OTHER_ENV_VARIABLES]);
  const tables = new Set(
    configKeys()
      .filter((d) => d.path.length > 1)
      .map((d) => d.path[0]!.toUpperCase()),
  );
  const out: UnknownEnvVariable[] = [];
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith(ENV_PREFIX) || env[variable] === undefined) continue;
    if (known.has(variable) || variable.startsWith(TEST_PREFIX)) continue;
    const parts = variable.slice(ENV_PREFIX.length).split('__');
    if (parts.length > 1 && tables.has(parts[0]!)) continue;
    const suggestion = suggest(variable, [...known]);
    out.push({
      variable,
      ...(suggestion === undefined ? {} : { suggestion }),
      message: `${variable} is not a mocra variable and is ignored${suggestion === undefined ? '' : ` (did you mean ${suggestion}?)`}`,
    });
  }
  return out;
}

/**
 * Whether any `MOCRA_*` variable is set (`MOCRA_TEST_*` are the test suites' own). Most runs set
 * none, and then neither reader needs the key table, whose schemas (and zod) would otherwise
 * load at every start.
 */
function setsMocraVariable(env: Readonly<Record<string, string | undefined>>): boolean {
  for (const variable in env) {
    if (variable.startsWith(ENV_PREFIX) && !variable.startsWith(TEST_PREFIX) && env[variable] !== undefined) {
      return true;
    }
  }
  return false;
}

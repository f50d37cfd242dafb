import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { InvalidInputError, SeedFileError } from '../errors.js';
import type { EntityInputMap, EntityKind, LinkInputMap, LinkKind } from '../model/entities.js';
import { isPlainObject, type JsonObject, jsonTypeOf } from '../model/json.js';
import {
  checkBoolean,
  checkInt32,
  checkName,
  checkNullableString,
  checkObject,
  checkStringArray,
} from '../model/validate.js';

interface RelationSeed {
  enabled?: boolean;
  priority?: number;
  config?: JsonObject;
}

/**
 * A seed document — the shape of a seed file (TOML or JSON), with snake_case keys like the
 * database columns. Every section is optional; entities are upserted by name, relations by the
 * pair of names, in one transaction. Nothing that is absent from the document is deleted.
 */
export interface SeedData {
  accounts?: {
    name: string;
    modules?: string[];
    enabled?: boolean;
    priority?: number;
    config?: JsonObject;
  }[];
  platforms?: {
    name: string;
    description?: string | null;
    base_url?: string | null;
    enabled?: boolean;
    config?: JsonObject;
  }[];
  modules?: { name: string; enabled?: boolean; priority?: number; version?: number; config?: JsonObject }[];
  download_middleware?: { name: string; weight?: number; enabled?: boolean; config?: JsonObject }[];
  data_middleware?: { name: string; weight?: number; enabled?: boolean; config?: JsonObject }[];
  account_platforms?: ({ account: string; platform: string } & RelationSeed)[];
  module_accounts?: ({ module: string; account: string } & RelationSeed)[];
  module_platforms?: ({ module: string; platform: string } & RelationSeed)[];
  module_download_middleware?: ({ module: string; middleware: string } & RelationSeed)[];
  module_data_middleware?: ({ module: string; middleware: string } & RelationSeed)[];
}

/** How many rows each section upserted (unchanged rows count too). */
export type SeedReport = { [K in keyof SeedData]-?: number };

type FieldCheck = (value: unknown, key: string) => unknown;

interface Section {
  /** Entity or link kind it feeds. */
  kind: EntityKind | LinkKind;
  link: boolean;
  /** file key → [API property, check]. */
  fields: Record<string, [string, FieldCheck]>;
  /** File keys that must be present. */
  required: string[];
}

const relationFields: Record<string, [string, FieldCheck]> = {
  enabled: ['enabled', checkBoolean],
  priority: ['priority', checkInt32],
  config: ['config', checkObject],
};

const middlewareFields: Record<string, [string, FieldCheck]> = {
  name: ['name', checkName],
  weight: ['weight', checkInt32],
  enabled: ['enabled', checkBoolean],
  config: ['config', checkObject],
};

/** Sections in the order they are applied: entities before the relations that name them. */
const SECTIONS: Record<keyof SeedData, Section> = {
  accounts: {
    kind: 'account',
    link: false,
    required: ['name'],
    fields: {
      name: ['name', checkName],
      modules: ['modules', checkStringArray],
      enabled: ['enabled', checkBoolean],
      priority: ['priority', checkInt32],
      config: ['config', checkObject],
    },
  },
  platforms: {
    kind: 'platform',
    link: false,
    required: ['name'],
    fields: {
      name: ['name', checkName],
      description: ['description', checkNullableString],
      base_url: ['baseUrl', checkNullableString],
      enabled: ['enabled', checkBoolean],
      config: ['config', checkObject],
    },
  },
  modules: {
    kind: 'module',
    link: false,
    required: ['name'],
    fields: {
      name: ['name', checkName],
      enabled: ['enabled', checkBoolean],
      priority: ['priority', checkInt32],
      version: ['version', checkInt32],
      config: ['config', checkObject],
    },
  },
  download_middleware: {
    kind: 'download_middleware',
    link: false,
    required: ['name'],
    fields: middlewareFields,
  },
  data_middleware: { kind: 'data_middleware', link: false, required: ['name'], fields: middlewareFields },
  account_platforms: {
    kind: 'account_platform',
    link: true,
    required: ['account', 'platform'],
    fields: { account: ['account', checkName], platform: ['platform', checkName], ...relationFields },
  },
  module_accounts: {
    kind: 'module_account',
    link: true,
    required: ['module', 'account'],
    fields: { module: ['module', checkName], account: ['account', checkName], ...relationFields },
  },
  module_platforms: {
    kind: 'module_platform',
    link: true,
    required: ['module', 'platform'],
    fields: { module: ['module', checkName], platform: ['platform', checkName], ...relationFields },
  },
  module_download_middleware: {
    kind: 'module_download_middleware',
    link: true,
    required: ['module', 'middleware'],
    fields: { module: ['module', checkName], middleware: ['middleware', checkName], ...relationFields },
  },
  module_data_middleware: {
    kind: 'module_data_middleware',
    link: true,
    required: ['module', 'middleware'],
    fields: { module: ['module', checkName], middleware: ['middleware', checkName], ...relationFields },
  },
};

export const SEED_SECTIONS = Object.keys(SECTIONS) as (keyof SeedData)[];

/** One validated entry, with the path it came from (`modules[2]`) for error messages. */
export type SeedStep =
  | { section: keyof SeedData; key: string; link: false; kind: EntityKind; input: EntityInputMap[EntityKind] }
  | { section: keyof SeedData; key: string; link: true; kind: LinkKind; input: LinkInputMap[LinkKind] };

/**
 * Validates a seed document (from a file or code) and returns the upserts to run, entities first.
 * Every error is an {@link InvalidInputError} whose key is the path of the bad value.
 */
export function planSeed(data: unknown): SeedStep[] {
  if (!isPlainObject(data))
    throw new InvalidInputError('(root)', `expected an object, got ${jsonTypeOf(data)}`);
  for (const key of Object.keys(data)) {
    if (!(key in SECTIONS)) {
      throw new InvalidInputError(key, `unknown section; expected one of ${SEED_SECTIONS.join(', ')}`);
    }
  }
  const steps: SeedStep[] = [];
  for (const section of SEED_SECTIONS) {
    const spec = SECTIONS[section];
    const entries = data[section];
    if (entries === undefined) continue;
    if (!Array.isArray(entries)) {
      throw new InvalidInputError(section, `expected an array of tables, got ${jsonTypeOf(entries)}`);
    }
    const seen = new Map<string, string>();
    entries.forEach((entry: unknown, index: number) => {
      const at = `${section}[${index}]`;
      if (!isPlainObject(entry))
        throw new InvalidInputError(at, `expected a table, got ${jsonTypeOf(entry)}`);
      for (const required of spec.required) {
        if (entry[required] === undefined) throw new InvalidInputError(`${at}.${required}`, 'is required');
      }
      const input: Record<string, unknown> = {};
      for (const [fileKey, value] of Object.entries(entry)) {
        const field = spec.fields[fileKey];
        if (field === undefined) {
          throw new InvalidInputError(
            `${at}.${fileKey}`,
            `unknown key; expected one of ${Object.keys(spec.fields).join(', ')}`,
          );
        }
        input[field[0]] = field[1](value, `${at}.${fileKey}`);
      }
      const identity = spec.required.map((k) => String(input[spec.fields[k]![0]])).join(' × ');
      const first = seen.get(identity);
      if (first !== undefined) throw new InvalidInputError(at, `duplicate of ${first} ('${identity}')`);
      seen.set(identity, at);
      steps.push(
        spec.link
          ? {
              section,
              key: at,
              link: true,
              kind: spec.kind as LinkKind,
              input: input as unknown as LinkInputMap[LinkKind],
            }
          : {
              section,
              key: at,
              link: false,
              kind: spec.kind as EntityKind,
              input: input as unknown as EntityInputMap[EntityKind],
            },
      );
    });
  }
  return steps;
}

/** Parses seed text as TOML or JSON. `format` defaults to a guess from the first character. */
export function parseSeedText(text: string, source: string, format?: 'toml' | 'json'): unknown {
  const kind = format ?? (text.trimStart().startsWith('{') ? 'json' : 'toml');
  try {
    return kind === 'json' ? (JSON.parse(text) as unknown) : parseToml(text);
  } catch (err) {
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new SeedFileError(source, `not valid ${kind.toUpperCase()}: ${why}`, { cause: err });
  }
}

/** Reads and parses a seed file; the format follows the extension (`.toml`, `.json`), else a guess. */
export async function readSeedFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new SeedFileError(path, `cannot read it (${typeof code === 'string' ? code : String(err)})`, {
      cause: err,
    });
  }
  const ext = extname(path).toLowerCase();
  return parseSeedText(text, path, ext === '.toml' ? 'toml' : ext === '.json' ? 'json' : undefined);
}

export function emptySeedReport(): SeedReport {
  return Object.fromEntries(SEED_SECTIONS.map((s) => [s, 0])) as SeedReport;
}

/**
 * String case conversion for field names and slugs, on change-case (which splits words the
 * way people read them: `XMLHttpRequest` → `xml_http_request`, `version2Name` → `version_2_name`).
 */
import {
  camelCase,
  capitalCase,
  constantCase,
  dotCase,
  kebabCase,
  noCase,
  pascalCase,
  pathCase,
  sentenceCase,
  snakeCase,
  trainCase,
} from 'change-case';
import { InvalidArgumentError } from '../../errors.js';

const CASES = {
  camel: camelCase,
  pascal: pascalCase,
  snake: snakeCase,
  kebab: kebabCase,
  constant: constantCase,
  dot: dotCase,
  path: pathCase,
  sentence: sentenceCase,
  capital: capitalCase,
  train: trainCase,
  no: noCase,
} as const;

/** The case styles `toCase` knows: `camel` (fooBar), `snake` (foo_bar), `kebab` (foo-bar), … */
export type CaseStyle = keyof typeof CASES;

export const CASE_STYLES = Object.keys(CASES) as CaseStyle[];

/** `text` in the case `style`. */
export function toCase(text: string, style: CaseStyle): string {
  const convert = CASES[style];
  if (!convert)
    throw new InvalidArgumentError(
      `toCase: unknown case style '${String(style)}' (${CASE_STYLES.join(', ')})`,
    );
  return convert(text);
}

/** A copy of `record` with its own keys (not nested ones) in `style`; later keys win a clash. */
export function keysToCase<TValue>(
  record: Readonly<Record<string, TValue>>,
  style: CaseStyle,
): Record<string, TValue> {
  const out: Record<string, TValue> = {};
  for (const [key, value] of Object.entries(record)) out[toCase(key, style)] = value;
  return out;
}

export { camelCase, capitalCase, constantCase, dotCase, kebabCase, pascalCase, sentenceCase, snakeCase };

/**
 * Module hooks `mocra run` registers (node:module `register`) before it imports a spider file,
 * so that a file runs wherever it is, with or without a project around it:
 *
 * - `mocra`, `mocra/…` and `@mocra/…` resolve from the file's own project first, and when it
 *   has no such package, from the installation of the `mocra` command that runs it.
 * - A TypeScript file written with `import`/`export` is loaded as an ES module when its
 *   package.json says no `"type"` (or there is none). Left alone, it would be compiled to
 *   CommonJS, which cannot load mocra (an ES module) and fails with "Cannot require() ES
 *   Module … in a cycle". A package that says `"type": "commonjs"` is obeyed.
 *
 * Loaded in Node's hooks thread: it imports nothing but node built-ins.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ResolveContext {
  parentURL?: string;
  conditions?: readonly string[];
  importAttributes?: Record<string, string>;
}

interface ResolveResult {
  url: string;
  format?: string | null;
  shortCircuit?: boolean;
}

type NextResolve = (specifier: string, context?: ResolveContext) => Promise<ResolveResult>;

const OWN_PACKAGES = /^(?:mocra|@mocra\/[a-z0-9-]+)(?:\/|$)/;
const TYPESCRIPT = /\.tsx?$/i;
const ESM_SYNTAX = /^\s*(?:import\s*[\w{*'"]|export\s)/m;
/** This file is inside the `mocra` package: from here `mocra` resolves to itself. */
const OWN_URL = import.meta.url;

export async function resolve(
  specifier: string,
  context: ResolveContext,
  next: NextResolve,
): Promise<ResolveResult> {
  let result: ResolveResult;
  try {
    result = await next(specifier, context);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND' || !OWN_PACKAGES.test(specifier))
      throw err;
    result = await next(specifier, { ...context, parentURL: OWN_URL });
  }
  if ((result.format === 'commonjs' || result.format == null) && isUntypedTypeScript(result.url))
    return { ...result, format: 'module' };
  return result;
}

function isUntypedTypeScript(url: string): boolean {
  if (!url.startsWith('file:') || !TYPESCRIPT.test(url) || url.includes('/node_modules/')) return false;
  const file = fileURLToPath(url);
  if (packageTypeOf(path.dirname(file)) !== undefined) return false;
  try {
    return ESM_SYNTAX.test(fs.readFileSync(file, 'utf8'));
  } catch {
    return false;
  }
}

const typeByDir = new Map<string, string | undefined>();

/** The `"type"` of the nearest package.json above `dir` (undefined: none says). */
function packageTypeOf(dir: string): string | undefined {
  if (typeByDir.has(dir)) return typeByDir.get(dir);
  let type: string | undefined;
  const manifest = path.join(dir, 'package.json');
  if (fs.existsSync(manifest)) {
    try {
      const value = (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { type?: unknown }).type;
      type = typeof value === 'string' ? value : undefined;
    } catch {
      type = undefined;
    }
  } else {
    const parent = path.dirname(dir);
    type = parent === dir ? undefined : packageTypeOf(parent);
  }
  typeByDir.set(dir, type);
  return type;
}

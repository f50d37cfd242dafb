/**
 * Loading what `mocra run <file>` runs: a spider (what `defineSpider()` returns, or a plain
 * definition) or a module (what `defineModule()` returns: `nodes`, `steps` or `graph`).
 *
 * The file is the module's default export, else its `spider` or `module` export, else its only
 * export that looks like one of them. TypeScript is compiled on import by tsx. The file may sit
 * anywhere: `mocra` resolves from the file's own project first and from this CLI's
 * installation otherwise (spider-hooks.ts).
 */
import fs from 'node:fs';
import { register as registerHooks } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { defineModule, type Module } from '@mocra/core';
import { SpiderLoadError } from '../errors.js';
import { defineSpider, type Spider, type SpiderDefinition } from '../spider.js';

/** What a file exports to run. */
export type Runnable =
  | { kind: 'spider'; name: string; spider: Spider<unknown> }
  | { kind: 'module'; name: string; module: Module<unknown> };

const TS = /\.(c|m)?tsx?$/i;

function looksLikeSpider(value: unknown): value is SpiderDefinition<unknown> {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.name === 'string' &&
    typeof v.parse === 'function' &&
    (typeof v.start === 'function' || Array.isArray(v.startUrls))
  );
}

function looksLikeModule(value: unknown): value is Module<unknown> {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.name === 'string' &&
    (Array.isArray(v.nodes) ||
      Array.isArray(v.steps) ||
      // `dag` too: it is the graph's former key, and registering the module says so.
      [v.graph, v.dag].some((g) => typeof g === 'object' && g !== null))
  );
}

const looksRunnable = (value: unknown) => looksLikeSpider(value) || looksLikeModule(value);

/** Import the file and find what it runs (see the module comment). */
export async function loadRunnable(file: string): Promise<Runnable> {
  const abs = path.resolve(file);
  if (!fs.existsSync(abs) || !fs.statSync(abs).isFile()) throw new SpiderLoadError(file, 'no such file');
  let mod: Record<string, unknown>;
  try {
    await installHooks(TS.test(abs));
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (err) {
    throw new SpiderLoadError(file, `importing it failed: ${describe(err)}`, { cause: err });
  }
  const named = [mod.default, mod.spider, mod.module].find(looksRunnable);
  const others = [...new Set(Object.values(mod).filter(looksRunnable))];
  if (named === undefined && others.length === 0) {
    throw new SpiderLoadError(
      file,
      'it exports no spider or module (export default defineSpider({ name, startUrls or start, parse }), or defineModule({ name, nodes }))',
    );
  }
  if (named === undefined && others.length > 1) {
    throw new SpiderLoadError(
      file,
      `it exports ${others.length} spiders or modules; export the one to run as default`,
    );
  }
  const chosen = named ?? others[0];
  try {
    if (looksLikeSpider(chosen)) {
      const spider =
        typeof chosen.start === 'function' && !('startUrls' in chosen)
          ? (chosen as Spider<unknown>)
          : defineSpider(chosen);
      return { kind: 'spider', name: spider.name, spider };
    }
    const module = defineModule(chosen as Module<unknown>);
    return { kind: 'module', name: module.name, module };
  } catch (err) {
    throw new SpiderLoadError(file, describe(err), { cause: err });
  }
}

let installed: Promise<void> | undefined;

/** tsx's loader (for TypeScript), then ours on top of it; once per process. */
function installHooks(typescript: boolean): Promise<void> {
  installed ??= (async () => {
    if (typescript) {
      const { register } = await import('tsx/esm/api');
      register();
    }
    // Registered last, so it runs first and can correct what tsx resolves.
    registerHooks(hooksUrl());
  })();
  return installed;
}

/** spider-hooks.js beside the built CLI; its .ts source when the CLI runs from source. */
function hooksUrl(): URL {
  const built = new URL('./spider-hooks.js', import.meta.url);
  return fs.existsSync(built) ? built : new URL('./spider-hooks.ts', import.meta.url);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

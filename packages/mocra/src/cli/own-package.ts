/**
 * The installed `mocra` package the CLI runs from: its directory and manifest. `mocra --version`
 * reports it and `mocra create` writes its version (or links to its repository) into new projects.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface OwnPackage {
  /** The package's directory (the one holding its package.json). */
  dir: string;
  version: string;
  dependencies: Readonly<Record<string, string>>;
}

let cached: OwnPackage | undefined;

export function ownPackage(): OwnPackage {
  if (cached !== undefined) return cached;
  // dist/cli.js and src/cli/*.ts sit at different depths in the package.
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const dir of [path.resolve(here, '..'), path.resolve(here, '../..')]) {
    let manifest: { name?: string; version?: string; dependencies?: Record<string, string> };
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as typeof manifest;
    } catch {
      continue; // not at this depth
    }
    if (manifest.name !== 'mocra') continue;
    cached = { dir, version: manifest.version ?? 'unknown', dependencies: manifest.dependencies ?? {} };
    return cached;
  }
  cached = { dir: path.resolve(here, '..'), version: 'unknown', dependencies: {} };
  return cached;
}

/** A build from a clone of the repository: never released, so no registry has its version. */
export function isUnreleased(pkg: OwnPackage): boolean {
  return pkg.version === '0.0.0';
}

/**
 * `mocra create <dir>`: write a new crawler project (create-template.ts) and say what to run next.
 *
 * Its dependencies are the registry ranges of the running release, or — with `--link <clone>`,
 * or when this CLI is itself an unreleased build inside a clone of the repository — `file:`
 * links to that clone's built packages, so the project installs without the registry.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { CliUsageError, ProjectNotEmptyError } from '../errors.js';
import { projectFiles, type TemplateDeps } from './create-template.js';
import type { CliIo } from './execute.js';
import { isUnreleased, ownPackage } from './own-package.js';

export interface CreateFlags {
  /** A clone of the mocra repository (built) whose packages the project links to. */
  link?: string;
  /** Write into a directory that is not empty, replacing the files the template writes. */
  force: boolean;
}

/** Ranges of the tools a project of a published release installs from the registry. */
const TOOL_RANGES = { typescript: '^5.9.3', '@types/node': '^20.19.0' } as const;

export function createCommand(dir: string, flags: CreateFlags, io: CliIo): number {
  const target = path.resolve(dir);
  if (fs.existsSync(target)) {
    if (!fs.statSync(target).isDirectory()) throw new CliUsageError(`'${dir}' exists and is not a directory`);
    if (!flags.force && fs.readdirSync(target).length > 0) throw new ProjectNotEmptyError(dir);
  }
  const pkg = ownPackage();
  const clone = flags.link === undefined ? workspaceOf(pkg.dir) : checkClone(flags.link);
  const deps = clone === undefined ? registryDeps(pkg.version, pkg.dependencies) : linkedDeps(clone);
  const name = packageName(target);
  const files = projectFiles(name, deps);
  for (const file of files) {
    const abs = path.join(target, file.path);
    fs.mkdirSync(path.dirname(abs), { recursive: true });
    fs.writeFileSync(abs, file.text);
  }
  const from = clone === undefined ? `mocra ${pkg.version} from the registry` : `mocra linked from ${clone}`;
  io.stdout.write(
    `Created ${name} in ${target} (${from}):\n` +
      files.map((f) => `  ${f.path}\n`).join('') +
      '\nNext:\n' +
      `  cd ${dir}\n` +
      '  npm install\n' +
      '  npm test                                   # the spider against the offline fixture site\n' +
      '  npm run site                               # the fixture site on :8080, then in another shell:\n' +
      '  npx mocra run src/spider.ts --out books.jsonl\n',
  );
  return 0;
}

function registryDeps(version: string, own: Readonly<Record<string, string>>): TemplateDeps {
  const range = `^${version}`;
  return {
    mocra: range,
    '@mocra/testkit': range,
    tsx: own.tsx ?? '^4.0.0',
    ...TOOL_RANGES,
  };
}

/**
 * Links to the clone's packages. The tools come from the clone too (its node_modules, found the
 * way Node finds them), so `npm install` only creates links.
 */
function linkedDeps(clone: string): TemplateDeps {
  const fromMocra = createRequire(path.join(clone, 'packages/mocra/package.json'));
  const fromRoot = createRequire(path.join(clone, 'package.json'));
  const dirOf = (require: NodeJS.Require, name: string) => {
    try {
      return `file:${path.dirname(require.resolve(`${name}/package.json`))}`;
    } catch (err) {
      throw new CliUsageError(
        `--link ${clone}: cannot find ${name} in its node_modules (run pnpm install there): ${(err as Error).message}`,
      );
    }
  };
  return {
    mocra: `file:${path.join(clone, 'packages/mocra')}`,
    '@mocra/testkit': `file:${path.join(clone, 'packages/testkit')}`,
    tsx: dirOf(fromMocra, 'tsx'),
    typescript: dirOf(fromRoot, 'typescript'),
    '@types/node': dirOf(fromRoot, '@types/node'),
  };
}

/** The clone `--link` names, checked: its mocra and testkit packages are there and built. */
function checkClone(dir: string): string {
  const clone = path.resolve(dir);
  for (const built of ['packages/mocra/dist/cli.js', 'packages/testkit/dist/index.js']) {
    if (!fs.existsSync(path.join(clone, built))) {
      throw new CliUsageError(
        `--link ${dir}: no ${built} there (give a clone of the mocra repository after pnpm install && pnpm build)`,
      );
    }
  }
  return clone;
}

/** The clone this CLI is an unreleased build of (packages/mocra inside a pnpm workspace), if any. */
function workspaceOf(packageDir: string): string | undefined {
  const pkg = ownPackage();
  if (!isUnreleased(pkg)) return undefined;
  const root = path.resolve(packageDir, '../..');
  if (path.basename(path.dirname(packageDir)) !== 'packages') return undefined;
  if (!fs.existsSync(path.join(root, 'pnpm-workspace.yaml'))) return undefined;
  return checkClone(root);
}

/** An npm package name from the directory's name: lower case, URL-safe characters only. */
function packageName(dir: string): string {
  const name = path
    .basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9._~-]+/g, '-')
    .replace(/^[._-]+/, '');
  return name === '' ? 'crawler' : name.slice(0, 214);
}

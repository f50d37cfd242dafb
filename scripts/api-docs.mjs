#!/usr/bin/env node
// Builds the API reference with TypeDoc (typedoc.json: one module per public package, written to
// site/api/; a package's own typedoc.json lists its subpath entry points) and checks what it
// built: typedoc.json lists exactly the public packages, each got its page, one module page per
// entry point of its package.json exports (`./internal` has no semver promise and no page), and
// every export listed has a page of its own. TypeDoc itself fails on any warning (a broken
// {@link}, a bad tag); types that public signatures use without exporting them are not warned
// about (the notExported check is off: many are internal on purpose).
//
// Run after `pnpm build`: a package's imports of the other packages resolve to their built
// declarations (tsconfig.build.json), as they do for users.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const config = JSON.parse(fs.readFileSync(path.join(root, 'typedoc.json'), 'utf8'));
const out = path.join(root, config.out);

const publicPackages = fs
  .readdirSync(path.join(root, 'packages'))
  .map((d) => `packages/${d}`)
  .filter((d) => {
    const file = path.join(root, d, 'package.json');
    return fs.existsSync(file) && !JSON.parse(fs.readFileSync(file, 'utf8')).private;
  })
  .sort();

const problems = [];
const listed = [...config.entryPoints].sort();
for (const d of publicPackages.filter((p) => !listed.includes(p))) {
  problems.push(`${d} is a public package but typedoc.json does not list it`);
}
for (const d of listed.filter((p) => !publicPackages.includes(p))) {
  problems.push(`typedoc.json lists ${d}, which is not a public package`);
}
for (const d of publicPackages) {
  if (!fs.existsSync(path.join(root, d, 'dist')))
    problems.push(`${d}/dist is missing: run \`pnpm build\` first`);
}
if (problems.length > 0) fail(problems);

fs.rmSync(out, { recursive: true, force: true });
const started = Date.now();
const run = spawnSync('pnpm', ['exec', 'typedoc', '--logLevel', 'Warn'], { cwd: root, stdio: 'inherit' });
if (run.status !== 0) fail([`typedoc exited with ${run.status ?? run.signal}`]);

const counts = [];
for (const d of publicPackages) {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, d, 'package.json'), 'utf8'));
  const { name } = manifest;
  const page = pageOf(name);
  if (!fs.existsSync(page)) {
    problems.push(`${name}: no page at ${path.relative(root, page)}`);
    continue;
  }
  const html = fs.readFileSync(page, 'utf8');
  if (!html.includes(`<title>${name} |`))
    problems.push(`${name}: ${path.relative(root, page)} is not its page`);
  // A package with several entry points (its subpaths) has one module page per entry point.
  const slug = path.basename(page, '.html');
  const children = [...new Set([...html.matchAll(/href="([^"#/]+\.html)"/g)].map((m) => m[1]))].filter((f) =>
    f.startsWith(`${slug}.`),
  );
  const subpaths = Object.keys(manifest.exports ?? {}).filter(
    (k) => k !== './package.json' && k !== './internal',
  );
  if (subpaths.length > 1 && children.length !== subpaths.length) {
    problems.push(
      `${name}: ${subpaths.length} entry points in package.json exports (${subpaths.join(', ')}) but ${children.length} module pages; list them in ${d}/typedoc.json`,
    );
  }
  // Its exports: each listed with a page of its own. None means a wrong entry point.
  const links = new Set();
  for (const file of [page, ...children.map((c) => path.join(path.dirname(page), c))]) {
    if (!fs.existsSync(file)) {
      problems.push(`${name}: ${path.relative(root, file)} was not written`);
      continue;
    }
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(
      /href="\.\.\/((?:classes|enums|functions|interfaces|types|variables)\/[^"#]+\.html)/g,
    )) {
      links.add(m[1]);
    }
  }
  if (links.size === 0) problems.push(`${name}: its page lists no exports`);
  for (const link of [...links].filter((l) => !fs.existsSync(path.join(out, l)))) {
    problems.push(`${name}: its page links to ${link}, which was not written`);
  }
  counts.push(`${name} ${links.size}`);
}
if (problems.length > 0) fail(problems);
console.log(
  `api-docs: ${publicPackages.length} packages documented in ${path.relative(root, out)}/ in ${Math.round((Date.now() - started) / 1000)} s (exports: ${counts.join(', ')}); open ${path.relative(root, path.join(out, 'index.html'))}`,
);

/** Where TypeDoc writes a package's page (its module page in a packages build). */
function pageOf(name) {
  return path.join(out, 'modules', `${name.replace(/[^a-z0-9]/gi, '_')}.html`);
}

function fail(lines) {
  for (const line of lines) console.error(`api-docs: ${line}`);
  process.exit(1);
}

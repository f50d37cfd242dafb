#!/usr/bin/env node
// Keeps the package graph (ALLOWED below: each package may import only those under it) honest. Fails (exit 1) when a package
//  - imports a mocra package that is not below it (upward or sideways),
//  - imports another package's `src/` directly instead of its public entry,
//  - imports a package it does not declare in package.json,
//  - reaches into another package with a relative path (a test may import another package's
//    test/*conformance* suite: the one contract suite run against every implementation), or
//  - forms an import cycle (between packages, or between files of one package;
//    `import type` is erased at build time and does not count).
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

/** Which mocra packages each package may import at runtime. Arrows point down only. */
const ALLOWED = {
  mocra: ['@mocra/core', '@mocra/dag', '@mocra/cluster', '@mocra/proxy', '@mocra/store'],
  '@mocra/core': ['@mocra/dag', '@mocra/cluster', '@mocra/proxy', '@mocra/store'],
  '@mocra/dag': [],
  '@mocra/cluster': [],
  '@mocra/proxy': [],
  '@mocra/store': [],
  '@mocra/testkit': [],
};
/** Workspaces that sit on top of everything (tests, benchmarks, examples): no direction rule. */
const TOP = new Set(['@mocra/tests', '@mocra/bench', '@mocra/examples']);
/** Test code may use the fixture site from any package (it is a dev dependency only). */
const TEST_ONLY = ['@mocra/testkit'];

const workspaces = [
  ...fs.readdirSync(path.join(root, 'packages')).map((d) => path.join(root, 'packages', d)),
  path.join(root, 'bench'),
  path.join(root, 'examples'),
].filter((d) => fs.existsSync(path.join(d, 'package.json')));

const pkgs = workspaces.map((dir) => {
  const json = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const declared = new Set(
    ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap((k) =>
      Object.keys(json[k] ?? {}),
    ),
  );
  return { dir, name: json.name, declared };
});
const byName = new Map(pkgs.map((p) => [p.name, p]));

const SKIP_DIRS = new Set(['node_modules', 'dist', '.turbo', 'coverage', 'test-output', 'results']);
function* sourceFiles(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) yield* sourceFiles(path.join(dir, entry.name));
    } else if (/\.(m|c)?[jt]sx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      yield path.join(dir, entry.name);
    }
  }
}

// Good enough for our own code: static imports/exports, dynamic import(), require().
const IMPORT_RE =
  /(?:^|[\n;])\s*(import|export)\s+(type\s+)?(?:[^'"`;]*?\s+from\s+)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)|\brequire\(\s*['"]([^'"]+)['"]\s*\)/g;

function importsOf(file) {
  const text = fs
    .readFileSync(file, 'utf8')
    // Template literals hold text, not imports: the source of a generated file (mocra create)
    // has import lines of its own. Removed first, as they may hold comment markers.
    .replace(/`(?:\\[\s\S]|[^`\\])*`/g, '``')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
  const out = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const spec = m[3] ?? m[4] ?? m[5];
    if (spec) out.push({ spec, typeOnly: Boolean(m[2]) });
  }
  return out;
}

function packageOf(spec) {
  if (spec === 'mocra' || spec.startsWith('mocra/')) return { name: 'mocra', sub: spec.slice(5) };
  const m = /^(@mocra\/[^/]+)(\/.*)?$/.exec(spec);
  return m ? { name: m[1], sub: m[2] ?? '' } : null;
}

const problems = [];
const pkgEdges = new Map(pkgs.map((p) => [p.name, new Set()]));
const fileGraphs = new Map();

for (const pkg of pkgs) {
  const graph = new Map();
  fileGraphs.set(pkg.name, graph);
  for (const file of sourceFiles(pkg.dir)) {
    const rel = path.relative(root, file);
    const isTest = /\.test\.[cm]?[jt]s$/.test(file) || rel.includes(`${path.sep}test${path.sep}`);
    const edges = [];
    graph.set(file, edges);
    for (const { spec, typeOnly } of importsOf(file)) {
      if (spec.startsWith('.')) {
        const target = path.resolve(path.dirname(file), spec);
        if (!target.startsWith(pkg.dir + path.sep)) {
          // One exception: a test may run another package's conformance suite, which lives in
          // that package's test/ folder (it imports vitest, so it is not part of any export).
          const sharedSuite =
            isTest && /[/\\]packages[/\\][^/\\]+[/\\]test[/\\][^/\\]*conformance[^/\\]*$/.test(target);
          if (!sharedSuite) {
            problems.push(`${rel}: relative import '${spec}' leaves its package; import the package by name`);
          }
        } else if (!typeOnly) {
          edges.push(target.replace(/\.js$/, ''));
        }
        continue;
      }
      const target = packageOf(spec);
      if (!target) continue;
      if (/(^|\/)src(\/|$)/.test(target.sub)) {
        problems.push(`${rel}: '${spec}' reaches into another package's src/; use its public entry`);
      }
      if (target.name === pkg.name) {
        problems.push(`${rel}: '${spec}' imports its own package by name; use a relative import`);
        continue;
      }
      if (!byName.has(target.name)) {
        problems.push(`${rel}: '${spec}' names no workspace package`);
        continue;
      }
      if (!pkg.declared.has(target.name)) {
        problems.push(`${rel}: imports '${target.name}' but ${pkg.name} does not declare it in package.json`);
      }
      if (TOP.has(pkg.name)) continue;
      const allowed = ALLOWED[pkg.name] ?? [];
      const ok = allowed.includes(target.name) || (isTest && TEST_ONLY.includes(target.name));
      if (!ok) {
        problems.push(
          `${rel}: ${pkg.name} may not import ${target.name} (allowed: ${allowed.join(', ') || 'none'})`,
        );
      }
      if (!typeOnly && !isTest) pkgEdges.get(pkg.name).add(target.name);
    }
  }
}

/** Tarjan's strongly connected components; every component with more than one node is a cycle. */
function cycles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) found.push(comp);
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

for (const comp of cycles(pkgEdges)) problems.push(`package import cycle: ${comp.join(' -> ')}`);
for (const [name, graph] of fileGraphs) {
  // Normalize file keys to extension-less paths so `./x.js` edges meet `x.ts` files.
  const norm = new Map();
  for (const [file, edges] of graph) {
    norm.set(
      file.replace(/\.(m|c)?[jt]sx?$/, ''),
      edges.flatMap((e) => [e, `${e}/index`]),
    );
  }
  for (const comp of cycles(norm)) {
    problems.push(`import cycle in ${name}: ${comp.map((f) => path.relative(root, f)).join(' -> ')}`);
  }
}

if (problems.length > 0) {
  console.error(`check-deps: ${problems.length} problem(s)\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`check-deps: ${pkgs.length} workspaces, package graph as allowed, no cycles`);

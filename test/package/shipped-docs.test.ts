/**
 * What ships describes what ships (issue 25, item 6). The shipped file list is the package's own (`npm pack --dry-run`,
 * "files" in package.json), and the code that ships is every source file the package's build (tsconfig.build.json)
 * compiles into dist/, found by following its imports, comments included: TSDoc ends up in the .d.ts, comments in the
 * .js. Checked on that list, from outside the code:
 * - no shipped file cites "Part N" of the reference text, which a user does not have (a string or a comment states its
 *   reason itself);
 * - every name a shipped doc puts in code (`Name`, `Name.member`, an import from a package entry) that the repository
 *   declares is one the package exports (the API reports under etc/), and a member of an exported class or interface
 *   is in its report;
 * - every relative link of a shipped doc resolves to a shipped file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');
const PART = /\bParts? \d+/;

/** The package's files as `npm pack` would pack them (without building: dist/ is the build's, found below). */
function packedFiles(): string[] {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, `npm pack --dry-run failed: ${r.stderr}`);
  const [{ files }] = JSON.parse(r.stdout.slice(r.stdout.indexOf('['))) as { files: { path: string }[] }[];
  return files.map((f) => f.path);
}

/** Every source file the build compiles into dist/: its roots and every relative import they reach. */
function shippedSources(): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    path.join(ROOT, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  assert.ok(config, 'tsconfig.build.json parses');
  const seen = new Set<string>();
  const queue = config.fileNames.filter((f) => !f.endsWith('.d.ts'));
  while (queue.length > 0) {
    const file = path.resolve(queue.pop()!);
    if (seen.has(file)) continue;
    seen.add(file);
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const base = path.resolve(path.dirname(file), fileName);
      const found = [`${base}.ts`, path.join(base, 'index.ts'), base.replace(/\.js$/, '.ts')].find((f) => f.endsWith('.ts') && existsSync(f));
      if (found) queue.push(found);
    }
  }
  return [...seen].map((f) => path.relative(ROOT, f)).sort();
}

const packed = packedFiles();
const shippedDocs = packed.filter((f) => f.endsWith('.md'));
const sources = shippedSources();

test('the checker sees what ships: the README, the docs, and the sources of every entry', () => {
  assert.ok(shippedDocs.includes('README.md'), `the package ships README.md: ${shippedDocs.join(', ')}`);
  for (const entry of [
    'lib/core/index.ts',
    'lib/constructs/index.ts',
    'lib/lambda/entry.ts',
    'lib/sim/index.ts',
    'lib/postgres/index.ts',
    'lib/cli/bin.ts',
  ]) {
    assert.ok(sources.includes(entry), `the build compiles ${entry}`);
  }
});

test('no shipped file cites "Part N" of the reference text (users do not have it): docs, and every source that compiles to dist/', () => {
  const found = [...shippedDocs, ...sources].flatMap((f) =>
    readFileSync(path.join(ROOT, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (PART.test(line) ? [`${f}:${i + 1}: ${line.trim().slice(0, 140)}`] : [])),
  );
  assert.deepEqual(found, [], `${found.length} shipped lines cite a Part of the reference text`);
});

/** Every name the API reports export, and the text of each exported declaration (for its members). */
function exported(): { names: Set<string>; members: Set<string>; declarations: Map<string, string>; byEntry: Map<string, Set<string>> } {
  const reports: Record<string, string> = {
    fencepost: 'fencepost.api.md',
    'fencepost/constructs': 'fencepost-constructs.api.md',
    'fencepost/lambda': 'fencepost-lambda.api.md',
    'fencepost/sim': 'fencepost-sim.api.md',
    'fencepost/postgres': 'fencepost-postgres.api.md',
    'fencepost/election': 'fencepost-election.api.md',
    'fencepost/testing': 'fencepost-testing.api.md',
  };
  const names = new Set<string>();
  const members = new Set<string>();
  const declarations = new Map<string, string>();
  const byEntry = new Map<string, Set<string>>();
  for (const [entry, report] of Object.entries(reports)) {
    const text = readFileSync(path.join(ROOT, 'etc', report), 'utf8');
    const own = new Set<string>();
    const starts = [...text.matchAll(/^export (?:declare )?(?:abstract )?(?:class|function|interface|type|const|enum|namespace) (\w+)/gm)];
    starts.forEach((m, i) => {
      own.add(m[1]);
      names.add(m[1]);
      declarations.set(m[1], (declarations.get(m[1]) ?? '') + text.slice(m.index, starts[i + 1]?.index ?? text.length));
    });
    // A namespace (`export * as X`, written `declare namespace X { export { A, B } }`): X, and its members by name.
    for (const m of text.matchAll(/^declare namespace (\w+) \{\n\s+export \{([^}]+)\}/gm)) {
      for (const name of [m[1], ...m[2].split(',').map((n) => n.trim())]) if (name) [own, names].forEach((s) => s.add(name));
    }
    // Re-exports (`export { X }`, `export { X as Y }`).
    for (const m of text.matchAll(/^export \{([^}]+)\}/gm)) {
      for (const part of m[1].split(',')) {
        const name = part
          .trim()
          .split(/\s+as\s+/)
          .pop()!;
        if (name) [own, names].forEach((s) => s.add(name));
      }
    }
    for (const m of text.matchAll(/^\s+(?:static |readonly |get |protected |abstract )*(\w+)\??[(:<]/gm)) members.add(m[1]);
    byEntry.set(entry, own);
  }
  return { names, members, declarations, byEntry };
}

/** AWS's words that a name of the repository's happens to spell: Lambda's `Runtime.ExitError`, CDK's `Bucket`. */
const AWS_WORDS = new Set(['Runtime', 'Bucket']);

/** Every name the repository's TypeScript declares at the top of a module, exported or not (its own words). */
function declaredInRepository(): Set<string> {
  const names = new Set<string>();
  for (const dir of ['lib', 'cli', 'apps', 'verify']) {
    for (const f of readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })) {
      if (!f.endsWith('.ts') || f.endsWith('.d.ts')) continue;
      const text = readFileSync(path.join(ROOT, dir, f), 'utf8');
      for (const m of text.matchAll(/^(?:export )?(?:declare )?(?:abstract )?(?:async )?(?:class|function|interface|type|const|enum) (\w+)/gm)) {
        if (!AWS_WORDS.has(m[1])) names.add(m[1]);
      }
    }
  }
  return names;
}

/** A markdown text's inline code spans, each with its line, outside fenced blocks; and its fenced blocks. */
function codeOf(markdown: string): { spans: { text: string; line: number }[]; blocks: string[] } {
  const blocks = [...markdown.matchAll(/```\w*\n([\s\S]*?)```/g)].map((m) => m[1]);
  const outside = markdown.replace(/```[\s\S]*?```/g, (block) => block.replace(/[^\n]/g, ' '));
  const spans = [...outside.matchAll(/`([^`\n]+)`/g)].map((m) => ({ text: m[1], line: outside.slice(0, m.index).split('\n').length }));
  return { spans, blocks };
}

test('every name a shipped doc puts in code, of those the repository declares, is exported by the package; members too', () => {
  const { names, members, declarations, byEntry } = exported();
  assert.ok(names.has('FencedJob') && names.has('withLease'), 'the checker reads the API reports');
  const repository = declaredInRepository();
  assert.ok(repository.has('FencedJob'), "the checker reads the repository's declarations");
  const problems: string[] = [];
  for (const doc of shippedDocs) {
    const { spans, blocks } = codeOf(readFileSync(path.join(ROOT, doc), 'utf8'));
    for (const { text, line } of spans) {
      // A span that is code: a name, a member, or a call (`Election.campaign`, `handover(…)`), not a path or a command.
      const m = /^([A-Za-z_]\w*)(?:\.(\w+))?(?:\(.*\))?$/.exec(text);
      if (m) {
        const [, name, member] = m;
        if (repository.has(name) && !names.has(name) && !members.has(name))
          problems.push(`${doc}:${line}: \`${text}\` names ${name}, which the package does not export`);
        const declaration = declarations.get(name);
        if (member && declaration && /^export (?:declare )?(?:abstract )?(?:class|interface) /.test(declaration)) {
          if (!new RegExp(`^\\s+(?:static |readonly |get |protected |abstract )*${member}\\b`, 'm').test(declaration)) {
            problems.push(`${doc}:${line}: \`${text}\`: ${name} has no member ${member}`);
          }
        }
      }
    }
    for (const block of blocks) {
      for (const m of block.matchAll(/import (?:type )?\{([^}]+)\} from '(fencepost(?:\/\w+)?)'/g)) {
        const own = byEntry.get(m[2]);
        for (const part of m[1].split(',')) {
          const name = part
            .trim()
            .replace(/^type /, '')
            .split(/\s+as\s+/)[0];
          if (name && !own?.has(name)) problems.push(`${doc}: imports ${name} from '${m[2]}', which does not export it`);
        }
      }
    }
  }
  assert.deepEqual(problems, [], 'shipped docs describe what the package does not have');
});

test('every relative link of a shipped doc resolves to a file the package ships', () => {
  const shipped = new Set(packed);
  const problems: string[] = [];
  for (const doc of shippedDocs) {
    const outside = readFileSync(path.join(ROOT, doc), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const [, target] of outside.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target) || target.startsWith('#')) continue;
      const file = path.posix.normalize(path.posix.join(path.posix.dirname(doc), target.split('#')[0]));
      if (!shipped.has(file) && !packed.some((p) => p.startsWith(`${file}/`)))
        problems.push(`${doc} links to ${target}, which the package does not ship`);
    }
  }
  assert.deepEqual(problems, [], 'links a user of the package cannot follow');
});

/**
 * The README cannot drift from what it shows: every TypeScript block is the file its marker names, byte for byte (the
 * files are what test/package/pack.test.ts runs from the installed package, and the whole project type-checks them); every
 * command it tells a user to run is one the package's `fencepost` has; the repository's own commands, there and in
 * docs/REPOSITORY.md, are the repository's; every relative link and anchor resolves.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { USER_COMMANDS } from '../../lib/cli/user';
import { commandOptions } from '../../cli/options';
import { ROOT, snippets, tsBlocks } from '../support/readme-snippets';

const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const REPOSITORY = path.join(ROOT, 'docs/REPOSITORY.md');
const docs = [
  { name: 'README.md', text: README },
  { name: 'docs/REPOSITORY.md', text: existsSync(REPOSITORY) ? readFileSync(REPOSITORY, 'utf8') : '' },
];

test('every TypeScript block in the README is the file its marker names, byte for byte, and every examples/readme/ file is quoted', () => {
  const marked = snippets(README);
  assert.equal(marked.length, tsBlocks(README).length, 'every ```ts block follows a <!-- snippet: examples/….ts --> marker');
  for (const { file, block } of marked) {
    assert.ok(existsSync(path.join(ROOT, file)), `the README quotes ${file}, which does not exist`);
    assert.ok(
      block === readFileSync(path.join(ROOT, file), 'utf8'),
      `the README's block for ${file} is not the file as it is: run npx tsx test/support/readme-snippets.ts`,
    );
  }
  const quoted = new Set(marked.map((s) => s.file));
  const unquoted = readdirSync(path.join(ROOT, 'examples/readme'))
    .map((f) => `examples/readme/${f}`)
    .filter((f) => !quoted.has(f));
  assert.deepEqual(unquoted, [], 'every README snippet file is quoted in the README');
  for (const f of [
    'examples/fenced-job/lib/chunk.ts',
    'examples/fenced-job/lib/nightly-report-stack.ts',
    'examples/fenced-job/bin/nightly-report.ts',
  ])
    assert.ok(quoted.has(f), `the README quotes ${f}`);
});

test("every `npx fencepost <command>` the README and docs/REPOSITORY.md name is a command of the package's fencepost", () => {
  const user = Object.keys(USER_COMMANDS);
  for (const { name, text } of docs) {
    const named = [...text.matchAll(/npx fencepost ([a-z][\w-]*)/g)].map((m) => m[1]);
    assert.deepEqual(
      named.filter((c) => !user.includes(c)),
      [],
      `${name} names commands the package's fencepost lacks (it has ${user.join(', ')})`,
    );
  }
  assert.ok(/npx fencepost local/.test(README), 'the README names npx fencepost local');
});

test('the repository runs its own command as `npm run fencepost --`, never with a path a user lacks; every command named is one of its', () => {
  const repository = [...Object.keys(commandOptions), ...Object.keys(USER_COMMANDS)];
  for (const { name, text } of docs) {
    const inRepositoryOnly = text.split('npx tsx bin/fencepost.ts').length - 1;
    assert.equal(inRepositoryOnly, 0, `${name} says npx tsx bin/fencepost.ts ${inRepositoryOnly} times: it works only inside the repository`);
    const named = [...text.matchAll(/npm run fencepost -- ([a-z][\w-]*)/g)].map((m) => m[1]);
    assert.deepEqual(
      named.filter((c) => !repository.includes(c)),
      [],
      `${name} names commands the repository's fencepost lacks`,
    );
  }
});

/** A markdown text without its fenced code blocks (whose `# comments` are not headings, nor their brackets links). */
const outsideCode = (markdown: string) => markdown.replace(/```[\s\S]*?```/g, '');

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

test('every relative link in the README and docs/REPOSITORY.md resolves, and every #anchor names a heading', () => {
  for (const { name, text } of docs) {
    const dir = path.dirname(path.join(ROOT, name));
    for (const [, target] of outsideCode(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [file, hash] = target.split('#');
      const resolved = file === '' ? path.join(ROOT, name) : path.join(dir, file);
      assert.ok(existsSync(resolved), `${name} links to ${target}, which does not exist`);
      if (hash === undefined) continue;
      const headings = [...outsideCode(readFileSync(resolved, 'utf8')).matchAll(/^#+ (.+)$/gm)].map((m) => anchor(m[1]));
      assert.ok(headings.includes(hash), `${name} links to ${target}: no such heading (${headings.join(', ')})`);
    }
  }
});

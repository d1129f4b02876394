/** The whole project type-checks under the strict tsconfig (lib, bin, lambda, local, test, bench, and the README's examples). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

test('tsc --noEmit passes', () => {
  const root = path.resolve(__dirname, '..');
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', root], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('every TypeScript block in the README is one of examples/, verbatim (so each is type-checked above, and run or synthesized by its test)', () => {
  const root = path.resolve(__dirname, '..');
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const examples = readdirSync(path.join(root, 'examples'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(path.join(root, 'examples', f), 'utf8'));
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length >= 3, 'the README shows the library, the chunk function and the stack');
  for (const block of blocks) assert.ok(examples.includes(block), `a README block is not an example file:\n${block.slice(0, 200)}`);
});

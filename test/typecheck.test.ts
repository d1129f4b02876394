/** The whole project type-checks under the strict tsconfig (lib, bin, lambda, local, test, bench, and the README's examples). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

test('tsc --noEmit passes', () => {
  const root = path.resolve(__dirname, '..');
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', root], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("the README's code example is examples/bill-a-night.ts, verbatim (so it is type-checked above)", () => {
  const root = path.resolve(__dirname, '..');
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const example = readFileSync(path.join(root, 'examples/bill-a-night.ts'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.equal(block, example);
});

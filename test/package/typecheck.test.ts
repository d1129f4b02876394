/** The whole project type-checks under the strict tsconfig (lib, bin, lambda, local, test, bench, and the examples the README quotes: test/unit/readme.test.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

test('tsc --noEmit passes', () => {
  const root = path.resolve(__dirname, '..', '..');
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', root], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

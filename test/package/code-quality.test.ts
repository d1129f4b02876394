/**
 * The formatter, the linter and the unused-code check, as part of `npm test`: Prettier (.prettierrc.json), ESLint
 * with typescript-eslint (eslint.config.mjs) and knip (knip.json: unused files, exports and dependencies). Each runs
 * as its own process over the whole repository; its report is the failure message. `npm run lint` runs the same.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(__dirname, '..', '..');

function run(tool: string, args: string[]): { status: number | null; output: string } {
  const r = spawnSync(path.join(ROOT, 'node_modules', '.bin', tool), args, { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

test('every source file is formatted as Prettier formats it (npm run format fixes it)', () => {
  const r = run('prettier', ['--check', '--log-level', 'warn', '.']);
  assert.equal(r.status, 0, `files not formatted:\n${r.output}`);
});

test('ESLint finds nothing (typescript-eslint recommended rules)', () => {
  const r = run('eslint', ['--max-warnings', '0', '.']);
  assert.equal(r.status, 0, r.output);
});

test('knip finds no unused file, export or dependency', () => {
  const r = run('knip', ['--no-progress']);
  assert.equal(r.status, 0, r.output);
});

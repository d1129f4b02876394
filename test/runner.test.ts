/**
 * The batch runner `npm test` uses (test/support/runner.ts): a hung test fails the run instead of holding it open.
 * A test that never settles times out, a file that leaves timers polling still exits once its tests have ended,
 * and the run's own deadline stops whatever is still going. The fixtures are real test files run by the real runner.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { runBatch } from './support/runner';

const fixture = (name: string) => path.join(__dirname, 'support/fixtures', name);

test('a test that never settles fails at the test limit, and a file left polling still exits; the others run', { timeout: 60_000 }, async () => {
  const r = await runBatch([fixture('hangs.fixture.ts')], { testLimitMs: 1_500, deadline: performance.now() + 50_000, echo: false });
  assert.equal(r.stopped, false, 'the batch ended by itself, before the deadline');
  assert.deepEqual(r.counts, { passed: 2, failed: 1, cancelled: 1, skipped: 0 }, 'the hung test is cancelled, the other failed');
  assert.notEqual(r.code, 0);
  assert.match(r.output, /never settles.*\n[\s\S]*test timed out after 1500ms/);
  assert.match(r.output, /✔ passes after/, 'the tests after the hung one ran');
});

test('the run deadline stops a test that outlasts it, and the run fails', { timeout: 60_000 }, async () => {
  const r = await runBatch([fixture('slow.fixture.ts')], { testLimitMs: 1_500, deadline: performance.now() + 3_000, echo: false });
  assert.equal(r.stopped, true);
  assert.notEqual(r.code, 0);
  assert.match(r.output, /Interrupted while running:[\s\S]*slow\.fixture\.ts/, 'the runner names the file it interrupted');
  assert.equal(r.counts.cancelled, 1);
});

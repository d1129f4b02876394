/**
 * The batch runner `npm test` uses (test/support/runner.ts): a hang fails the run instead of holding it open.
 * A test that never settles times out, a file that keeps running after its tests have ended fails (the leak guard),
 * and the run's own deadline stops whatever is still going. The fixtures are real test files run by the real runner.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { runBatch } from '../support/runner';

/** One fixture file through the runner, quietly: a 1.5 s test limit, a 1 s linger, a deadline `withinMs` from now. */
const runFixture = (name: string, { lingerMs = 1_000, withinMs = 50_000 } = {}) =>
  runBatch([path.join(__dirname, '../support/fixtures', name)], {
    testLimitMs: 1_500,
    lingerMs,
    deadline: performance.now() + withinMs,
    echo: false,
  });

test('a test that never settles fails at the test limit; the tests after it run', { timeout: 60_000 }, async () => {
  const r = await runFixture('hangs.fixture.ts');
  assert.equal(r.stopped, false, 'the batch ended by itself, before the deadline');
  assert.match(r.output, /never settles.*\n[\s\S]*test timed out after 1500ms/);
  assert.match(r.output, /✔ passes after/, 'the tests after the hung one ran');
  assert.deepEqual(r.counts, { passed: 2, failed: 1, cancelled: 1, skipped: 0 }, 'the hung test is cancelled, the one that threw failed');
  assert.match(r.output, /its process is still running/, 'the timers they left running were ended by the leak guard');
  assert.notEqual(r.code, 0);
});

test('a file whose tests all passed but which keeps running fails, naming what is still open', { timeout: 60_000 }, async () => {
  const r = await runFixture('lingers.fixture.ts');
  assert.equal(r.stopped, false);
  assert.deepEqual(r.counts, { passed: 1, failed: 1, cancelled: 0, skipped: 0 });
  assert.match(r.output, /its process is still running; still open: .*Timeout/);
  assert.notEqual(r.code, 0);
});

for (const times of [1.2, 2]) {
  test(
    `a file's own cleanup that lasts ${times}× the linger is not a leak: the guard waits again after a late timer`,
    { timeout: 60_000 },
    async () => {
      const lingerMs = 1_000;
      process.env.SLOW_CLEANUP_MS = String(times * lingerMs);
      try {
        const r = await runFixture('slow-cleanup.fixture.ts', { lingerMs });
        assert.equal(r.stopped, false);
        assert.doesNotMatch(r.output, /its process is still running/);
        assert.deepEqual(r.counts, { passed: 1, failed: 0, cancelled: 0, skipped: 0 });
        assert.equal(r.code, 0);
      } finally {
        delete process.env.SLOW_CLEANUP_MS;
      }
    },
  );
}

test('a file that ends cleanly: every test counted, to the last of a describe block, and no wait for the guard', { timeout: 60_000 }, async () => {
  // The guard would hold a lingering file for a minute; the deadline at 20 s would then stop the batch.
  const r = await runFixture('clean.fixture.ts', { lingerMs: 60_000, withinMs: 20_000 });
  assert.equal(r.stopped, false);
  assert.deepEqual(r.counts, { passed: 4, failed: 0, cancelled: 0, skipped: 0 });
  assert.equal(r.code, 0);
});

test('the run deadline stops a test that outlasts it, and the run fails', { timeout: 60_000 }, async () => {
  // Long enough for the runner and the file to start on a loaded machine, so that the fixture's test is running.
  const r = await runFixture('slow.fixture.ts', { withinMs: 10_000 });
  assert.equal(r.stopped, true);
  assert.notEqual(r.code, 0);
  assert.match(r.output, /Interrupted while running:[\s\S]*slow\.fixture\.ts/, 'the runner names the file it interrupted');
  assert.equal(r.counts.cancelled, 1);
});

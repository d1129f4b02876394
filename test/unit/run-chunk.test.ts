/**
 * runChunk records a chunk done only while the lease holds: the done mark is a write like any other, so the stop time
 * is checked before it. Found by the explorer's outside-view stop-time check (verify/explore/history.ts): a chunk's
 * last batch held (paused) past the stop time, answered, and the done mark sent after it without a check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { StopTimePassedError } from '../../lib/core/errors';
import { Events } from '../../lib/core/events';
import { jobKeys } from '../../lib/core/job-keys';
import { raiseRun, runChunk } from '../../lib/core/job';
import { claim } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';

const DATE = '2026-09-28';

async function raised() {
  const clock = new VirtualClock();
  const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
  const deps = { locks: new MemoryLockStore({ clock }), jobs, clock, events: new Events('A', clock) };
  const run = { keys: jobKeys('chunks'), date: DATE, chunks: 1 };
  const lease = await claim(deps, run.keys.lock(DATE), 'A', LEASE_DEFAULTS);
  await raiseRun(deps, run, lease);
  const doneMark = async () => (await jobs.readFence({ table: 'jobs', key: { pk: run.keys.chunkFence(DATE, 0) } }))?.done_by;
  return { clock, deps, run, lease, doneMark };
}

test('a chunk whose work ends past the stop time is not recorded done: the stop time is checked before the done mark', async () => {
  const { clock, deps, run, lease, doneMark } = await raised();
  // The work's last write was sent in time and answered late (no heartbeat runs here): the work returns after the
  // stop time, and nothing more may be sent.
  const work = async () => {
    await clock.sleep(lease.stopAtMs - clock.monotonicMs() + 1);
    return 'written';
  };
  const refused = assert.rejects(runChunk(deps, run, { lease, chunk: 0 }, work), StopTimePassedError);
  await clock.advance(LEASE_DEFAULTS.leaseMs);
  await refused;
  assert.equal(await doneMark(), undefined, 'the chunk is not recorded done: the next holder redoes it');
});

test('a chunk whose work ends before the stop time is recorded done', async () => {
  const { deps, run, lease, doneMark } = await raised();
  assert.equal(await runChunk(deps, run, { lease, chunk: 0 }, async () => 'written'), 'written');
  assert.notEqual(await doneMark(), undefined);
});

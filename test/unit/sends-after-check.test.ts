/**
 * A holder's sends that come after its own check, later than it (found by the explorer's outside-view stop-time check,
 * lib/testing/history.ts, both in the unmutated code): the done mark runChunk sends once a chunk's work returns (its
 * last write can be answered past the stop time), and a retry sent after a transient failure's backoff. Each checks
 * the stop time first; the first send of a write stays the caller's to check, so a write that skips it still meets
 * the fence.
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
import { writeBatch } from '../../lib/core/batch';
import { fenceOn } from '../../lib/core/fence';
import type { JobStore } from '../../lib/core/store/jobs';
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

/** `jobs` whose first recordBatch is throttled before it is applied. */
function throttledOnce(jobs: JobStore): { store: JobStore; sends: () => number } {
  let sends = 0;
  const store = new Proxy(jobs, {
    get: (t, prop, receiver) =>
      prop !== 'recordBatch'
        ? (Reflect.get(t, prop, receiver) as unknown)
        : (...args: Parameters<JobStore['recordBatch']>) => {
            if (sends++ === 0) return Promise.reject(Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
            return t.recordBatch(...args);
          },
  });
  return { store, sends: () => sends };
}

for (const [when, expected] of [
  ['before', 'recorded'],
  ['past', 'StopTimePassedError'],
] as const) {
  test(`a fenced write throttled once is sent again after its backoff only while the lease holds: the backoff ends ${when} the stop time`, async () => {
    const { clock, deps, lease } = await raised();
    const { store, sends } = throttledOnce(deps.jobs);
    // The backoff's jitter at its top: the first retry waits just under the policy's 25 ms.
    const fence = fenceOn({ fences: store, table: 'jobs', key: { pk: 'orders' }, clock, random: () => 0.999 });
    await lease.fenced(fence).raise();
    await clock.advance(lease.stopAtMs - (when === 'past' ? 10 : 100) - clock.monotonicMs());
    lease.check(); // the caller's check before its first send passes
    const put = { table: 'orders-sent', item: { pk: { S: 'order#1' } } };
    const result = writeBatch(lease.fenced(fence), [put]).then(
      () => 'recorded',
      (err: Error) => err.name,
    );
    await clock.advance(100);
    assert.equal(await result, expected);
    assert.equal(sends(), expected === 'recorded' ? 2 : 1, 'the retry is sent only before the stop time');
    assert.equal(deps.jobs.dump('orders-sent').length, expected === 'recorded' ? 1 : 0);
  });
}

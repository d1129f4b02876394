/**
 * Invariant 3 with several jobs on one job table (lib/core/audit.ts checkSparseIndex): each job's claimed rows sit in its
 * own shard of the sparse index (claim_shard = the job's name), and the auditor reads every job's shard the table's
 * rows name, so another job's RUNNING row is found where its own sweeper looks, and a row under a shard its own
 * sweeper never reads is a problem. On the in-memory job store (no index lag), no DynamoDB.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkSparseIndex, type FencedJobState } from '../../lib/core/audit';
import { VirtualClock } from '../../lib/core/clock';
import { raiseJobRow, readJob } from '../../lib/core/fence';
import { claimShard, jobKeys } from '../../lib/core/job-keys';
import { MemoryJobStore } from '../../lib/testing/job-store';
import type { JobRow } from '../../lib/core/store/jobs';

const DATE = '2026-09-28';
const [audited, other] = ['exports', 'reminders'].map(jobKeys);

function world() {
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const deps = { jobs: store, clock };
  /** The audited job's state as readFencedJob gives it: its row, and every job row of the table. */
  const stateOf = async (): Promise<FencedJobState> => {
    const rows = await Promise.all([audited, other].map((k) => readJob(deps, k.job(DATE))));
    return {
      ref: { jobId: audited.job(DATE), lockKey: audited.lock(DATE), manifest: audited.manifestPlace(DATE) },
      job: rows[0],
      lock: undefined,
      manifest: undefined,
      chunkFences: new Map(),
      jobRows: rows.filter((r): r is JobRow => r !== undefined),
    };
  };
  return { clock, store, deps, stateOf };
}

test("another job's RUNNING row on the same job table is found in its own shard: no false alarm", async () => {
  const w = world();
  for (const k of [audited, other]) await raiseJobRow(w.deps, k.job(DATE), 3, `${k.name}-holder`, 1);
  const check = await checkSparseIndex(w.deps, await w.stateOf());
  assert.equal(check.ok, true, check.detail);
  assert.match(check.detail, /^2 of 2 job rows indexed/);
});

test("a RUNNING row indexed under another job's shard is a problem: its own job's sweeper would never find it", async () => {
  const w = world();
  await raiseJobRow(w.deps, audited.job(DATE), 3, 'exports-holder', 1);
  // Planted: the other job's row raised straight into the audited job's shard (as a row raised before a rename would be).
  await w.store.raiseJob(other.job(DATE), {
    token: 3,
    owner: 'reminders-holder',
    chunkCount: 1,
    claimedSince: '2026-09-28T01:30:00.000Z',
    shard: claimShard(audited.name),
  });
  const check = await checkSparseIndex(w.deps, await w.stateOf());
  assert.equal(check.ok, false);
  assert.equal(check.detail, `${other.job(DATE)} is indexed under shard ${claimShard(audited.name)}, not its job's ${claimShard(other.name)}`);
});

test('a RUNNING row the sweeper re-queued is named with its re-queue count: a night given up is findable in the audit', async () => {
  const w = world();
  await raiseJobRow(w.deps, audited.job(DATE), 3, 'exports-holder', 1);
  const seen = { ownerToken: 3, fence: 3 };
  for (let requeues = 0; requeues < 2; requeues++) assert.ok((await w.store.requeue(audited.job(DATE), { ...seen, requeues })).ok);
  const check = await checkSparseIndex(w.deps, await w.stateOf());
  assert.equal(check.ok, true, check.detail);
  assert.match(check.detail, new RegExp(`re-queued: ${audited.job(DATE)} \\(2 times\\)`));
});

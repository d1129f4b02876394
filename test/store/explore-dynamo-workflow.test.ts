/**
 * The explorer's DynamoDB Local tier for the workflow world (verify/explore/dynamo.ts runWorkflowOnDynamo): the real
 * handlers under their synthesized state machines, their runtimes on lib/core/aws's lock and job stores (DynamoDB
 * Local, behind the conflict proxy) and the S3 manifest store (the local S3 endpoint), the clock virtual, every call a
 * step of the seeded scheduler and faulted there. With the sparse index's lag at 0 (DynamoDB Local's index does not
 * lag), each schedule must run line for line as on the in-memory stores: a difference is the memory stores parting
 * from AWS's behaviour.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { runWorkflowOnDynamo, WORKFLOW_DYNAMO_MUTATIONS } from '../../verify/explore/dynamo';
import { workflowWorld } from '../../verify/explore/workflow-world';
import { brokenAlike, drawnAlike, onStores } from '../support/explore-alike';

/** The memory stores as DynamoDB Local behaves: no index lag (a page of one row still runs every query's paging). */
const MEMORY_NO_LAG = workflowWorld((clock) => ({
  locks: new MemoryLockStore({ clock }),
  jobs: new MemoryJobStore({ clock, jobs: 'jobs', pageSize: 1 }),
  manifests: new MemoryManifestStore(),
  items: 'items',
  indexLagMs: 0,
}));

/** Schedules from this seed (not one the docs' tables use). */
const FROM = 7_401;
const SCHEDULES = 24;

const { both } = onStores('w', runWorkflowOnDynamo, MEMORY_NO_LAG);

test(`${SCHEDULES} schedules of the workflow on DynamoDB Local and local S3: no violation, and each runs as on the memory stores`, async () => {
  const t0 = performance.now();
  const faults = await drawnAlike(both, FROM, SCHEDULES);
  console.log(`faults injected over ${SCHEDULES} schedules (${Math.round(performance.now() - t0)} ms), by kind and call: ${JSON.stringify(faults)}`);
});

// Every conditional write the workflow sends, each answer lost once after it applied (the retry meets its own write):
// the lock's claim, renewal and release, the job row's raise, complete and re-queue, the chunk fence's raise, the
// fenced batch and the chunk's done mark, the manifest's create (If-None-Match) and commit (If-Match). A chunk's
// write paused past its task's timeout makes the zombie the sweeper re-queues the night from.
const CONDITIONAL = [
  'claim',
  'renew',
  'release',
  'raiseJob',
  'raiseFence',
  'recordBatch',
  'markChunkDone',
  'complete',
  'requeue',
  'create',
  'putIfMatch',
];
test('every conditional write the workflow sends, its answer lost once, runs on the AWS stores as on the memory stores', async () => {
  const zombie = { actor: /^exec-a\/RunChunk#/, method: 'recordBatch', kind: 'pause', ms: 200_000 } as const;
  // The zombie's write is the first batch: the lost answer takes the second.
  const lost = CONDITIONAL.map((method) => ({ actor: /./, method, kind: 'lost' as const, nth: method === 'recordBatch' ? 2 : 1 }));
  const { dynamo, memory } = await both(1, undefined, { faults: [zombie, ...lost] });
  for (const method of CONDITIONAL)
    assert.ok(
      dynamo.crashPoints.some((p) => p.startsWith(`lost ${method}@`)),
      `no ${method} answer was lost: ${dynamo.crashPoints.join(', ')}`,
    );
  assert.deepEqual(dynamo.violations, [], dynamo.trace.join('\n'));
  assert.equal(dynamo.state, 'DONE');
  assert.deepEqual(dynamo.trace, memory.trace);
});

// The broken variants run above the store: each must break the world on the AWS stores as on the memory stores, so
// the memory tier's catch rates stand for the AWS stores too.
// They start a seed later than the schedules above: `fence-lt` from seed 7401 refuses every batch and retries to the horizon (10,819 trace lines, about 30 s on
// DynamoDB Local); the equality is what is tested, not the horizon.
const MUTATIONS_FROM = FROM + 1;
const PER_MUTATION = 2;
test(`each broken variant that runs on any store behaves on the AWS stores as on the memory stores (${PER_MUTATION} schedules each)`, () =>
  brokenAlike(both, WORKFLOW_DYNAMO_MUTATIONS, MUTATIONS_FROM, PER_MUTATION));

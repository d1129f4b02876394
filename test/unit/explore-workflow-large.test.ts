/**
 * The workflow world on a large night (verify/explore/workflow-world.ts LARGE_NIGHT: 12 chunks of 198 items, each
 * batch a full transaction of the fence's check and 99 puts): the same world, checks and faults as the small night's,
 * where a night is many chunks and many full transactions, so a Map of 12 iterations, a Distributed Map of 12 child
 * executions, and a stale holder in the middle of a long chunk are explored too. On virtual time, no endpoint.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runWorld } from '../../lib/testing/world';
import { memoryWorkflowStores } from '../../lib/testing/workflow/workflow-world';
import { LARGE_NIGHT, WORKFLOW_WORLD_MUTATIONS, workflowWorld } from '../../verify/explore/workflow-world';

const LARGE = workflowWorld(memoryWorkflowStores(), LARGE_NIGHT);
const SCHEDULES = 100;

test(`${SCHEDULES} large nights from seed 1 on the real code: no violation, each DONE with every item`, async () => {
  for (let seed = 1; seed <= SCHEDULES; seed++) {
    const r = await runWorld(LARGE, seed);
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    assert.equal(r.state, 'DONE', `seed ${seed}`);
  }
});

test('a large night as a Distributed Map, placed: 12 child executions, each chunk in full transactions of 99 puts', async () => {
  const r = await runWorld(LARGE, 1, undefined, { faults: [], distributed: true });
  assert.deepEqual(r.violations, []);
  assert.equal(r.state, 'DONE');
  // Every chunk ran in a child execution of the Map Run, and wrote its items in two accepted transactions.
  const children = new Set(r.trace.flatMap((l) => /\/Chunks:(\d+)\//.exec(l)?.[1] ?? []));
  assert.equal(children.size, LARGE_NIGHT.chunks, [...children].join(', '));
  const accepted = r.trace.filter((l) => / batch accepted /.test(l)).length;
  assert.equal(accepted, LARGE_NIGHT.chunks * Math.ceil(LARGE_NIGHT.items / LARGE_NIGHT.batch));
});

for (const mutation of WORKFLOW_WORLD_MUTATIONS)
  test(`mutation ${mutation} is caught on a large night within ${SCHEDULES} schedules from seed 1`, async () => {
    let caught: number | undefined;
    for (let seed = 1; seed <= SCHEDULES && caught === undefined; seed++)
      if ((await runWorld(LARGE, seed, mutation)).violations.length > 0) caught = seed;
    assert.ok(caught !== undefined, `${mutation} not caught in ${SCHEDULES} large nights`);
  });

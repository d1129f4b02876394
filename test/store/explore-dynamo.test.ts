/**
 * The explorer's DynamoDB Local tier (verify/explore/dynamo.ts): the night world's schedules with lib/core/aws's lock
 * and job stores on DynamoDB Local (behind the conflict proxy), the clock virtual, every call a step of the seeded
 * scheduler and faulted there. Every condition expression the night sends runs under the faults; and with the sparse
 * index's lag at 0 (DynamoDB Local's index does not lag), each schedule must run line for line as on the in-memory
 * stores: a difference is the memory stores parting from DynamoDB's behaviour.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { DYNAMO_MUTATIONS, runNightOnDynamo } from '../../verify/explore/dynamo';
import { nightWorld, type NightPlaced } from '../../verify/explore/night-world';
import { brokenAlike, drawnAlike, onStores } from '../support/explore-alike';

/** The memory stores as DynamoDB Local behaves: no index lag (a page of one row still runs every query's paging). */
const MEMORY_NO_LAG = nightWorld((clock) => ({
  locks: new MemoryLockStore({ clock }),
  jobs: new MemoryJobStore({ clock, jobs: 'jobs', pageSize: 1 }),
  items: 'items',
  indexLagMs: 0,
}));

/** Schedules from this seed (not one the docs' tables use). */
const FROM = 7_301;
const SCHEDULES = 120;

const { both } = onStores('e', runNightOnDynamo, MEMORY_NO_LAG);

test(`${SCHEDULES} schedules of the night on DynamoDB Local: no violation, and each runs as on the memory stores`, async () => {
  const faults = await drawnAlike(both, FROM, SCHEDULES);
  console.log(`faults injected over ${SCHEDULES} schedules, by kind and call: ${JSON.stringify(faults)}`);
});

test('the fence comparison broken where it ships (`fence < :t` sent to DynamoDB) is caught; the same schedule passes unbroken', async () => {
  // No fault: every batch is written at the token its fence was raised to, which `fence < :t` refuses.
  const placed: NightPlaced = { faults: [] };
  const honest = await both(1, undefined, placed);
  assert.deepEqual(honest.dynamo.violations, []);
  assert.equal(honest.dynamo.state, 'DONE');
  const broken = await both(1, 'fence-lt', placed);
  assert.ok(
    broken.dynamo.trace.some((l) => / holder-1 batch REFUSED token 1 below fence 1 /.test(l)),
    broken.dynamo.trace.join('\n'),
  );
  assert.ok(broken.dynamo.violations.length > 0, 'a night whose every batch is refused must fail a check');
  // The memory stores' variant of the same bug (verify/explore/mutations.ts) behaves as the real expression does.
  assert.deepEqual(broken.dynamo.trace, broken.memory.trace);
  assert.deepEqual(broken.dynamo.violations, broken.memory.violations);
});

// The broken variants run above the store: each must break the night on DynamoDB Local as on the memory stores, so
// the memory tier's catch rates stand for the AWS stores too.
const PER_MUTATION = 8;
test(`each broken variant that runs on any store behaves on DynamoDB Local as on the memory stores (${PER_MUTATION} schedules each)`, () =>
  brokenAlike(both, DYNAMO_MUTATIONS, FROM, PER_MUTATION));

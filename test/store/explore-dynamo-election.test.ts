/**
 * The explorer's DynamoDB Local tier for the election world (verify/explore/dynamo.ts runElectionOnDynamo): the real
 * election, handover, epoch ledger and manifest on lib/core/aws's lock store and ledger store (DynamoDB Local, behind
 * the conflict proxy) and the S3 manifest store (the local S3 endpoint), the clock virtual, every call a step of the
 * seeded scheduler and faulted there. Each schedule must run line for line as on the in-memory stores set as the
 * AWS stores behave when their calls come one at a time (no transaction or commit window: no conflict, no 409 but
 * the scheduler's), and with no restore (a restore copies the lock table behind its back: the memory tier's only).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLedgerStore } from '../../lib/testing/ledger-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { ELECTION_DYNAMO_MUTATIONS, runElectionOnDynamo } from '../../verify/explore/dynamo';
import { electionWorld, type ElectionPlaced } from '../../verify/explore/election-world';
import type { ScheduleResult } from '../../lib/testing/world';
import { brokenAlike, drawnAlike, onStores } from '../support/explore-alike';

/** The memory stores as the AWS stores behave here: no conflict window, no commit window, no restore. */
const MEMORY_SERIAL = electionWorld((clock) => ({
  locks: new MemoryLockStore({ clock }),
  ledgers: new MemoryLedgerStore(clock),
  bucket: new MemoryManifestStore({ clock }),
}));

/** Schedules from this seed (not one the docs' tables use). */
const FROM = 7_501;
const SCHEDULES = 12;

const { aws, both } = onStores('l', runElectionOnDynamo, MEMORY_SERIAL);

test(`${SCHEDULES} schedules of the election on DynamoDB Local and local S3: no violation, and each runs as on the memory stores`, async () => {
  const t0 = performance.now();
  const faults = await drawnAlike(both, FROM, SCHEDULES);
  console.log(`faults injected over ${SCHEDULES} schedules (${Math.round(performance.now() - t0)} ms), by kind and call: ${JSON.stringify(faults)}`);
});

// Every conditional write the election sends, each answer lost once after it applied (the retry meets its own write):
// the queue's join and removal, the leases' claim, renewal and release, the ledger's raise and append, the
// manifest's create (If-None-Match) and commit (If-Match).
const CONDITIONAL = ['join', 'removeCandidate', 'claim', 'renew', 'release', 'raise', 'append', 'create', 'putIfMatch'];
test('every conditional write the election sends, its answer lost once, runs on the AWS stores as on the memory stores', async () => {
  const { dynamo, memory } = await both(1, undefined, { faults: CONDITIONAL.map((method) => ({ actor: /./, method, kind: 'lost' as const })) });
  for (const method of CONDITIONAL)
    assert.ok(
      dynamo.crashPoints.some((p) => p.startsWith(`lost ${method}@`)),
      `no ${method} answer was lost: ${dynamo.crashPoints.join(', ')}`,
    );
  assert.deepEqual(dynamo.violations, [], dynamo.trace.join('\n'));
  assert.deepEqual(dynamo.trace, memory.trace);
});

// The restore on DynamoDB Local (dynamo.ts restoreOnDynamo): a consistent scan of the lock table as the backup, a new
// table with its items put back, bumped (bumpEpochs, two items a page: its scan runs the paging path), then used. Its scan pages in DynamoDB's order
// (by the hash of the key), the memory store's by key, so the bump's order differs: checked for violations, not line
// for line. The backup at 4 s, restored 4 s later (as test/unit/explore-election.test.ts places it).
const RESTORED: ElectionPlaced = { faults: [], restore: { backupAtMs: 4_000, afterMs: 4_000 } };
const restoredAt = (r: ScheduleResult) => r.trace.findIndex((l) => / restore(-\d+)?: the restored table is in use$/.test(l));

// The floor's answer lost: the re-run meets its own raise (the floor's condition refuses it, the floor is read back).
// The second item's bump answer lost: the re-run finds both items bumped by this run and leaves them.
test("the restore on DynamoDB Local, the answers of the floor's raise and of a bump lost: the re-run meets its own writes; no violation", async () => {
  const placed: ElectionPlaced = {
    ...RESTORED,
    faults: [
      { actor: 'restore', method: 'raiseFloor', kind: 'lost' },
      { actor: 'restore', method: 'bump', nth: 2, kind: 'lost' },
    ],
  };
  const r = await aws('restore-', 1, undefined, { placed, restores: true });
  assert.ok(restoredAt(r) >= 0, r.trace.join('\n'));
  for (const fault of ['lost raiseFloor@', 'lost bump@'])
    assert.ok(
      r.crashPoints.some((p) => p.startsWith(fault)),
      `${fault} ${r.crashPoints.join(', ')}`,
    );
  assert.ok(
    r.trace.some((l) => / restore bumped \d+ items, 2 already bumped$/.test(l)),
    `the re-run leaves the two items it bumped:\n${r.trace.join('\n')}`,
  );
  assert.deepEqual(r.violations, [], r.trace.join('\n'));
});

test('the restore without the bump, and a backup from before the first use restored without the floor: caught on DynamoDB Local', async () => {
  const unbumped = await aws('nobump-', 1, 'restore-no-bump', { placed: RESTORED, restores: true });
  assert.ok(
    unbumped.violations.some((v) => v.includes('an epoch repeated')),
    unbumped.violations.join('; '),
  );
  const early: ElectionPlaced = { faults: [], restore: { backupAtMs: 1_000, afterMs: 6_000, early: true }, handoverAtMs: 8_000 };
  const unfloored = await aws('nofloor-', 1, 'restore-no-floor', { placed: early, restores: true });
  assert.ok(
    unfloored.violations.some((v) => v.includes('an epoch repeated')),
    unfloored.violations.join('; '),
  );
});

const RESTORING_FROM = 7_601;
const RESTORING = 4;
test(`${RESTORING} drawn schedules on DynamoDB Local with their drawn restores: no violation`, async () => {
  let restored = 0;
  for (let seed = RESTORING_FROM; seed < RESTORING_FROM + RESTORING; seed++) {
    const r = await aws(`${seed}r-`, seed, undefined, { restores: true });
    assert.deepEqual(r.violations, [], `seed ${seed} on DynamoDB Local:\n${r.trace.join('\n')}`);
    if (restoredAt(r) >= 0) restored++;
  }
  // Half the schedules draw a restore: these seeds draw some (fixed seeds: the count is theirs, not a chance).
  assert.ok(restored > 0, 'no schedule restored');
  console.log(`${restored} of ${RESTORING} schedules restored the lock table on DynamoDB Local`);
});

// The broken variants run above the store: each must break the world on the AWS stores as on the memory stores, so
// the memory tier's catch rates stand for the AWS stores too.
// They start a seed later than the schedules above: `sidecar-heartbeat` from seed 7501 beats a dead candidate's item to the horizon (17,169 trace lines, about 90 s
// on DynamoDB Local); the equality is what is tested, not the horizon.
const MUTATIONS_FROM = FROM + 1;
const PER_MUTATION = 2;
test(`each broken variant that runs on any store behaves on the AWS stores as on the memory stores (${PER_MUTATION} schedules each)`, () =>
  brokenAlike(both, ELECTION_DYNAMO_MUTATIONS, MUTATIONS_FROM, PER_MUTATION));

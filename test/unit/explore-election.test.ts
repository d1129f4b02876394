/**
 * The election world (verify/explore/election-world.ts): the real election, handover, restore bump, manifest and
 * epoch ledger on the in-memory stores and virtual time, interleaved and faulted at every store call by the seeded
 * scheduler. No store endpoint, no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { DEFAULT_BUMP } from '../../lib/core/restore';
import { runElectionSchedule } from '../../verify/explore/election-world';
import { ELECTION_MUTATIONS } from '../../verify/explore/mutations';

const digest = (trace: readonly string[]) => createHash('sha256').update(trace.join('\n')).digest('hex');

test('the same seed gives the same trace: two runs of one schedule, equal traces and digests', async () => {
  for (const seed of [1, 7]) {
    const [a, b] = [await runElectionSchedule(seed), await runElectionSchedule(seed)];
    assert.deepEqual(b.trace, a.trace);
    assert.equal(digest(b.trace), digest(a.trace));
    assert.deepEqual(b.crashPoints, a.crashPoints);
  }
  assert.notDeepEqual((await runElectionSchedule(2)).trace, (await runElectionSchedule(1)).trace);
});

const FROM = 1;
const SCHEDULES = 40;

test(`${SCHEDULES} schedules from seed ${FROM} on the real code: no violation, and faults of every kind injected`, async () => {
  const failed: { seed: number; violations: readonly string[] }[] = [];
  const kinds = new Set<string>();
  for (let seed = FROM; seed < FROM + SCHEDULES; seed++) {
    const r = await runElectionSchedule(seed);
    if (r.violations.length > 0) failed.push({ seed, violations: r.violations });
    for (const p of r.crashPoints) kinds.add(p.split(' ')[0]);
  }
  assert.deepEqual(failed, []);
  assert.deepEqual([...kinds].sort(), ['conflict', 'crash', 'lost', 'pause', 'throttle']);
});

// Seed 4 takes a backup of the lock table while c1 leads, restores it later (with dead and ghost candidates in
// the restored queue), and leaders lead on both sides of the restore.
const RESTORED = 4;

test(`a restore from a backup, bumped before use, hands out epochs above every earlier one (seed ${RESTORED})`, async () => {
  const r = await runElectionSchedule(RESTORED);
  const restoredAt = r.trace.findIndex((l) => l.endsWith('restore: the restored table is in use'));
  assert.ok(restoredAt >= 0, `seed ${RESTORED} no longer restores:\n${r.trace.join('\n')}`);
  const epochs = (lines: readonly string[]) => lines.flatMap((l) => /leads with epoch (\d+)$/.exec(l)?.[1] ?? []).map(Number);
  const before = epochs(r.trace.slice(0, restoredAt));
  const after = epochs(r.trace.slice(restoredAt));
  assert.ok(before.length > 0 && after.length > 0, 'leaders before and after the restore');
  assert.ok(Math.min(...after) >= DEFAULT_BUMP, `the first epoch after the restore ${Math.min(...after)} is bumped`);
  assert.ok(Math.min(...after) > Math.max(...before));
  assert.deepEqual(r.violations, []);
  const unbumped = await runElectionSchedule(RESTORED, 'restore-no-bump');
  assert.ok(
    unbumped.violations.some((v) => v.includes('an epoch repeated')),
    `without the bump the same schedule repeats an epoch: ${unbumped.violations.join('; ')}`,
  );
});

// Seed 269 pauses the old writer w1 with an append in hand (checked, sent, not yet applied) for longer than w2's
// whole handover: it lands after w2's handover answered and before w2's first write.
const IN_HAND = 269;

test(`an old writer's write in hand across the handover is refused on the real code, accepted without the bump (seed ${IN_HAND})`, async () => {
  const r = await runElectionSchedule(IN_HAND);
  const paused = r.trace.findIndex((l) => / w1 append PAUSE /.test(l));
  const answered = r.trace.findIndex((l) => / w2 is the writer with epoch /.test(l));
  assert.ok(paused >= 0 && answered > paused, `seed ${IN_HAND} no longer pauses w1's append across w2's handover:\n${r.trace.join('\n')}`);
  assert.ok(
    r.trace.slice(answered).some((l) => / w1 stops writing: FencedOutError$/.test(l)),
    'the bump refuses the write w1 held',
  );
  assert.deepEqual(r.violations, []);
  const unbumped = await runElectionSchedule(IN_HAND, 'handover-no-bump');
  assert.ok(
    unbumped.violations.some((v) => /^w1's append v\d+ at epoch \d+ accepted after w2's handover/.test(v)),
    `without the bump w1's write lands after the handover: ${unbumped.violations.join('; ')}`,
  );
});

// Seed 256 kills w2 between its two steps: after the flip, at its bump (docs/ELECTION.md: nothing is written then).
const BETWEEN = 256;

test(`a new writer killed between its flip and its bump: the old writer stops, nobody writes, the ledger is sound (seed ${BETWEEN})`, async () => {
  const r = await runElectionSchedule(BETWEEN);
  const flip = r.trace.findIndex((l) => / w2 claim$/.test(l));
  const crash = r.trace.findIndex((l) => / w2 raise CRASH /.test(l));
  assert.ok(flip >= 0 && crash > flip, `seed ${BETWEEN} no longer kills w2 between its flip and its bump:\n${r.trace.join('\n')}`);
  const stopped = r.trace.findIndex((l) => / w1 stops writing: LeaseLostError$/.test(l));
  assert.ok(stopped > flip, 'the flip ends the old writer: its renewal fails, its next check refuses');
  assert.ok(!r.trace.slice(stopped).some((l) => / append accepted ledger\/writer\//.test(l)), 'nothing is written after');
  assert.deepEqual(r.violations, []);
});

// Seed 3 restores a backup taken before the role (and the writer lease) was first used: the restored table holds
// neither item, so the bump cannot raise them. The epoch floor it raises does: the first claim of a key the table
// lacks starts above it (docs/TESTING.md, "The election world").
const EARLY_BACKUP = 3;

test(`a backup from before the role's first use, restored and bumped, does not repeat an epoch (seed ${EARLY_BACKUP})`, async () => {
  const r = await runElectionSchedule(EARLY_BACKUP, undefined, { backupBeforeUse: true });
  const restoredAt = r.trace.findIndex((l) => l.endsWith('restore: the restored table is in use'));
  assert.ok(restoredAt >= 0, `seed ${EARLY_BACKUP} no longer restores:\n${r.trace.join('\n')}`);
  assert.deepEqual(r.violations, []);
  const epochs = (lines: readonly string[]) => lines.flatMap((l) => /leads with epoch (\d+)$/.exec(l)?.[1] ?? []).map(Number);
  // A candidate that joined before the restore may still log its old epoch after it; the restored table had no floor
  // (nor role item), so the bump raised the floor from 0 to DEFAULT_BUMP, and the next joins start above it.
  const [before, after] = [epochs(r.trace.slice(0, restoredAt)), epochs(r.trace.slice(restoredAt))];
  assert.ok(before.length > 0, 'a leader before the restore');
  assert.ok(
    after.some((e) => e > DEFAULT_BUMP),
    `a leader after the restore starts above the floor ${DEFAULT_BUMP}: ${after.join(', ')}`,
  );
  const writer = r.trace.flatMap((l) => / w2 is the writer with epoch (\d+)$/.exec(l)?.[1] ?? []).map(Number);
  assert.ok(writer.length === 1 && writer[0] > DEFAULT_BUMP, `w2's first flip of the writer lease starts above the floor: ${writer.join(', ')}`);
  const unfloored = await runElectionSchedule(EARLY_BACKUP, 'restore-no-floor', { backupBeforeUse: true });
  assert.ok(
    unfloored.violations.some((v) => v.includes('an epoch repeated')),
    `without the floor the same schedule repeats an epoch: ${unfloored.violations.join('; ')}`,
  );
});

// Each broken rule, applied by the harness only, must be caught from seed FROM within this many schedules.
const WITHIN = 100;
for (const mutation of ELECTION_MUTATIONS) {
  test(`the broken variant ${mutation} is caught from seed ${FROM} within ${WITHIN} schedules, and that schedule passes on the real code`, async () => {
    let caught: number | undefined;
    for (let seed = FROM; seed < FROM + WITHIN && caught === undefined; seed++)
      if ((await runElectionSchedule(seed, mutation)).violations.length > 0) caught = seed;
    assert.notEqual(caught, undefined, `${mutation} not caught in ${WITHIN} schedules from seed ${FROM}`);
    const honest = await runElectionSchedule(caught!);
    assert.deepEqual(honest.violations, [], `the same schedule (seed ${caught}) on the real code must pass`);
  });
}

test("no-stop-check is caught from outside: a ledger write sent past its writer's stop time, computed from the sends of its own joins, claims and renewals", async () => {
  let found: string | undefined;
  for (let seed = FROM; seed < FROM + 20 && found === undefined; seed++)
    found = (await runElectionSchedule(seed, 'no-stop-check')).violations.find((v) => / sent (append|raise) at .* past its stop time /.test(v));
  assert.ok(found, 'no ledger write past its stop time in 20 schedules with the check off');
});

test('an unknown mutation is refused before anything runs', async () => {
  await assert.rejects(runElectionSchedule(1, 'no-such-rule'), /unknown election mutation no-such-rule/);
});

/**
 * The election world (harness/explore/election-world.ts): the real election, handover, restore bump, manifest and
 * epoch ledger on the in-memory stores and virtual time, interleaved and faulted at every store call by the seeded
 * scheduler. No store endpoint, no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { DEFAULT_BUMP } from '../core/restore';
import { ELECTION_MUTATIONS, runElectionSchedule } from '../harness/explore/election-world';

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

test('an unknown mutation is refused before anything runs', async () => {
  await assert.rejects(runElectionSchedule(1, 'no-such-rule'), /unknown election mutation no-such-rule/);
});

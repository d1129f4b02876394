/**
 * Deterministic exploration (harness/explore, `fencepost simulate explore`): the real runJob, lease, fenced batch and
 * sweeper on the in-memory stores and virtual time, interleaved and faulted at every store call by a seeded scheduler.
 * No store endpoint, no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explore, replayCommand } from '../harness/explore/explore';
import { MUTATIONS } from '../harness/explore/mutations';
import { runSchedule } from '../harness/explore/world';

test('50 schedules from seed 42 on the real code: no violation, faults injected, and the same digest twice', async () => {
  const first = await explore(42, 50);
  const second = await explore(42, 50);
  assert.deepEqual(
    first.violations.map((v) => [v.replay, v.violations]),
    [],
  );
  assert.equal(first.schedules, 50);
  assert.ok(
    Object.keys(first.crashPoints).some((p) => p.startsWith('crash ')),
    'the schedules crashed an actor somewhere',
  );
  assert.equal(second.digest, first.digest);
  assert.deepEqual(second.crashPoints, first.crashPoints);
});

test('a schedule replays exactly from its own seed: schedule i of seed N is seed N + i', async () => {
  const traces: (readonly string[])[] = [];
  await explore(42, 3, undefined, (r) => void traces.push(r.trace));
  const alone = await runSchedule(44);
  assert.deepEqual(alone.trace, traces[2]);
  assert.notDeepEqual(alone.trace, traces[1]);
  assert.equal(replayCommand(44, 'fence-below'), 'fencepost simulate explore --seed 44 --schedules 1 --mutation fence-below');
});

// Each broken rule, applied by the harness only, must be caught from seed 42 within this many schedules.
const WITHIN = 100;
for (const mutation of MUTATIONS) {
  test(`the broken variant ${mutation} is caught from seed 42 within ${WITHIN} schedules, and its replay fails alone`, async () => {
    let caught: number | undefined;
    await explore(42, WITHIN, mutation, (r) => {
      if (r.violations.length > 0) caught = r.seed;
      return caught === undefined;
    });
    assert.notEqual(caught, undefined, `${mutation} not caught in ${WITHIN} schedules from seed 42`);
    const replay = await runSchedule(caught!, mutation);
    assert.ok(replay.violations.length > 0, `the replay of seed ${caught} found nothing`);
    const honest = await runSchedule(caught!);
    assert.deepEqual(honest.violations, [], `the same schedule on the real code must pass`);
  });
}

// Seed 623 crashes the sweeper at the step between its two: on the real code after `start`, before the re-queue
// record; under requeue-before-start after the QUEUED write, before `start`. Its holders die too (the night is orphaned).
const BETWEEN = 623;

test(`a sweeper crashed between its start and its re-queue record is replaced by a fresh one, and the night is DONE (seed ${BETWEEN})`, async () => {
  const r = await runSchedule(BETWEEN);
  const crash = r.trace.findIndex((l) => / sweeper-1 requeue CRASH /.test(l));
  assert.ok(crash >= 0, `seed ${BETWEEN} no longer crashes sweeper-1 at its re-queue record:\n${r.trace.join('\n')}`);
  const before = r.trace.slice(0, crash).filter((l) => / sweeper-1 /.test(l));
  assert.match(before.at(-1)!, / sweeper-1 starts a new run of /, 'the crash is right after the start');
  assert.ok(
    r.trace.slice(crash).some((l) => / sweeper-2 recorded the re-queue of /.test(l)),
    'the fresh sweeper, with no sightings, sees the orphan again',
  );
  assert.deepEqual(r.violations, []);
  assert.equal(r.state, 'DONE');
});

test(`the sweeper's old order (QUEUED, out of the index, then start) strands the night when it dies between the two (seed ${BETWEEN})`, async () => {
  const r = await runSchedule(BETWEEN, 'requeue-before-start');
  const crash = r.trace.findIndex((l) => / sweeper-1 startExecution CRASH /.test(l));
  assert.ok(crash >= 0, `seed ${BETWEEN} no longer crashes sweeper-1 at its start:\n${r.trace.join('\n')}`);
  const before = r.trace.slice(0, crash).filter((l) => / sweeper-1 /.test(l));
  assert.match(before.at(-1)!, / sweeper-1 requeueOut$/, 'the crash is right after the QUEUED write');
  assert.equal(r.state, 'QUEUED');
  assert.ok(
    r.violations.some((v) => v.includes('never DONE')),
    `liveness must catch the stranded night: ${JSON.stringify(r.violations)}`,
  );
});

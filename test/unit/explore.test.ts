/**
 * Deterministic exploration (verify/explore, `fencepost simulate explore`): the real runJob, lease, fenced batch and
 * sweeper on the in-memory stores and virtual time, interleaved and faulted at every store call by a seeded scheduler.
 * No store endpoint, no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explore, replayCommand, type ExploreSummary } from '../../verify/explore/explore';
import { MUTATIONS, NIGHT_MUTATIONS } from '../../verify/explore/mutations';
import { VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { leaseOverlapChecks, type LockWrite, rateErrorCovered } from '../../lib/testing/history';
import { Actor, type PlacedFault, Scheduler } from '../../lib/testing/scheduler';
import { runSchedule, type NightPlaced } from '../../verify/explore/night-world';
import type { ScheduleResult } from '../../lib/testing/world';
import { WORLD_NAMES, WORLDS, worldOf, worldsFor } from '../../verify/explore/worlds';
import { parseSimulate, simulate } from '../../cli/simulate';
import { ConfigError } from '../../lib/core/errors';

test('50 schedules from seed 42 on the real code: no violation, faults injected, and the same digest twice', async () => {
  const first = await explore(42, 50, { world: 'night' });
  const second = await explore(42, 50, { world: 'night' });
  assert.deepEqual(
    first.violations.map((v) => [v.replay, v.violations]),
    [],
  );
  assert.equal(first.schedules, 50);
  assert.ok(
    Object.keys(first.crashPoints).some((p) => p.startsWith('night crash ')),
    'the schedules crashed an actor somewhere',
  );
  assert.equal(second.digest, first.digest);
  assert.deepEqual(second.crashPoints, first.crashPoints);
});

test('a schedule replays exactly from its own seed: schedule i of seed N is seed N + i', async () => {
  const traces: (readonly string[])[] = [];
  await explore(42, 3, { world: 'night', onSchedule: (r) => void traces.push(r.trace) });
  const alone = await runSchedule(44);
  assert.deepEqual(alone.trace, traces[2]);
  assert.notDeepEqual(alone.trace, traces[1]);
  assert.equal(replayCommand(44, 'night', 'fence-below'), 'fencepost simulate explore --world night --seed 44 --schedules 1 --mutation fence-below');
});

// Each broken rule, applied by the harness only, must be caught from seed 42 within this many schedules.
const WITHIN = 100;
for (const mutation of [...MUTATIONS, ...NIGHT_MUTATIONS]) {
  test(`the broken variant ${mutation} is caught from seed 42 within ${WITHIN} schedules, and its replay fails alone`, async () => {
    let caught: number | undefined;
    await explore(42, WITHIN, {
      world: 'night',
      mutation,
      onSchedule: (r) => {
        if (r.violations.length > 0) caught = r.seed;
        return caught === undefined;
      },
    });
    assert.notEqual(caught, undefined, `${mutation} not caught in ${WITHIN} schedules from seed 42`);
    const replay = await runSchedule(caught!, mutation);
    assert.ok(replay.violations.length > 0, `the replay of seed ${caught} found nothing`);
    const honest = await runSchedule(caught!);
    assert.deepEqual(honest.violations, [], `the same schedule on the real code must pass`);
  });
}

// Both holders die (holder-1 at its first batch, holder-2, the duplicate trigger, at its first read): the night is
// left CLAIMED for the sweeper. Placed, not drawn, so every seed has the case.
const ORPHANED: NightPlaced = {
  duplicateAtMs: 2_000,
  faults: [
    { actor: 'holder-1', method: 'recordBatch', kind: 'crash' },
    { actor: 'holder-2', method: 'read', kind: 'crash' },
  ],
};
const also = (...faults: PlacedFault[]): NightPlaced => ({ ...ORPHANED, faults: [...ORPHANED.faults, ...faults] });
const SEEDS = [1, 2, 3];

for (const seed of SEEDS)
  test(`a sweeper crashed between its start and its re-queue record is replaced by a fresh one, and the run it started makes the night DONE (seed ${seed})`, async () => {
    const r = await runSchedule(seed, undefined, also({ actor: 'sweeper-1', method: 'requeue', kind: 'crash' }));
    const crash = r.trace.findIndex((l) => / sweeper-1 requeue CRASH /.test(l));
    assert.ok(crash >= 0, r.trace.join('\n'));
    const before = r.trace.slice(0, crash).filter((l) => / sweeper-1 /.test(l));
    const started = / sweeper-1 starts a new run (\S+)$/.exec(before.at(-1)!);
    assert.ok(started, `the crash is right after the start: ${before.at(-1)}`);
    assert.ok(
      r.trace.slice(crash).some((l) => / sweeper-2 starts$/.test(l)),
      'a fresh sweeper replaces the dead one',
    );
    const holder = r.trace[r.trace.indexOf(before.at(-1)!) + 1].split(' ')[1];
    assert.ok(
      r.trace.some((l) => l.includes(` ${holder} ends completed `)),
      `the run started before the crash (${holder}) completes the night`,
    );
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  });

test('a sweeper dead between its start and its record, whose started run dies too: the fresh sweeper starts another run, and it makes the night DONE', async () => {
  for (const seed of SEEDS) {
    const r = await runSchedule(
      seed,
      undefined,
      also({ actor: 'sweeper-1', method: 'requeue', kind: 'crash' }, { actor: 'holder-3', method: 'recordBatch', kind: 'crash' }),
    );
    assert.ok(
      r.trace.some((l) => / holder-3 recordBatch CRASH /.test(l)),
      r.trace.join('\n'),
    );
    const runs = r.trace.map((l) => / (sweeper-\d+) starts a new run (\S+)$/.exec(l)).filter((m) => m !== null);
    assert.deepEqual(
      runs.map((m) => m[1]),
      ['sweeper-1', 'sweeper-2'],
      `seed ${seed}: the dead sweeper's run, then the fresh sweeper's`,
    );
    assert.notEqual(runs[0][2], runs[1][2], "a new name: the fence the fresh sweeper saw is the dead run's");
    assert.ok(r.trace.some((l) => / holder-4 ends completed token \d+$/.test(l)));
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test('two nights orphaned at once: the sweeper pages through both claimed rows (a page is one row), re-queues each, and both end DONE', async () => {
  for (const seed of SEEDS) {
    // holder-1 (tonight) dies at its first batch, holder-2 (yesterday's, started beside it) at its first batch, and
    // holder-3 (tonight's duplicate trigger) at its first read: two claimed rows are left for the sweeper.
    const placed: NightPlaced = {
      duplicateAtMs: 2_000,
      yesterday: true,
      faults: [
        { actor: 'holder-1', method: 'recordBatch', kind: 'crash' },
        { actor: 'holder-2', method: 'recordBatch', kind: 'crash' },
        { actor: 'holder-3', method: 'read', kind: 'crash' },
      ],
    };
    const r = await runSchedule(seed, undefined, placed);
    assert.ok(
      r.trace.some((l) => / holder-2 starts 2026-09-27$/.test(l)),
      r.trace.join('\n'),
    );
    // One pass of the sweeper reads the shard page by page: two of its queries at the same virtual time.
    const pages = r.trace.filter((l) => / sweeper-1 claimedPage$/.test(l)).map((l) => l.split(' ')[0]);
    assert.ok(
      pages.some((at, k) => pages.indexOf(at) !== k),
      `a pass reads a second page: ${pages.join(', ')}`,
    );
    const runs = r.trace.map((l) => / starts a new run requeue-(\d{4}-\d\d-\d\d)-/.exec(l)?.[1]).filter((d) => d !== undefined);
    assert.deepEqual(new Set(runs), new Set(['2026-09-28', '2026-09-27']), 'each night is re-queued');
    assert.equal(r.trace.at(-1)!.replace(/^\S+ /, ''), 'end: night DONE, 2026-09-27 DONE');
    assert.deepEqual(r.violations, []);
  }
});

test("the sweeper's old order (QUEUED, out of the index, then start) strands the night when it dies between the two", async () => {
  for (const seed of SEEDS) {
    const placed = also({ actor: 'sweeper-1', method: 'startExecution', kind: 'crash' });
    assert.deepEqual((await runSchedule(seed, undefined, placed)).violations, [], `seed ${seed}: the same schedule passes on the real code`);
    const r = await runSchedule(seed, 'requeue-before-start', placed);
    const crash = r.trace.findIndex((l) => / sweeper-1 startExecution CRASH /.test(l));
    assert.ok(crash >= 0, r.trace.join('\n'));
    const before = r.trace.slice(0, crash).filter((l) => / sweeper-1 /.test(l));
    assert.match(before.at(-1)!, / sweeper-1 requeueOut$/, 'the crash is right after the QUEUED write');
    assert.equal(r.state, 'QUEUED');
    assert.ok(
      r.violations.some((v) => v.includes('never DONE')),
      `liveness must catch the stranded night (seed ${seed}): ${JSON.stringify(r.violations)}`,
    );
  }
});

test('a claim and a batch each delivered twice (the SDK resending after a lost answer): the holder raises at once, with no second claim or wait, and completes at token 1', async () => {
  for (const seed of SEEDS) {
    const placed: NightPlaced = {
      faults: [
        { actor: 'holder-1', method: 'claim', kind: 'twice' },
        { actor: 'holder-1', method: 'recordBatch', nth: 2, kind: 'twice' },
      ],
    };
    const r = await runSchedule(seed, undefined, placed);
    const claim = r.trace.findIndex((l) => / holder-1 claim TWICE /.test(l));
    assert.ok(claim >= 0, r.trace.join('\n'));
    assert.match(r.trace[claim + 1], / holder-1 raiseJob$/, 'the holder raises at once: no second claim, no wait');
    assert.ok(r.trace.some((l) => / holder-1 recordBatch TWICE /.test(l)));
    assert.ok(r.trace.some((l) => / holder-1 ends completed token 1$/.test(l)));
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test("an actor's wall clock: a step moves it at once, a rate error from then on, and the reading stays continuous", async () => {
  const clock = new VirtualClock();
  const a = new Actor('a', clock);
  const wall0 = clock.wallMs();
  assert.equal(a.wallMs(), wall0);
  a.stepWall(-3_000);
  await clock.advance(500);
  assert.equal(a.wallMs(), wall0 + 500 - 3_000);
  await clock.advance(500);
  a.setWallRate(1.5);
  assert.equal(a.wallMs(), wall0 + 1_000 - 3_000, 'no jump where the rate changes');
  await clock.advance(2_000);
  assert.equal(a.wallMs(), wall0 + 3_000 - 3_000 + 0.5 * 2_000);
  a.setWallRate(1);
  await clock.advance(2_000);
  assert.equal(a.wallMs(), wall0 + 5_000 - 3_000 + 0.5 * 2_000, 'the error gained stays');
});

test('the clock the real code is given is the actor: its own wall clock, and the shared monotonic time', async () => {
  const clock = new VirtualClock();
  const [a, b] = [new Actor('a', clock), new Actor('b', clock)];
  a.stepWall(-14_000);
  await clock.advance(2_000);
  assert.equal(a.wallMs(), clock.wallMs() - 14_000);
  assert.equal(b.wallMs(), clock.wallMs());
  assert.equal(a.monotonicMs(), b.monotonicMs());
});

test('a paused actor runs nothing until it wakes, a crashed one nothing ever; a timer cancelled while it waits never fires', async () => {
  const clock = new VirtualClock();
  const [a, b] = [new Actor('a', clock), new Actor('b', clock)];
  const fired: string[] = [];
  a.after(100, () => fired.push(`a at ${clock.monotonicMs()}`));
  const cancelled = a.after(150, () => fired.push('a cancelled'));
  b.after(100, () => fired.push(`b at ${clock.monotonicMs()}`));
  a.pause(500);
  b.crash();
  await clock.advance(200);
  cancelled.cancel(); // it fell due during the pause and waits for the wake-up: cancelling it now still cancels it
  await clock.advance(1_000);
  assert.deepEqual(fired, ['a at 500']);
});

// One exploration of the real code over a fixed range, shared by the tests below (whatever faults its seeds draw).
const RANGE = { from: 42, schedules: 100 };
let range: Promise<{ summary: ExploreSummary; results: ScheduleResult[] }> | undefined;
const exploreRange = () =>
  (range ??= (async () => {
    const results: ScheduleResult[] = [];
    const summary = await explore(RANGE.from, RANGE.schedules, { world: 'night', onSchedule: (r) => void results.push(r) });
    return { summary, results };
  })());
const LAST = RANGE.from + RANGE.schedules - 1;

// The real code times no duration on the wall clock: stepped and drifting wall clocks change nothing it decides.
// Each fault placed on a holder (at its claim, the moment its lease's end is written) and on the sweeper (at its read
// of the lock, the moment it judges the lease), back and forward, with the duplicate trigger waiting on the lease.
const WALL_FAULTS: readonly PlacedFault[][] = (
  [
    { kind: 'wall-step', ms: -15_000 },
    { kind: 'wall-step', ms: 15_000 },
    { kind: 'wall-rate', rate: 0.5 },
    { kind: 'wall-rate', rate: 1.5 },
  ] as const
).map((f) => [
  { ...f, actor: 'holder-1', method: 'claim' },
  { ...f, actor: 'sweeper-1', method: 'read' },
]);

test('wall-clock steps and rate errors on holders and sweepers: the real code has no violation', async () => {
  for (const faults of WALL_FAULTS)
    for (const seed of SEEDS) {
      for (const placed of [{ duplicateAtMs: 2_000, faults }, also(...faults)]) {
        const r = await runSchedule(seed, undefined, placed);
        const landed = r.trace.filter((l) => / (holder|sweeper)-1 WALL-(STEP|RATE) /.test(l)).length;
        assert.equal(landed, 2, `both wall faults land (seed ${seed}):\n${r.trace.join('\n')}`);
        assert.deepEqual(r.violations, [], `seed ${seed}, ${JSON.stringify(placed)}`);
        assert.equal(r.state, 'DONE');
      }
    }
});

test(`the real code has no violation in the seeds ${RANGE.from}..${LAST}, whatever faults they draw`, async () => {
  const { summary } = await exploreRange();
  assert.deepEqual(
    summary.violations.map((v) => [v.replay, v.violations]),
    [],
  );
});

// holder-1's wall clock steps back at its claim, so the lease's end it writes is already past on holder-2's clock.
const WALL_BACK: NightPlaced = { duplicateAtMs: 2_000, faults: [{ actor: 'holder-1', method: 'claim', kind: 'wall-step', ms: -15_000 }] };

test('claim-on-wall-clock: a wall clock stepped back lets the naive claim land while the holder still acts, two holders at once; the real claim waits', async () => {
  for (const seed of SEEDS) {
    const broken = await runSchedule(seed, 'claim-on-wall-clock', WALL_BACK);
    assert.ok(
      broken.violations.some((v) => v.startsWith('two holders at once')),
      `seed ${seed}: ${JSON.stringify(broken.violations)}`,
    );
    const honest = await runSchedule(seed, undefined, WALL_BACK);
    assert.ok(honest.trace.some((l) => / holder-1 WALL-STEP -15000 ms at claim@/.test(l)));
    assert.deepEqual(honest.violations, []);
  }
});

// A late answer: the store applies holder-1's claim at once and the answer reaches it 5 s later; its first renewal's
// answer is 6 s late too. The lease counts its stop time from the send, so holder-1 stops at 8 s; counted from the
// answer (stop-time-from-answer) it acts on to 13 s, past the lease the store granted from 0.
const LATE_ANSWERS: NightPlaced = {
  faults: [
    { actor: 'holder-1', method: 'claim', kind: 'late', ms: 5_000 },
    { actor: 'holder-1', method: 'renew', kind: 'late', ms: 6_000 },
  ],
};

test('late answers: the stop time counts from the send, so an answer that comes late does not stretch the lease', async () => {
  for (const seed of SEEDS) {
    const honest = await runSchedule(seed, undefined, LATE_ANSWERS);
    assert.ok(
      honest.trace.some((l) => /^0 holder-1 claim LATE 5000 ms at claim@/.test(l)),
      honest.trace.join('\n'),
    );
    assert.ok(
      honest.trace.some((l) => / holder-1 ends lost-lease token 1$/.test(l)),
      `seed ${seed}: holder-1 stops at its stop time`,
    );
    assert.deepEqual(honest.violations, []);
    assert.equal(honest.state, 'DONE');
    const broken = await runSchedule(seed, 'stop-time-from-answer', LATE_ANSWERS);
    assert.ok(
      broken.violations.some((v) => /^holder-1 sent \w+ at \d+ ms, past its stop time 8000 ms/.test(v)),
      `seed ${seed}: ${JSON.stringify(broken.violations)}`,
    );
  }
});

// holder-1 claims at 0 and every renewal it sends is throttled, so its lease runs out at its claim + lease - margin on
// its own clock; holder-2 (the duplicate, from 1 ms) claims a lease after it last saw holder-1's item change, on a
// clock that runs true. A pause at holder-1's 5th batch pushes its last batch past holder-2's claim in true time.
const SLOW_HOLDER = (rate: number): NightPlaced => ({
  duplicateAtMs: 1,
  rates: [{ actor: 'holder-1', rate }],
  faults: [
    ...Array.from({ length: 40 }, (_, i): PlacedFault => ({ actor: 'holder-1', method: 'renew', nth: i + 1, kind: 'throttle' })),
    { actor: 'holder-1', method: 'recordBatch', nth: 5, kind: 'pause', ms: 1_500 },
  ],
});

test('monotonic rate errors: a holder slow by half of what the margin covers, no violation; slow by three times that, it acts after the next claim', async () => {
  const covered = rateErrorCovered(LEASE_DEFAULTS);
  for (const seed of SEEDS) {
    const within = await runSchedule(seed, undefined, SLOW_HOLDER(-covered / 2));
    assert.ok(within.trace.includes(`0 holder-1 MONO-RATE x${1 - covered / 2}`), within.trace.slice(0, 5).join('\n'));
    assert.deepEqual(within.violations, [], `seed ${seed}`);
    assert.equal(within.state, 'DONE');
    const beyond = await runSchedule(seed, undefined, SLOW_HOLDER(-3 * covered));
    assert.ok(
      beyond.violations.some((v) => /^two holders at once: holder-1 sent \w+ at [\d.]+ ms with token 1, after holder-2 claimed token 2/.test(v)),
      `seed ${seed}: ${JSON.stringify(beyond.violations)}`,
    );
    // Its own rule held: on its own clock it never acted past its stop time. Only the true time shows the overlap.
    assert.ok(!beyond.violations.some((v) => /past its stop time/.test(v)), JSON.stringify(beyond.violations));
  }
});

test('the rate error the margin covers: a slow holder stops (lease - margin) / (1 - r) after its send, no later than a fast claimant claims, lease / (1 + r)', () => {
  const lease = { leaseMs: 10_000, marginMs: 2_000 };
  const r = rateErrorCovered(lease);
  assert.ok(Math.abs((lease.leaseMs - lease.marginMs) / (1 - r) - lease.leaseMs / (1 + r)) < 1e-9, `r = ${r}: the two meet`);
  const slower = r * 1.01;
  assert.ok((lease.leaseMs - lease.marginMs) / (1 - slower) > lease.leaseMs / (1 + slower), 'past it, they overlap');
});

test("the lease overlap check allows a claimant's clock fast by up to the rate error given, and no more", () => {
  const claimAt = (at: number): LockWrite[] => [
    { method: 'claim', key: 'k', holder: 'a', leaseMs: 10_000, epoch: 1, at: 0 },
    { method: 'claim', key: 'k', holder: 'b', leaseMs: 10_000, epoch: 2, at },
  ];
  assert.deepEqual(leaseOverlapChecks(claimAt(10_000)), []);
  assert.equal(leaseOverlapChecks(claimAt(9_999)).length, 1);
  assert.deepEqual(leaseOverlapChecks(claimAt(10_000 / 1.05), 0.05), []);
  assert.equal(leaseOverlapChecks(claimAt(10_000 / 1.05 - 1), 0.05).length, 1);
});

test("a paused actor's overdue timers run at its wake-up in the order they fell due, whatever its clock's rate; a timer set then runs after them", async () => {
  for (const rate of [0, 0.0076, -0.3]) {
    const clock = new VirtualClock();
    const a = new Actor('a', clock);
    a.rate = rate;
    const fired: string[] = [];
    a.after(100, () => {
      fired.push('first');
      a.after(0, () => fired.push('set at the wake-up'));
    });
    a.after(300, () => fired.push('second'));
    a.after(1_000, () => fired.push('due at the end'));
    a.pause(1_000);
    await clock.advance(2_000);
    const at = (what: string) => fired.indexOf(what);
    assert.ok(at('first') === 0 && at('second') === 1, `rate ${rate}: ${fired.join(', ')}`);
    assert.ok(at('set at the wake-up') > at('second') && at('due at the end') > at('second'), `rate ${rate}: ${fired.join(', ')}`);
    if (rate === 0) assert.deepEqual(fired, ['first', 'second', 'due at the end', 'set at the wake-up']);
    assert.ok(a.monotonicMs() >= 1_000);
  }
});

test('a pause made longer while timers are held holds them to its new end', async () => {
  const clock = new VirtualClock();
  const a = new Actor('a', clock);
  const fired: number[] = [];
  a.after(100, () => fired.push(clock.monotonicMs()));
  a.pause(500);
  await clock.advance(200);
  a.pause(1_000); // from 200: to 1,200
  await clock.advance(2_000);
  assert.deepEqual(fired, [1_200]);
});

// AWS's other answers to a transaction: a 500 after the batch was applied, a 503 before it was, and a cancellation
// for throttling (an error on the server's side does not say whether the request was applied). Each is retried with the same request token by the real code.
const SERVER_ERRORS: NightPlaced = {
  faults: [
    { actor: 'holder-1', method: 'recordBatch', nth: 1, kind: 'server-error', applied: true, status: 500 },
    { actor: 'holder-1', method: 'recordBatch', nth: 3, kind: 'server-error', applied: false, status: 503 },
    { actor: 'holder-1', method: 'recordBatch', nth: 5, kind: 'throttle-cancel' },
  ],
};

test('a 500 on the fenced batch after it applied, a 503 before, and a transaction cancelled for throttling: retried, each item recorded once, the night DONE', async () => {
  for (const seed of SEEDS) {
    const r = await runSchedule(seed, undefined, SERVER_ERRORS);
    for (const line of [
      / holder-1 recordBatch SERVER-ERROR 500 \(applied\) at /,
      / holder-1 recordBatch SERVER-ERROR 503 \(not applied\) at /,
      / holder-1 recordBatch THROTTLE-CANCEL at /,
    ])
      assert.ok(
        r.trace.some((l) => line.test(l)),
        `seed ${seed}: ${String(line)}\n${r.trace.join('\n')}`,
      );
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    assert.equal(r.state, 'DONE');
    assert.ok(
      r.trace.some((l) => / holder-1 ends completed token 1$/.test(l)),
      `seed ${seed}: holder-1 rode through all three`,
    );
  }
});

// A request slow on the way there: holder-1's first batch, sent after a passed check, is on the wire 15 s while
// holder-1's renewals are all throttled; holder-2 (from 1 ms) claims once holder-1's lease is over, raises the fences,
// and only then does the batch reach the store.
const SLOW_WRITE: NightPlaced = {
  duplicateAtMs: 1,
  faults: [
    ...Array.from({ length: 40 }, (_, i): PlacedFault => ({ actor: 'holder-1', method: 'renew', nth: i + 1, kind: 'throttle' })),
    { actor: 'holder-1', method: 'recordBatch', nth: 1, kind: 'slow', ms: 15_000 },
  ],
};

test('a write slow on the wire lands after the next holder raised the fence: refused by the fence; with fence-below, accepted and caught', async () => {
  for (const seed of SEEDS) {
    const r = await runSchedule(seed, undefined, SLOW_WRITE);
    assert.ok(
      r.trace.some((l) => /^1000 holder-1 recordBatch SLOW 15000 ms at /.test(l)),
      r.trace.join('\n'),
    );
    const landed = r.trace.findIndex((l) => / holder-1 recordBatch applied \(sent earlier\)$/.test(l));
    const raised = r.trace.findIndex((l) => / holder-2 raiseFence$/.test(l));
    assert.ok(raised >= 0 && landed > raised, `seed ${seed}: the batch lands after holder-2 raised a fence`);
    assert.match(r.trace[landed + 1], / holder-1 batch REFUSED token 1 below fence 2 explore#2026-09-28#chunk#00$/, `seed ${seed}`);
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    assert.equal(r.state, 'DONE');
    const broken = await runSchedule(seed, 'fence-below', SLOW_WRITE);
    assert.ok(
      broken.violations.some((v) => /^holder-1's batch at token 1 (passed the fence 2|accepted below the fence 2)/.test(v)),
      `seed ${seed}: ${JSON.stringify(broken.violations)}`,
    );
  }
});

test("a late answer reaches its actor the given time after the call applied; a crashed actor's never does", async () => {
  const clock = new VirtualClock();
  const plan = { chance: 0, budget: 0, maxPauseMs: 0, windowMs: 0 };
  const scheduler = new Scheduler(clock, () => 0, plan, undefined, undefined, {
    faults: [
      { actor: 'a', method: 'write', kind: 'late', ms: 700 },
      { actor: 'b', method: 'write', kind: 'late', ms: 700 },
    ],
  });
  const applied: string[] = [];
  const answered: string[] = [];
  const [a, b] = [new Actor('a', clock), new Actor('b', clock)];
  for (const actor of [a, b])
    void scheduler
      .wrap({ write: async () => void applied.push(`${actor.name} at ${clock.monotonicMs()}`) }, actor)
      .write()
      .then(() => answered.push(`${actor.name} at ${clock.monotonicMs()}`));
  await scheduler.run(() => applied.length === 2 && clock.monotonicMs() >= 100, 100, 100);
  b.crash();
  await scheduler.run(() => false, 5_000, 100);
  assert.deepEqual(applied.sort(), ['a at 0', 'b at 0']);
  assert.deepEqual(answered, ['a at 700']);
});

test("steering by chance: an actor's first call of a method is faulted at `share` times the chance, its later calls at the chance", async () => {
  const clock = new VirtualClock();
  // The chance is 0.1, and 10 × 0.1 = 1 at each actor's first write.
  const plan = { chance: 0.1, budget: 100, maxPauseMs: 0, windowMs: 1_000, chanceAt: [{ methods: ['write'], share: 10, first: true }] };
  // Every draw 0.5: above the chance of 0.1, below the first write's 1 (its kind: a throttle, the third of four).
  const scheduler = new Scheduler(clock, () => 0.5, plan);
  const actors = ['a', 'b'].map((name) => new Actor(name, clock));
  for (const actor of actors) {
    const store = scheduler.wrap({ write: async () => undefined }, actor);
    void store
      .write()
      .catch(() => undefined)
      .then(() => store.write());
  }
  await scheduler.run(() => false, 500, 100);
  assert.deepEqual(
    scheduler.faults.map((f) => `${f.kind} ${f.point}`),
    ['throttle write@1', 'throttle write@1'],
  );
  assert.deepEqual(
    actors.map((a) => a.calls.get('write')),
    [2, 2],
  );
});

test('fence-lt: the holder that raised the fence is refused by it (fenced out at its own token), and the night is never DONE', async () => {
  const r = await runSchedule(42, 'fence-lt');
  const fencedOut = r.trace.filter((l) => / ends fenced-out token /.test(l));
  assert.ok(fencedOut.length > 0, r.trace.join('\n'));
  assert.ok(
    r.violations.some((v) => v.includes('never DONE')),
    JSON.stringify(r.violations),
  );
  assert.deepEqual((await runSchedule(42)).violations, []);
});

// StartExecution as AWS answers it: the same name again starts nothing. Placed: the sweeper's start delivered twice,
// and a sweep that fails after its start (its re-queue record throttled) retried under the same name.
test('StartExecution delivered twice or retried under the same name starts one run', async () => {
  const cases: [PlacedFault, RegExp][] = [
    [{ actor: 'sweeper-1', method: 'startExecution', kind: 'twice' }, / sweeper-1 startExecution TWICE at /],
    [{ actor: 'sweeper-1', method: 'requeue', kind: 'throttle' }, / sweeper-1: sweep \S+ failed: ThrottlingException$/],
  ];
  for (const [fault, landed] of cases)
    for (const seed of SEEDS) {
      const r = await runSchedule(seed, undefined, also(fault));
      assert.ok(
        r.trace.some((l) => landed.test(l)),
        `seed ${seed}: ${fault.kind} lands:\n${r.trace.join('\n')}`,
      );
      const started = r.trace.map((l) => / starts a new run (\S+)$/.exec(l)?.[1]).filter((n) => n !== undefined);
      assert.equal(started.length, 1, `seed ${seed}: one run started: ${started.join(', ')}`);
      assert.ok(
        r.trace.some((l) => l.includes(`start ${started[0]}: exists`)),
        `seed ${seed}: the second start met the first execution:\n${r.trace.join('\n')}`,
      );
      assert.deepEqual(r.violations, []);
      assert.equal(r.state, 'DONE');
    }
});

// Every run name started in the range is started once, whatever the seeds draw.
test(`a run name is started once in the seeds ${RANGE.from}..${LAST}`, async () => {
  const { results } = await exploreRange();
  for (const r of results) {
    const started = r.trace.map((l) => / starts a new run (\S+)$/.exec(l)?.[1]).filter((n) => n !== undefined);
    assert.equal(new Set(started).size, started.length, `seed ${r.seed}: a run name started twice: ${started.join(', ')}`);
  }
});

// All worlds (the CLI's default): the seed picks the world among those that take the mutation, so the same seed is
// the same schedule, and the replay command names its world.
test('--world all: each seed runs the world it picks, replays alone in that world, and the digest repeats', async () => {
  const picked: string[] = [];
  const n = 2 * WORLD_NAMES.length; // two schedules of each world
  const first = await explore(42, n, { onSchedule: (_r, world) => void picked.push(world) });
  assert.deepEqual(
    picked,
    Array.from({ length: n }, (_, i) => WORLD_NAMES[(42 + i) % WORLD_NAMES.length]),
  );
  assert.deepEqual(first.worlds, Object.fromEntries(WORLD_NAMES.map((w) => [w, 2])));
  assert.equal((await explore(42, n)).digest, first.digest);
  const alone = await WORLDS[worldOf(44, WORLD_NAMES)].run(44);
  const traces: (readonly string[])[] = [];
  await explore(44, 1, { world: worldOf(44, WORLD_NAMES), onSchedule: (r) => void traces.push(r.trace) });
  assert.deepEqual(traces[0], alone.trace);
  // A mutation only some worlds apply rotates among those.
  assert.deepEqual(worldsFor('all', 'requeue-before-start'), ['night']);
  assert.deepEqual(worldsFor('election', 'fence-lt'), []);
});

test('simulate explore bad input: one clear line per problem, and nothing run', async () => {
  const problems = (args: string[]) =>
    simulate(parseSimulate(['explore', ...args])).then(
      () => ['ran'],
      (e: unknown) => (e instanceof ConfigError ? e.problems : [String(e)]),
    );
  assert.deepEqual(await problems(['--world', 'moon', '--schedules', '0']), [
    '--schedules must be a whole number of at least 1, got "0"',
    `--world must be all or one of ${WORLD_NAMES.join(', ')}, got "moon"`,
  ]);
  assert.deepEqual(await problems(['--world', 'election', '--mutation', 'fence-lt']), [
    '--mutation fence-lt is not applied in the election world; it is in: night, workflow',
  ]);
  const [unknown] = await problems(['--mutation', 'no-such-rule']);
  assert.match(
    unknown!,
    /^--mutation must be one of fence-below, .*pg-count-unchecked, .*pg-leak-on-error, lease-epoch-deleted, got "no-such-rule"$/,
  );
});

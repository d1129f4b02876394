/**
 * The fixed cost of an idle job (issue 25 item 13): the sweeper sweeps only while a night can be claimed, from the
 * nightly start's hour through the deadline's hour, read from the synthesized template's schedules; a night orphaned
 * outside that window is re-queued at the window's first sweeps (virtual time, the in-memory stores); and
 * docs/PERFORMANCE.md's fixed-cost table is the one bench/fixed-cost.ts computes from the template, not typed by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fixedCostTable, minutesOfDay, userJobTemplate } from '../../bench/fixed-cost';
import { VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { Events } from '../../lib/core/events';
import * as fence from '../../lib/core/fence';
import { runJob } from '../../lib/core/job';
import { jobKeys } from '../../lib/core/job-keys';
import { claim } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { SWEEPER_DEFAULTS, Sweeper } from '../../lib/core/sweeper';

/** An untyped JSON document (a template): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

/** The sweeper schedule's expression and the nightly one's, as the template holds them. */
function schedules(extra: Parameters<typeof userJobTemplate>[0] = {}) {
  const { template, job, stack } = userJobTemplate(extra);
  const id = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
  const all = Object.values(template.Resources).filter((r: Json) => r.Type === 'AWS::Scheduler::Schedule');
  const starting = (smId: string) => all.find((s: Json) => JSON.stringify(s.Properties.Target.Arn).includes(smId))!.Properties;
  return { sweeper: starting(id(job.sweeper.stateMachine)), nightly: starting(id(job.stateMachine)), job };
}

/**
 * The minutes of the day from the nightly start to the end of the deadline's hour, across midnight, computed from the
 * two schedules' own minutes: the night runs from its start until the next deadline after it.
 */
function nightMinutes(start: number, deadlineHour: number): Set<number> {
  const deadline = deadlineHour * 60;
  const minutes = new Set<number>();
  for (let m = start; ; m = (m + 1) % 1440) {
    minutes.add(m);
    if (minutes.size > 1 && m === deadline) break;
  }
  for (let m = deadline; m < deadline + 60; m++) minutes.add(m % 1440); // the deadline's hour, as the alarm reads it
  return minutes;
}

for (const [what, scheduleExpression, deadlineHour] of [
  ['a late start across midnight', 'cron(30 22 * * ? *)', 3],
  ["a start in the deadline hour, after the deadline (the night ends at the next day's deadline)", 'cron(30 5 * * ? *)', 5],
] as const) {
  test(`the default sweeper sweeps every minute of the night and at most its hours, in its time zone: ${what}`, () => {
    const { sweeper, nightly } = schedules({ scheduleExpression, deadlineHour, scheduleTimeZone: 'Europe/Paris' });
    assert.equal(sweeper.ScheduleExpressionTimezone, nightly.ScheduleExpressionTimezone, 'the same zone as the nightly start');
    const fires = new Set(minutesOfDay(sweeper.ScheduleExpression));
    const [start] = minutesOfDay(nightly.ScheduleExpression);
    const night = nightMinutes(start, deadlineHour);
    for (const m of night) assert.ok(fires.has(m), `swept at minute ${m} of the day (${sweeper.ScheduleExpression})`);
    // Whole hours only (Scheduler's cron): what is swept beyond the night is the start hour's minutes before the start.
    const extra = [...fires].filter((m) => !night.has(m));
    assert.ok(
      extra.length < 60 && extra.every((m) => Math.floor(m / 60) === Math.floor(start / 60) && m < start),
      `only the night's hours: ${extra.length} more minutes`,
    );
  });
}

test('a rate(...) nightly schedule, or a sweeperScheduleExpression given, keeps the sweeper on that schedule', () => {
  assert.equal(
    minutesOfDay(schedules({ scheduleExpression: 'rate(6 hours)' }).sweeper.ScheduleExpression).length,
    1440,
    'a night may start at any hour',
  );
  assert.equal(schedules({ sweeperScheduleExpression: 'rate(5 minutes)' }).sweeper.ScheduleExpression, 'rate(5 minutes)');
});

test('liveness outside the window: a night orphaned at noon (a run started by hand that died) is re-queued by the first sweeps of the next window, and completes', async () => {
  const { sweeper: schedule } = schedules();
  const fires = new Set(minutesOfDay(schedule.ScheduleExpression));
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockStore = new MemoryLockStore();
  const keys = jobKeys('digests');
  const date = '2026-03-14';
  const MINUTE = 60_000;
  const noon = 12 * 60;
  // Virtual time 0 is noon of the day after the night: a run started by hand claims, raises and dies.
  const leaseDeps = { locks: lockStore, clock, events: new Events('by-hand', clock) };
  const dead = await claim(leaseDeps, keys.lock(date), 'by-hand', LEASE_DEFAULTS);
  await fence.raise({ jobs: store, clock }, keys.job(date), dead.token, 'by-hand', 1);
  const started: number[] = [];
  // One sweep per minute the schedule fires: its own execution, sighting, waiting a lease, sighting again.
  for (let minute = noon; started.length === 0 && minute < noon + 2 * 1440; minute++) {
    if (!fires.has(minute % 1440)) {
      await clock.advance(MINUTE);
      continue;
    }
    const sweeper = new Sweeper({ job: keys.name, jobs: store, locks: lockStore, clock }, SWEEPER_DEFAULTS);
    await sweeper.sweep();
    await clock.advance(LEASE_DEFAULTS.leaseMs);
    const r = await sweeper.sweep();
    if (r.requeued.length > 0) started.push(minute);
    await clock.advance(MINUTE - LEASE_DEFAULTS.leaseMs);
  }
  const firstWindowMinute = [...fires].sort((a, b) => a - b)[0];
  assert.deepEqual(
    started.map((m) => m % 1440),
    [firstWindowMinute],
    "nothing sweeps it outside the window; the window's first sweep re-queues it (the row stayed in the index)",
  );
  const run = runJob(
    { locks: lockStore, jobs: store, clock, events: new Events('requeued', clock) },
    { keys, date, chunks: 1, holder: 'requeued', config: LEASE_DEFAULTS },
    async () => 1,
  );
  await clock.runUntilIdle(1_000);
  assert.equal((await run).outcome, 'completed');
  assert.equal((await fence.readJob({ jobs: store }, keys.job(date)))?.state, 'DONE');
});

test('docs/PERFORMANCE.md holds the fixed-cost table bench/fixed-cost.ts computes from the synthesized template', async () => {
  const doc = readFileSync(path.join(__dirname, '..', '..', 'docs', 'PERFORMANCE.md'), 'utf8');
  const table = await fixedCostTable();
  assert.ok(doc.includes(table), `docs/PERFORMANCE.md should hold, as npx tsx bench/fixed-cost.ts prints it:\n${table}`);
});

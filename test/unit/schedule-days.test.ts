/**
 * A schedule that would skip a night, and one that runs on some days only. EventBridge Scheduler skips a start at a
 * local time that a daylight-saving jump removes, and starts a repeated local time once
 * (https://repost.aws/knowledge-center/eventbridge-scheduler-adjust-dst): FencedJob refuses a schedule whose every
 * start of some night falls in such a gap of its zone. And the NotDone alarm checks only the deadlines that follow a
 * scheduled start: a weekday-only schedule does not page on Saturday.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { ConfigError } from '../../lib/core/errors';
import { FencedJob, type FencedJobProps } from '../../lib/constructs/index';
import { parseStackConfig } from '../../apps/billing/config';

/** An untyped JSON document (a template, as CDK hands it out). */
type Json = ReturnType<typeof JSON.parse>;

function job(props: Partial<FencedJobProps>): { stack: Stack; job: FencedJob } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Reports');
  const fn = new lambda.Function(stack, 'Chunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async () => ({});'),
    timeout: Duration.seconds(30),
  });
  return { stack, job: new FencedJob(stack, 'Job', { name: 'weekly-digest', chunkFunction: fn, chunks: 3, ...props }) };
}

function refusal(props: Partial<FencedJobProps>): ConfigError | undefined {
  try {
    job(props);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  return undefined;
}

/** The local wall-clock minutes (hh:mm) that occur in `timeZone` on a local date, read with Intl minute by minute. */
function localMinutesOn(timeZone: string, date: string): Set<string> {
  const format = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  const seen = new Set<string>();
  const [y, m, d] = date.split('-').map(Number);
  for (let t = Date.UTC(y, m - 1, d) - 86_400_000; t < Date.UTC(y, m - 1, d) + 2 * 86_400_000; t += 60_000) {
    const p = Object.fromEntries(format.formatToParts(t).map((x) => [x.type, x.value]));
    if (`${p.year}-${p.month}-${p.day}` === date) seen.add(`${p.hour}:${p.minute}`);
  }
  return seen;
}

test('a local-time start inside a daylight-saving gap is refused at synth, naming scheduleExpression and the night it would skip', () => {
  const err = refusal({ scheduleExpression: 'cron(0 2 * * ? *)', scheduleTimeZone: 'Europe/Paris' });
  assert.ok(err, 'cron(0 2 * * ? *) under Europe/Paris is refused');
  const problem = err.problems.find((p) => p.startsWith('scheduleExpression '));
  assert.ok(problem, err.message);
  // The night it names really has no 02:00 in Paris (read with Intl, minute by minute), and has the hours around it.
  const date = /\(on (\d{4}-\d{2}-\d{2})\)/.exec(problem)?.[1];
  assert.ok(date, problem);
  const minutes = localMinutesOn('Europe/Paris', date);
  assert.ok(!minutes.has('02:00') && minutes.has('01:59') && minutes.has('03:00'), `${date} skips 02:00 in Paris`);
  assert.match(problem, /skips 02:00–03:00/);

  // A 30-minute jump is found too: Lord Howe Island goes from +10:30 to +11:00 at 02:00.
  assert.ok(refusal({ scheduleExpression: 'cron(15 2 * * ? *)', scheduleTimeZone: 'Australia/Lord_Howe' }), '02:15 on Lord Howe');
  assert.equal(refusal({ scheduleExpression: 'cron(45 2 * * ? *)', scheduleTimeZone: 'Australia/Lord_Howe' }), undefined, '02:45 exists');
  // New York's gap is on a Sunday in March, 02:00–03:00.
  assert.ok(refusal({ scheduleExpression: 'cron(30 2 ? * SUN *)', scheduleTimeZone: 'America/New_York' }), 'Sundays at 02:30 in New York');

  // Times that exist every night are accepted: the hour before, a zone without DST, days the gap never falls on,
  // and a schedule with another start that night.
  for (const [scheduleExpression, scheduleTimeZone] of [
    ['cron(30 1 * * ? *)', 'Europe/Paris'],
    ['cron(0 2 * * ? *)', 'UTC'],
    ['cron(0 2 ? * MON-FRI *)', 'Europe/Paris'],
    ['cron(0 2 * 6-9 ? *)', 'Europe/Paris'],
    ['cron(0 1,2 * * ? *)', 'Europe/Paris'],
    ['rate(1 day)', 'Europe/Paris'],
  ] as const) {
    assert.equal(refusal({ scheduleExpression, scheduleTimeZone }), undefined, `${scheduleExpression} in ${scheduleTimeZone}`);
  }

  // Billing refuses the same through its cdk.json settings.
  assert.throws(
    () => parseStackConfig({ scheduleExpression: 'cron(0 2 * * ? *)', scheduleTimeZone: 'Europe/Paris' }),
    (e: unknown) => e instanceof ConfigError && e.problems.some((p) => /^scheduleExpression .*daylight saving/.test(p)),
  );
});

/**
 * The NotDone alarm's value for the 1-day window ending at `deadline` when no run completed in it, by the template:
 * its window starts 24 hours before (CloudWatch stamps a datapoint with its period's start), and its metric is either
 * the completed runs (0) or `IF(<DAY(runs) == n OR …>, runs, 1)` over them.
 */
function notDoneWithoutRun(alarm: Json, deadline: Date): number {
  if (alarm.Properties.MetricName) return 0; // the plain metric: no datapoint is breaching, every day
  const queries = alarm.Properties.Metrics as Json[];
  const top = queries.find((q) => q.ReturnData !== false);
  const m = /^IF\((.+), (\w+), 1\)$/.exec(top.Expression as string);
  assert.ok(m, `an IF over the days: ${top.Expression}`);
  const days = [...m[1].matchAll(/DAY\((\w+)\) == (\d)/g)].map((d) => Number(d[2]));
  assert.equal(m[1], days.map((d) => `DAY(${m[2]}) == ${d}`).join(' OR '), 'only DAY(...) == n terms');
  const start = new Date(deadline.getTime() - 86_400_000);
  const day = start.getUTCDay() === 0 ? 7 : start.getUTCDay(); // CloudWatch's DAY: Monday 1 … Sunday 7
  return days.includes(day) ? 0 : 1;
}

/** The window's end: the deadline, as the alarm's wall-clock zone ("-05:00") places its midnight. */
function deadlineOn(alarm: Json, date: string): Date {
  const zone = alarm.Properties.EvaluationWindow.WallClockWindow.Timezone as string;
  return new Date(`${date}T00:00:00${zone}`);
}

function notDoneAlarm(props: Partial<FencedJobProps>): Json {
  const { stack, job: j } = job(props);
  const t = Template.fromStack(stack).toJSON() as { Resources: Record<string, Json> };
  return t.Resources[stack.getLogicalId(j.alarms.alarms.notDone.node.defaultChild as never)];
}

test("the NotDone alarm follows the schedule's days: a weekday-only schedule does not page on Saturday or Sunday, and does on a weekday", () => {
  // Starts Monday to Friday at 01:30 UTC; deadline 05:00 UTC. The week of Monday 2026-12-07.
  const weekdays = notDoneAlarm({ scheduleExpression: 'cron(30 1 ? * MON-FRI *)' });
  const starts = ['2026-12-07', '2026-12-08', '2026-12-09', '2026-12-10', '2026-12-11'].map((d) => new Date(`${d}T01:30:00Z`));
  for (const date of ['2026-12-07', '2026-12-08', '2026-12-09', '2026-12-10', '2026-12-11', '2026-12-12', '2026-12-13']) {
    const end = deadlineOn(weekdays, date);
    const due = starts.some((s) => s < end && s.getTime() >= end.getTime() - 86_400_000); // a start in the window
    assert.equal(notDoneWithoutRun(weekdays, end), due ? 0 : 1, `${date}: ${due ? 'pages' : 'does not page'} when no run completed`);
  }

  // Starts Sunday to Thursday at 23:30 in Paris, after the 05:00 deadline: each is checked at the next morning's.
  const evenings = notDoneAlarm({ scheduleExpression: 'cron(30 23 ? * SUN-THU *)', scheduleTimeZone: 'Europe/Paris' });
  const winter = ['2026-12-06', '2026-12-07', '2026-12-08', '2026-12-09', '2026-12-10'].map((d) => new Date(`${d}T23:30:00+01:00`));
  for (const date of ['2026-12-07', '2026-12-08', '2026-12-09', '2026-12-10', '2026-12-11', '2026-12-12', '2026-12-13']) {
    const end = deadlineOn(evenings, date);
    const due = winter.some((s) => s < end && s.getTime() >= end.getTime() - 86_400_000);
    assert.equal(notDoneWithoutRun(evenings, end), due ? 0 : 1, `${date} in Paris: ${due ? 'pages' : 'does not page'}`);
  }

  // A schedule that runs every day keeps the plain daily alarm.
  assert.equal(notDoneAlarm({}).Properties.MetricName, 'RunsCompleted');
});

/**
 * The fixed monthly cost of one idle fenced job (issue 25): what a FencedJob costs while no night runs, counted from
 * its SYNTHESIZED template, priced at AWS's list prices (docs/PERFORMANCE.md "The fixed cost of an idle job" cites
 * each page). Counted, not typed: the alarms, the dashboards and the KMS keys the template holds; the custom metrics
 * its alarms and dashboard read (namespace, name and dimensions, as CloudWatch bills them); the schedules and how
 * often each fires in a 30-day month (their expressions, read by a small cron reader below); and the state transitions
 * of one idle sweep (the sweeper's definition run in aws-local-stepfunctions with stub tasks that sight nothing).
 *
 *   npx tsx bench/fixed-cost.ts      prints the table docs/PERFORMANCE.md holds (test/unit/fixed-cost.test.ts compares them)
 */
import { App, Duration, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { FencedJob, type FencedJobProps } from '../lib/constructs/index';
import { METRICS_NAMESPACE } from '../lib/core/observability';
// Also installs the Promise.withResolvers polyfill aws-local-stepfunctions needs on Node 20.
import '../lib/local/workflow';

/** A synthesized template, as CDK hands it out. */
type Json = ReturnType<typeof JSON.parse>;

/** us-east-1 list prices, each from the page docs/PERFORMANCE.md cites beside it (F1–F5). */
const PRICES = {
  /** F1: Step Functions Standard, per state transition ($0.025 per 1,000). */
  transition: 0.025 / 1000,
  /** F2: CloudWatch, per standard-resolution alarm metric a month. */
  alarm: 0.1,
  /** F2: CloudWatch, per custom metric a month (the first 10,000). */
  customMetric: 0.3,
  /** F3: CloudWatch, per dashboard a month. */
  dashboard: 3,
  /** F4: KMS, per customer managed key a month (each rotation's new backing key adds $1 a month, not counted here). */
  kmsKey: 1,
  /** F5: EventBridge Scheduler, per invocation above the free 14 million a month ($1.00 per million). */
  schedulerInvocation: 1 / 1_000_000,
} as const;

/** The values one cron field matches: `*`, `?`, numbers, ranges `a-b`, lists, `*\/n` steps (enough for a schedule's minute and hour). */
function cronField(field: string, max: number): number[] {
  if (field === '*' || field === '?') return Array.from({ length: max }, (_, i) => i);
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const [range, step] = part.split('/');
    const [a, b] = range === '*' ? [0, max - 1] : range.split('-').map(Number);
    for (let v = a; v <= (b ?? (step ? max - 1 : a)); v += Number(step ?? 1)) out.add(v);
  }
  return [...out].filter((v) => v >= 0 && v < max);
}

/**
 * The minutes of a day (0..1439, in the schedule's own zone) a Scheduler expression fires on, for an expression that
 * fires every day (`rate(…)`, or a cron whose day fields are `*` / `?`).
 */
export function minutesOfDay(expression: string): number[] {
  const rate = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (rate) {
    const every = Number(rate[1]) * ({ minute: 1, minutes: 1, hour: 60, hours: 60, day: 1440, days: 1440 } as const)[rate[2] as 'minute'];
    return Array.from({ length: Math.ceil(1440 / every) }, (_, i) => i * every);
  }
  const cron = /^cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)$/.exec(expression);
  if (!cron) throw new Error(`not a Scheduler expression: ${expression}`);
  if (![cron[3], cron[4], cron[5]].every((f) => f === '*' || f === '?')) throw new Error(`fires on some days only: ${expression}`);
  return cronField(cron[2], 24).flatMap((h) => cronField(cron[1], 60).map((m) => h * 60 + m));
}

/** A user's job as the README makes one: a name, their chunk function, a chunk count; every other setting its default. */
export function userJobTemplate(extra: Partial<FencedJobProps> = {}): {
  template: { Resources: Record<string, Json> };
  job: FencedJob;
  stack: Stack;
} {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Digests');
  const fn = new lambda.Function(stack, 'DigestChunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async (e) => ({ chunk: e.chunk });'),
    timeout: Duration.seconds(45),
  });
  const job = new FencedJob(stack, 'Job', { name: 'digests', chunkFunction: fn, chunks: 3, ...extra });
  return { template: app.synth().getStackByName('Digests').template as { Resources: Record<string, Json> }, job, stack };
}

const ofType = (t: { Resources: Record<string, Json> }, type: string) => Object.values(t.Resources).filter((r: Json) => r.Type === type);

/** A CloudFormation value as text: the strings of a Fn::Join, a placeholder for each reference. */
function flat(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as Record<string, unknown>;
  if (o['Fn::Join']) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return parts.map(flat).join(sep);
  }
  if (o['Fn::GetAtt']) return `arn:aws:lambda:us-east-1:000000000000:function:${(o['Fn::GetAtt'] as string[])[0]}`;
  if (o.Ref) return `ref-${String(o.Ref)}`;
  return JSON.stringify(v);
}

/** The custom metrics (the app's namespace) the alarms and the dashboard read, each as CloudWatch identifies it. */
function customMetrics(t: { Resources: Record<string, Json> }): Set<string> {
  const out = new Set<string>();
  const key = (name: string, dims: Record<string, string>) => `${name}|${JSON.stringify(Object.entries(dims).sort())}`;
  for (const a of ofType(t, 'AWS::CloudWatch::Alarm')) {
    const p = a.Properties;
    if (p.Namespace === METRICS_NAMESPACE)
      out.add(key(p.MetricName, Object.fromEntries((p.Dimensions ?? []).map((d: Json) => [d.Name, flat(d.Value)]))));
  }
  for (const d of ofType(t, 'AWS::CloudWatch::Dashboard')) {
    const body = JSON.parse(flat(d.Properties.DashboardBody)) as { widgets: Array<{ properties: { metrics?: unknown[][] } }> };
    for (const w of body.widgets)
      for (const m of w.properties.metrics ?? []) {
        const parts = m.filter((x) => typeof x === 'string') as string[];
        if (parts[0] !== METRICS_NAMESPACE) continue;
        const dims: Record<string, string> = {};
        for (let i = 2; i + 1 < parts.length; i += 2) dims[parts[i]] = parts[i + 1];
        out.add(key(parts[1], dims));
      }
  }
  return out;
}

/** The state transitions of one sweep that sights nothing: the synthesized definition, run with stub tasks. */
async function idleSweepTransitions(t: { Resources: Record<string, Json> }, sweeperId: string): Promise<number> {
  const { StateMachine } = await import('aws-local-stepfunctions');
  const definition = JSON.parse(flat(t.Resources[sweeperId].Properties.DefinitionString)) as { States: Record<string, { Type: string }> };
  const handlers = Object.fromEntries(
    Object.entries(definition.States)
      .filter(([, s]) => s.Type === 'Task')
      .map(([name]) => [name, async () => ({ claimed: 0, sightings: [], waitSeconds: 0 })]),
  );
  const machine = new StateMachine(definition as never, { validationOptions: { checkArn: false } });
  const execution = machine.run({} as never, { overrides: { taskResourceLocalHandlers: handlers as never } });
  let n = 0;
  const watch = (async () => {
    for await (const ev of execution.eventLogs as AsyncIterable<{ type: string }>) if (ev.type === 'StateEntered') n++;
  })();
  await execution.result;
  await watch;
  return n;
}

/** What an idle job holds and what it costs a month, line by line, from its template. */
async function fixedCost(extra: Partial<FencedJobProps> = {}) {
  const { template, job, stack } = userJobTemplate(extra);
  const sweeperId = stack.getLogicalId(job.sweeper.stateMachine.node.defaultChild as never);
  const schedules = ofType(template, 'AWS::Scheduler::Schedule').map((s: Json) => ({
    expression: String(s.Properties.ScheduleExpression),
    starts: flat(s.Properties.Target.Arn),
  }));
  const sweeperSchedule = schedules.find((s) => s.starts.includes(sweeperId));
  if (!sweeperSchedule) throw new Error('no schedule starts the sweeper');
  const sweepsPerMonth = minutesOfDay(sweeperSchedule.expression).length * 30;
  const perSweep = await idleSweepTransitions(template, sweeperId);
  const invocations = schedules.reduce((n, s) => n + (s === sweeperSchedule ? sweepsPerMonth : minutesOfDay(s.expression).length * 30), 0);
  const counts = {
    alarms: ofType(template, 'AWS::CloudWatch::Alarm').length,
    customMetrics: customMetrics(template).size,
    dashboards: ofType(template, 'AWS::CloudWatch::Dashboard').length,
    kmsKeys: ofType(template, 'AWS::KMS::Key').length,
    schedules: schedules.length,
    sweeperExpression: sweeperSchedule.expression,
    sweepsPerMonth,
    transitionsPerIdleSweep: perSweep,
    schedulerInvocations: invocations,
  };
  const lines = [
    { item: `sweeper: idle sweeps × ${perSweep} state transitions each (F1)`, n: sweepsPerMonth, usd: sweepsPerMonth * perSweep * PRICES.transition },
    { item: 'alarms (F2)', n: counts.alarms, usd: counts.alarms * PRICES.alarm },
    {
      item: 'custom metrics the alarms and dashboard read (F2; an upper bound: a metric no sweep publishes costs less)',
      n: counts.customMetrics,
      usd: counts.customMetrics * PRICES.customMetric,
    },
    { item: 'dashboards (F3)', n: counts.dashboards, usd: counts.dashboards * PRICES.dashboard },
    { item: 'KMS keys (F4)', n: counts.kmsKeys, usd: counts.kmsKeys * PRICES.kmsKey },
    {
      item: `invocations of the ${counts.schedules} schedules (F5, above the free 14 million)`,
      n: invocations,
      usd: invocations * PRICES.schedulerInvocation,
    },
  ];
  return { counts, lines, total: lines.reduce((sum, l) => sum + l.usd, 0) };
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

/** The table docs/PERFORMANCE.md holds: the default job, and the same job sweeping every minute (the old default). */
export async function fixedCostTable(): Promise<string> {
  const windowed = await fixedCost();
  const always = await fixedCost({ sweeperScheduleExpression: 'rate(1 minute)' });
  const cell = (l: { n: number; usd: number }) => `${fmtInt(l.n)}: $${l.usd.toFixed(2)}`;
  const rows = windowed.lines.map((l, i) => `| ${l.item} | ${cell(l)} | ${cell(always.lines[i])} |`);
  return [
    `| a month (30 days), one job, list prices before free tiers | sweeper \`${windowed.counts.sweeperExpression}\` (the default) | \`${always.counts.sweeperExpression}\` |`,
    '|---|---|---|',
    ...rows,
    `| **total** | **$${windowed.total.toFixed(2)}** | **$${always.total.toFixed(2)}** |`,
  ].join('\n');
}

if (require.main === module) {
  fixedCostTable().then(
    (t) => console.log(t),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

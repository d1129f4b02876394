/**
 * Two fenced jobs in one account keep their metrics apart (issue 18, defect 2). Billing and reindex are synthesized
 * in one app; for every function of each job, the metrics it publishes are read from what Powertools really prints:
 * lib/lambda/runtime.ts is loaded in a child process with that function's environment from the template (Powertools
 * reads POWERTOOLS_* when the module loads, as in Lambda) and its embedded-metric-format line is parsed. Every alarm
 * and every dashboard series on the app's namespace must then match the publications of its own job and of no
 * other: CloudWatch matches a metric by namespace, name and its exact set of dimensions, so another job's success
 * cannot satisfy a "not done" alarm, nor its rejections fire another job's alarm.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { App, type Stack } from 'aws-cdk-lib';
import { readFileSync } from 'node:fs';
import { FencepostStack } from '../../apps/billing/stack';
import { readStackConfig } from '../../apps/billing/config';
import { ReindexStack } from '../../apps/reindex/stack';
import { METRICS_NAMESPACE } from '../../lib/core/observability';
import { Env } from '../../lib/lambda/env';
import type { FencedJob } from '../../lib/constructs/index';

/** An untyped JSON document (a template): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

const root = path.join(__dirname, '..', '..');
const cdkJson = JSON.parse(readFileSync(path.join(root, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };
// Bundling skipped: the templates' environments are what these tests read.
const app = new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
const billing = new FencepostStack(app, 'Billing', { config: readStackConfig(app) });
const reindex = new ReindexStack(app, 'Reindex');
const jobs: ReadonlyArray<{ stack: Stack; job: FencedJob }> = [
  { stack: billing, job: billing.billing },
  { stack: reindex, job: reindex.job },
];
const assembly = app.synth();
const templateOf = (stack: Stack) => assembly.getStackByName(stack.stackName).template as { Resources: Record<string, Json> };

/** A metric as CloudWatch identifies it: namespace and the exact set of dimensions (name=value, sorted). */
const identity = (namespace: string, dims: Record<string, unknown>) =>
  `${namespace}|${Object.entries(dims)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .sort()
    .join(',')}`;

/** The EMF a process with `environment` prints for one metric, read by the real lib/lambda/runtime.ts. */
async function published(environment: Record<string, string>): Promise<string> {
  const script =
    "const { MetricUnit } = require('@aws-lambda-powertools/metrics'); const { metrics } = require('./lib/lambda/runtime');" +
    "metrics.addMetric('Probe', MetricUnit.Count, 1); metrics.publishStoredMetrics();";
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: root,
    env: { PATH: process.env.PATH, ...environment },
  });
  const emf = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Json)
    .find((r) => r._aws);
  assert.ok(emf, `an EMF line in ${JSON.stringify(stdout)}`);
  const directive = emf._aws.CloudWatchMetrics[0];
  const dims = Object.fromEntries((directive.Dimensions[0] as string[]).map((d) => [d, emf[d]]));
  return identity(directive.Namespace, dims);
}

/** What each job's functions publish: one identity per distinct Powertools environment among its functions. */
async function publicationsOf(stack: Stack, jobName: string): Promise<Set<string>> {
  const functions = Object.values(templateOf(stack).Resources).filter(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment?.Variables?.[Env.jobName] === jobName,
  );
  const handlers = functions.map((f) => f.Properties.Environment.Variables[Env.handler] ?? 'the chunk function');
  assert.ok(functions.length >= 8, `${jobName}: its workflow's, sweeper's and chunk functions (${handlers.join(', ')})`);
  const environments = new Map<string, Record<string, string>>();
  for (const f of functions) {
    const vars = f.Properties.Environment.Variables as Record<string, unknown>;
    const powertools = Object.fromEntries(Object.entries(vars).filter(([k, v]) => k.startsWith('POWERTOOLS_') && typeof v === 'string')) as Record<
      string,
      string
    >;
    environments.set(JSON.stringify(powertools), powertools);
  }
  return new Set(await Promise.all([...environments.values()].map(published)));
}

/** The app-namespace metrics an alarm reads (a single metric, or the MetricStats of a math expression). */
function alarmMetrics(alarm: Json): Json[] {
  const p = alarm.Properties;
  const all = p.MetricName
    ? [{ Namespace: p.Namespace, MetricName: p.MetricName, Dimensions: p.Dimensions }]
    : (p.Metrics ?? []).flatMap((m: Json) => (m.MetricStat ? [m.MetricStat.Metric] : []));
  return all.filter((m: Json) => m.Namespace === METRICS_NAMESPACE);
}

/** A dashboard body with its references as placeholders (only the app's own series are read). */
function joined(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Json;
  if (v['Fn::Join']) return (v['Fn::Join'][1] as unknown[]).map(joined).join(v['Fn::Join'][0]);
  return `<${JSON.stringify(v).replace(/"/g, "'")}>`;
}

/** The app-namespace series of a dashboard: `[namespace, name, dim, value, …, {options}]`. */
function dashboardSeries(dashboard: Json): { name: string; dims: Record<string, string> }[] {
  const body = JSON.parse(joined(dashboard.Properties.DashboardBody)) as Json;
  const out: { name: string; dims: Record<string, string> }[] = [];
  for (const w of body.widgets as Json[]) {
    for (const m of (w.properties?.metrics ?? []) as unknown[][]) {
      const strings = m.filter((x): x is string => typeof x === 'string');
      if (strings[0] !== METRICS_NAMESPACE) continue;
      const dims: Record<string, string> = {};
      for (let i = 2; i + 1 < strings.length; i += 2) dims[strings[i]] = strings[i + 1];
      out.push({ name: strings[1], dims });
    }
  }
  return out;
}

test("two jobs in one app: no alarm or dashboard series of one reads the other's metrics, and each reads its own", { timeout: 240_000 }, async () => {
  const publications = new Map<string, Set<string>>();
  for (const { stack, job } of jobs) publications.set(job.name, await publicationsOf(stack, job.name));
  const readers = (id: string) => [...publications].filter(([, ids]) => ids.has(id)).map(([name]) => name);

  for (const { stack, job } of jobs) {
    const resources = Object.values(templateOf(stack).Resources);
    const alarms = resources.filter((r) => r.Type === 'AWS::CloudWatch::Alarm');
    const onApp = alarms.flatMap((a) => alarmMetrics(a).map((m) => ({ alarm: a.Properties.AlarmDescription as string, m })));
    assert.ok(onApp.length >= 4, `${job.name}: its alarms on app metrics (not done, fenced rejections, clock offset, storm)`);
    for (const { alarm, m } of onApp) {
      const dims = Object.fromEntries((m.Dimensions ?? []).map((d: Json) => [d.Name, d.Value]));
      const id = identity(m.Namespace, dims);
      assert.deepEqual(
        readers(id),
        [job.name],
        `${job.name}'s alarm on ${m.MetricName} (${id}) reads only ${job.name}'s functions: "${alarm.slice(0, 60)}…"`,
      );
    }
    const dashboards = resources.filter((r) => r.Type === 'AWS::CloudWatch::Dashboard');
    assert.equal(dashboards.length, 1);
    const series = dashboardSeries(dashboards[0]);
    assert.ok(series.length >= 10, `${job.name}: its dashboard's app series`);
    for (const s of series) {
      const id = identity(METRICS_NAMESPACE, s.dims);
      assert.deepEqual(readers(id), [job.name], `${job.name}'s dashboard series ${s.name} (${id}) reads only ${job.name}'s functions`);
    }
  }
});

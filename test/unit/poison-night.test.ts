/**
 * A poison run in the cloud's shape (issue 25 item 8): the sweeper's VerifyAndRequeue step, on the in-memory stores
 * and a virtual clock, gives up on a night re-queued the configured number of times and says so in its own metric;
 * FencedJob carries the bound to that step and alarms on the metric; a bound that is not a positive integer is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { SFNClient } from '@aws-sdk/client-sfn';
import { App, Duration, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Clients } from '../../lib/core/aws/clients';
import { VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { ConfigError } from '../../lib/core/errors';
import * as fence from '../../lib/core/fence';
import { jobKeys } from '../../lib/core/job-keys';
import { claim } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { METRICS_NAMESPACE, Metric, serviceName } from '../../lib/core/observability';
import { requeue, sightClaimed } from '../../lib/core/sweeper';
import { Env } from '../../lib/lambda/env';
import { createRuntime, metrics } from '../../lib/lambda/runtime';
import { sweepVerifyStep } from '../../lib/lambda/sweep-verify';
import { FencedJob, type FencedJobProps } from '../../lib/constructs/index';
import { noDynamo } from '../support/no-dynamo';

/** An untyped JSON document (a template): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

const JOB = 'digests';
const DATE = '2026-03-14';
const BOUND = 4;

/** The metrics a handler adds, as it adds them (name and value), however Powertools then prints them. */
function recordMetrics(): { added: Array<[string, number]>; restore: () => void } {
  const added: Array<[string, number]> = [];
  const original = metrics.addMetric.bind(metrics);
  metrics.addMetric = (name, unit, value) => {
    added.push([name, value]);
    return original(name, unit, value);
  };
  return { added, restore: () => void (metrics.addMetric = original) };
}

test('VerifyAndRequeue gives up on a night re-queued maxRequeuesPerRun times: it starts nothing, writes nothing, and adds RunsGivenUp', async () => {
  const clock = new VirtualClock();
  const stores = { locks: new MemoryLockStore(), jobs: new MemoryJobStore({ clock, jobs: 'jobs' }), manifests: new MemoryManifestStore() };
  const environment = {
    [Env.jobName]: JOB,
    [Env.chunks]: '1',
    [Env.lockTable]: 'locks',
    [Env.jobTable]: 'jobs',
    [Env.worker]: 'sweeper',
    [Env.jobStateMachineArn]: 'arn:aws:states:us-east-1:111111111111:stateMachine:digests',
    [Env.maxRequeuesPerRun]: String(BOUND),
  };
  const started: string[] = [];
  const sfn = { send: async (c: { input: { name: string } }) => void started.push(c.input.name) } as unknown as SFNClient;
  const rt = createRuntime({ environment, clients: { ddb: noDynamo } as unknown as Clients, stores, clock, sfn });
  // The night's run raised and died, and its re-queues reached the bound (each the sweeper's conditional record).
  const keys = jobKeys(JOB);
  const l = await claim(rt.deps, keys.lock(DATE), 'first-run', LEASE_DEFAULTS);
  await fence.raise(rt.deps, keys.job(DATE), l.token, 'first-run', 1);
  const sweeperDeps = rt.sweeperDeps;
  for (let i = 0; i < BOUND; i++) assert.ok(await requeue(sweeperDeps, (await sightClaimed(sweeperDeps, rt.lease)).sightings[0]));
  const verify = sweepVerifyStep(() => rt);
  const one = async () => {
    const { sightings } = await sightClaimed(sweeperDeps, rt.lease);
    await clock.advance(LEASE_DEFAULTS.leaseMs);
    return verify({ sighted: { sightings }, sweep: `sweep-${clock.monotonicMs()}` });
  };
  const before = JSON.stringify(stores.jobs.dump('jobs'));
  const m = recordMetrics();
  try {
    const out = await one();
    assert.deepEqual([out.requeued, out.givenUp, started], [[], [keys.job(DATE)], []], 'given up: no run started');
  } finally {
    m.restore();
  }
  assert.equal(JSON.stringify(stores.jobs.dump('jobs')), before, 'giving up writes nothing');
  assert.deepEqual(
    m.added.filter(([n]) => n === Metric.runsGivenUp),
    [[Metric.runsGivenUp, 1]],
    'one night given up, in its own metric',
  );
  assert.deepEqual(
    m.added.filter(([n]) => n === Metric.orphansRequeued),
    [[Metric.orphansRequeued, 0]],
  );
});

/** A stack with one user function; bundling is skipped (the template is all these tests read). */
function synth(extra: Partial<FencedJobProps>) {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Digests');
  const fn = new lambda.Function(stack, 'DigestChunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async (e) => ({ chunk: e.chunk });'),
    timeout: Duration.seconds(45),
  });
  const job = new FencedJob(stack, 'Job', { name: JOB, chunkFunction: fn, chunks: 3, ...extra });
  return { stack, job, template: app.synth().getStackByName('Digests').template as { Resources: Record<string, Json> } };
}

test('FencedJob: sweeperMaxRequeuesPerRun reaches the sweeper and its alarm watches RunsGivenUp, its own, under the job', () => {
  const { stack, job, template } = synth({ sweeperMaxRequeuesPerRun: BOUND });
  const verify = template.Resources[stack.getLogicalId(job.sweeper.functions.verify.node.defaultChild as lambda.CfnFunction)];
  assert.equal(verify.Properties.Environment.Variables[Env.maxRequeuesPerRun], String(BOUND));
  const alarms = Object.values(template.Resources).filter(
    (r: Json) => r.Type === 'AWS::CloudWatch::Alarm' && r.Properties.MetricName === Metric.runsGivenUp,
  );
  assert.equal(alarms.length, 1, 'one alarm on RunsGivenUp');
  const p = alarms[0].Properties;
  assert.deepEqual(
    [p.Namespace, p.Dimensions, p.Threshold, p.ComparisonOperator, p.TreatMissingData],
    [METRICS_NAMESPACE, [{ Name: 'service', Value: serviceName(JOB) }], 1, 'GreaterThanOrEqualToThreshold', 'notBreaching'],
  );
  assert.match(p.AlarmDescription, new RegExp(`${BOUND} times`), 'the description says the bound');
  assert.doesNotMatch(p.AlarmDescription, /Part \d/);
  assert.equal(job.alarms.alarms.sweeperGaveUp.alarmArn !== undefined, true);
  assert.equal(synth({}).job.settings.sweeperMaxRequeuesPerRun > 0, true, 'a default');
});

test('a sweeperMaxRequeuesPerRun that is not a positive integer is refused by its name, nothing created', () => {
  for (const bad of [0, 2.5, -1]) {
    assert.throws(
      () => synth({ sweeperMaxRequeuesPerRun: bad }),
      (err) =>
        err instanceof ConfigError &&
        err.problems.length === 1 &&
        err.problems[0].startsWith(`sweeperMaxRequeuesPerRun must be a positive integer, got ${bad}`),
    );
  }
});

/**
 * FencedJob as a library user meets it (lib/index.ts, "fencepost/constructs"): a job that is not billing, with a
 * chunk function of the user's own, gets its keys, grants, environment and state names from its name; bad props are
 * refused all at once; and the tables that hold epochs and fences refuse a TTL attribute even through an escape hatch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { CfnTable } from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';
import { ConfigError } from '../core/errors';
import { Env, FencedJob, LOST_ERRORS, type FencedJobProps } from '../lib/index';
import { resolveJoin } from '../local/workflow';

/** An untyped JSON document (a template, as CDK hands it out): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

/** A stack with one user function; bundling is skipped (the template is all these tests read). */
function stackWith(): { app: App; stack: Stack; fn: lambda.Function } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Reports');
  const fn = new lambda.Function(stack, 'ReportChunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async (e) => ({ chunk: e.chunk });'),
    timeout: Duration.seconds(45),
  });
  return { app, stack, fn };
}

const idOf = (stack: Stack, c: IConstruct) => stack.getLogicalId(c.node.defaultChild as CfnTable);

test("a job named sales-report: the user's chunk function gets the job's environment and the fence's grants, keys and states follow the name", () => {
  const { stack, fn } = stackWith();
  const job = new FencedJob(stack, 'SalesReport', { name: 'sales-report', chunkFunction: fn, chunks: 3 });
  const template = Template.fromStack(stack);
  const t = template.toJSON() as { Resources: Record<string, Json> };
  const locks = idOf(stack, job.leaseTable.table);
  const jobs = idOf(stack, job.fenceTable.table);
  const bucket = idOf(stack, job.manifests.bucket);

  // The environment (lambda/env.ts) is set on the user's function, as on the job's own.
  const vars = t.Resources[idOf(stack, fn)].Properties.Environment.Variables;
  assert.equal(vars[Env.jobName], 'sales-report');
  assert.equal(vars[Env.chunks], '3');
  assert.deepEqual(vars[Env.lockTable], { Ref: locks });
  assert.deepEqual(vars[Env.jobTable], { Ref: jobs });
  assert.deepEqual(vars[Env.bucket], { Ref: bucket });
  assert.equal(vars[Env.leaseMs], '10000');

  // The fence's grants: renew on the lock table, check and mark its chunk fence, the manifest under sales-report/.
  const roleId = (t.Resources[idOf(stack, fn)].Properties.Role as Json)['Fn::GetAtt'][0];
  const statements = Object.values(t.Resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(roleId))
    .flatMap((r) => r.Properties.PolicyDocument.Statement as Json[]);
  const grants = statements.map((s) => [([] as string[]).concat(s.Action).sort().join(','), JSON.stringify(s.Resource)]);
  assert.deepEqual(grants.sort(), [
    ['dynamodb:ConditionCheckItem,dynamodb:UpdateItem', JSON.stringify({ 'Fn::GetAtt': [jobs, 'Arn'] })],
    ['dynamodb:UpdateItem', JSON.stringify({ 'Fn::GetAtt': [locks, 'Arn'] })],
    ['s3:GetObject,s3:PutObject', JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucket, 'Arn'] }, '/sales-report/*']] })],
  ]);

  // The manifest policy covers this job's manifests.
  template.hasResourceProperties('AWS::S3::BucketPolicy', {
    Bucket: { Ref: bucket },
    PolicyDocument: {
      Statement: Match.arrayWith([
        Match.objectLike({
          Effect: 'Deny',
          Action: 's3:PutObject',
          Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucket, 'Arn'] }, '/sales-report/*manifest.json']] },
          Condition: { Null: { 's3:if-match': 'true', 's3:if-none-match': 'true' } },
        }),
      ]),
    },
  });
  template.hasResourceProperties('AWS::S3::Bucket', {
    LifecycleConfiguration: { Rules: Match.arrayWith([Match.objectLike({ Prefix: 'sales-report/', ExpirationInDays: 35 })]) },
  });

  // The state machine invokes the user's function in the chunk step, timed to its own timeout; names follow the job.
  const definition = JSON.parse(resolveJoin(t.Resources[idOf(stack, job.stateMachine)].Properties.DefinitionString)) as Json;
  const chunkStep = definition.States.Chunks.ItemProcessor.States.RunChunk;
  assert.equal(chunkStep.TimeoutSeconds, 75, "the chunk task: the function's 45 s + 30 s");
  assert.match(chunkStep.Resource, new RegExp(`:function:${idOf(stack, fn)}$`), 'the chunk task invokes the user function');
  assert.equal(definition.States.Failed.Error, 'SalesReportFailed');
  assert.deepEqual(definition.States.Chunks.Catch[0].ErrorEquals, LOST_ERRORS);
  const groups = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Logs::LogGroup' && r.Properties.LogGroupName);
  assert.deepEqual(groups.map((g) => g.Properties.LogGroupName).sort(), [
    '/aws/vendedlogs/states/Reports-sales-report',
    '/aws/vendedlogs/states/Reports-sales-report-sweeper',
  ]);
  template.hasResourceProperties('AWS::Scheduler::Schedule', { Description: 'Fencepost: start the nightly sales-report run' });
  assert.deepEqual(job.settings.chunkConcurrency, 1, 'the defaults apply');
});

test('two jobs in one stack keep apart: their own tables, buckets, prefixes and log groups', () => {
  const { app, stack, fn } = stackWith();
  const other = new lambda.Function(stack, 'Other', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async () => ({});'),
  });
  new FencedJob(stack, 'A', { name: 'sales-report', chunkFunction: fn, chunks: 2 });
  new FencedJob(stack, 'B', { name: 'stock-count', chunkFunction: other, chunks: 5 });
  const resources = app.synth().getStackByName(stack.stackName).template.Resources as Record<string, Json>;
  const count = (type: string) => Object.values(resources).filter((r) => r.Type === type).length;
  assert.equal(count('AWS::DynamoDB::Table'), 4);
  assert.equal(count('AWS::StepFunctions::StateMachine'), 4);
  assert.equal(count('AWS::S3::Bucket'), 4, 'a manifest bucket and its access-log bucket each');
});

test('bad props are refused at once, every problem listed, before anything is created', () => {
  const { stack } = stackWith();
  const imported = lambda.Function.fromFunctionArn(stack, 'Imported', 'arn:aws:lambda:us-east-1:111111111111:function:chunk');
  const bad: FencedJobProps = {
    name: 'Sales#Report',
    chunkFunction: imported,
    chunks: 0,
    chunkStepName: 'Claim',
    renewMs: 4_000,
    scheduleTimeZone: 'Mars/Olympus_Mons',
    fencedTables: { Jobs: stackWith().stack.node as never },
  };
  const err = (() => {
    try {
      new FencedJob(stack, 'Bad', bad);
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  assert.ok(err instanceof ConfigError, 'one ConfigError');
  const starts = ['name', 'chunkTimeout', 'chunkStepName', 'fencedTables', 'renewMs', 'chunks', 'scheduleTimeZone'];
  assert.equal(err.problems.length, starts.length, err.message);
  for (const s of starts)
    assert.ok(
      err.problems.some((p) => p.startsWith(s)),
      `names ${s}: ${err.message}`,
    );
  assert.match(err.message, /chunkTimeout is required: the chunk function is not a lambda\.Function of this app/);
  assert.equal(stack.node.tryFindChild('Bad')?.node.children.length ?? 0, 0, 'nothing was created inside the job');
});

test('the lock and job tables refuse a TTL attribute, even one set through an escape hatch', () => {
  for (const table of ['leaseTable', 'fenceTable'] as const) {
    const { app, stack, fn } = stackWith();
    const job = new FencedJob(stack, 'Job', { name: 'sales-report', chunkFunction: fn, chunks: 1 });
    (job[table].table.node.defaultChild as CfnTable).timeToLiveSpecification = { attributeName: 'expires', enabled: true };
    assert.throws(() => app.synth(), /must never have a TTL attribute/, table);
  }
});

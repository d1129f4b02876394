/**
 * The CDK stack, checked on its synthesized template: the stores are exactly schema.ts (no TTL anywhere, Part 5),
 * the bucket is locked down, every alarm exists with its threshold and action, the schedule reaches the state
 * machine with retries and a DLQ, IAM is specific, cdk-nag has nothing unacknowledged, and bad context is refused
 * with every problem listed. One synth of the real cdk.json context is shared by every test (bundling is slow).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import type { CfnResource } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import aslValidator from 'asl-validator';
import { AwsSolutionsChecks } from 'cdk-nag';
import { FencepostStack } from '../../apps/billing/stack';
import {
  CHUNK_TIME,
  CHUNK_TIMEOUT,
  CONTEXT_KEY,
  NEW_ON_DEMAND_WRITE_UNITS,
  ON_DEMAND_TABLE_WRITE_QUOTA,
  STACK_DEFAULTS,
  TRANSACTIONAL_WRU_PER_ITEM,
  billingChunks,
  jobSettings,
  parseStackConfig,
  readStackConfig,
} from '../../apps/billing/config';
import { deadlineWindowZone } from '../../lib/constructs/alarms';
import type { ManifestBucket } from '../../lib/constructs/manifest-bucket';
import { JOB_TABLE, LOCK_TABLE, Attr } from '../../lib/core/schema';
import { BILLING_TABLES, INVOICE_TABLE } from '../../apps/billing/schema';
import { ConfigError } from '../../lib/core/errors';
import { METRICS_NAMESPACE, Metric, serviceName } from '../../lib/core/observability';
import { BILLING_JOB } from '../../apps/billing/keys';
import { MAP_RUN_FAILED, TRANSIENT_ERRORS } from '../../lib/constructs/task-errors';
import { HISTORY, chunkListBytes, chunkMapPlan } from '../../lib/constructs/chunk-plan';
import { CONNECTION_TIMEOUT_MS, REQUEST_TIMEOUT_MS, awsClients } from '../../lib/core/aws/clients';
import { resolveJoin } from '../../lib/local/workflow';

const cdkJson = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'cdk.json'), 'utf8')) as { app: string; context: Record<string, unknown> };

function synth(context: Record<string, unknown>) {
  // CDK's built-in CloudFormation validation (~7 s) only ever warns; `cdk synth` runs it, these assertions needn't.
  const app = new App({ context, builtinCloudFormationValidation: false });
  const stack = new FencepostStack(app, 'Fencepost', { config: readStackConfig(app) });
  return { app, stack, template: Template.fromStack(stack) };
}

const { app, stack, template } = synth(cdkJson.context);
const ref = (c: IConstruct) => ({ Ref: stack.getLogicalId(c.node.defaultChild as CfnResource) });
const arnOf = (c: IConstruct) => ({ 'Fn::GetAtt': [stack.getLogicalId(c.node.defaultChild as CfnResource), 'Arn'] });
/** A resource of the template, as CDK's Template hands it out (untyped JSON: the assertions check its shape). */
type Resource = ReturnType<Template['findResources']>[string];
const ofType = (type: string) => Object.values(template.findResources(type)) as Resource[];

test('cdk.json runs the app with tsx and holds exactly the defaults the code falls back to', () => {
  assert.equal(cdkJson.app, 'npx tsx bin/app.ts');
  assert.deepEqual(cdkJson.context[CONTEXT_KEY], STACK_DEFAULTS);
  assert.deepEqual(parseStackConfig(cdkJson.context[CONTEXT_KEY]), STACK_DEFAULTS);
});

test('tables: one per schema.ts description, no TTL on any, PITR, deletion protection, on-demand, retained, CloudFormation-named', () => {
  const tables = ofType('AWS::DynamoDB::Table');
  assert.equal(tables.length, BILLING_TABLES.length);
  for (const t of tables) {
    // Part 5: "TTL is not a deadline, and it resets epochs"
    assert.equal(t.Properties!.TimeToLiveSpecification, undefined, 'no table has a TTL attribute');
    assert.deepEqual(t.Properties!.PointInTimeRecoverySpecification, { PointInTimeRecoveryEnabled: true });
    assert.equal(t.Properties!.DeletionProtectionEnabled, true);
    assert.equal(t.Properties!.BillingMode, 'PAY_PER_REQUEST');
    assert.equal(t.Properties!.TableName, undefined);
    assert.equal(t.DeletionPolicy, 'Retain');
  }
  const byConstruct = [
    [stack.billing.lockTable, LOCK_TABLE],
    [stack.billing.jobTable, JOB_TABLE],
    [stack.invoices, INVOICE_TABLE],
  ] as const;
  for (const [table, d] of byConstruct) {
    const resource = template.toJSON().Resources[ref(table).Ref] as Resource;
    assert.deepEqual(resource.Properties!.KeySchema, [{ AttributeName: d.partitionKey.name, KeyType: 'HASH' }]);
    assert.equal(resource.Properties!.GlobalSecondaryIndexes?.length ?? 0, d.sparseIndex ? 1 : 0);
  }
});

test("the job table's sparse GSI is keyed exactly on schema.ts's claim attributes, which only claimed rows carry", () => {
  const index = JOB_TABLE.sparseIndex!;
  assert.deepEqual([index.partitionKey.name, index.sortKey.name], [Attr.claimShard, Attr.claimedSince]);
  assert.deepEqual([Attr.claimShard, Attr.claimedSince], ['claim_shard', 'claimed_since']);
  // Sparse: neither is the table's key, so a row is in the index only while it carries both (RUNNING).
  assert.ok(![index.partitionKey.name, index.sortKey.name].includes(JOB_TABLE.partitionKey.name));
  const job = template.toJSON().Resources[ref(stack.billing.jobTable).Ref] as Resource;
  assert.deepEqual(job.Properties!.GlobalSecondaryIndexes, [
    {
      IndexName: index.name,
      KeySchema: [
        { AttributeName: 'claim_shard', KeyType: 'HASH' },
        { AttributeName: 'claimed_since', KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    },
  ]);
  const definitions = [...job.Properties!.AttributeDefinitions].sort((a, b) => a.AttributeName.localeCompare(b.AttributeName));
  assert.deepEqual(definitions, [
    { AttributeName: 'claim_shard', AttributeType: 'S' },
    { AttributeName: 'claimed_since', AttributeType: 'S' },
    { AttributeName: 'pk', AttributeType: 'S' },
  ]);
});

test('manifest bucket: versioned, public access blocked, TLS only, encrypted, access-logged, lifecycle, retained', () => {
  const bucket = ref(stack.billing.manifestBucket!);
  template.hasResource('AWS::S3::Bucket', {
    DeletionPolicy: 'Retain',
    Properties: Match.objectLike({
      VersioningConfiguration: { Status: 'Enabled' },
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      LoggingConfiguration: Match.objectLike({
        DestinationBucketName: ref((stack.billing.node.findChild('Manifests') as ManifestBucket).accessLogs),
      }),
      LifecycleConfiguration: {
        Rules: Match.arrayWith([
          Match.objectLike({ NoncurrentVersionExpiration: { NoncurrentDays: 30 }, Status: 'Enabled' }),
          Match.objectLike({ Prefix: 'billing/', ExpirationInDays: 35, Status: 'Enabled' }),
        ]),
      },
    }),
  });
  template.hasResourceProperties('AWS::S3::BucketPolicy', {
    Bucket: bucket,
    PolicyDocument: {
      Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
    },
  });
});

test('every alarm exists with its metric, threshold and the SNS action; the topic is KMS-encrypted and TLS-only', () => {
  const topic = ref(stack.billing.alarms.topic);
  const c = STACK_DEFAULTS;
  const fromApp = { Namespace: METRICS_NAMESPACE, Dimensions: [{ Name: 'service', Value: serviceName(BILLING_JOB) }] };
  const sm = { Namespace: 'AWS/States', Dimensions: [{ Name: 'StateMachineArn', Value: ref(stack.billing.stateMachine) }] };
  const ccf = (table: IConstruct) => ({
    Namespace: 'AWS/DynamoDB',
    MetricName: 'ConditionalCheckFailedRequests',
    Dimensions: [{ Name: 'TableName', Value: ref(table) }],
  });
  const expected: Record<keyof typeof stack.billing.alarms.alarms, Record<string, unknown>> = {
    // Intended change (issue 9): the part of the offset beyond its error bound, not |offset| (test/unit/clock-offset.test.ts).
    clockOffset: {
      ...fromApp,
      MetricName: Metric.clockOffsetBeyondErrorMs,
      Statistic: 'Maximum',
      Period: 300,
      Threshold: c.clockOffsetAlarmMs,
      ComparisonOperator: 'GreaterThanThreshold',
    },
    fencedRejections: {
      ...fromApp,
      MetricName: Metric.fencedRejections,
      Statistic: 'Sum',
      Period: 300,
      Threshold: c.fencedRejectionsAlarmThreshold,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    lockConditionalChecks: {
      ...ccf(stack.billing.lockTable),
      Statistic: 'Sum',
      Period: 300,
      Threshold: c.conditionalCheckFailedAlarmThreshold,
      ComparisonOperator: 'GreaterThanThreshold',
    },
    jobConditionalChecks: {
      ...ccf(stack.billing.jobTable),
      Statistic: 'Sum',
      Period: 300,
      Threshold: c.conditionalCheckFailedAlarmThreshold,
      ComparisonOperator: 'GreaterThanThreshold',
    },
    transactionConflicts: {
      Threshold: c.conditionalCheckFailedAlarmThreshold,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    },
    notDone: {
      ...fromApp,
      MetricName: Metric.runsCompleted,
      Statistic: 'Sum',
      Period: 86400,
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
      EvaluationWindow: { WallClockWindow: { Timezone: '-05:00' } }, // midnight at -05:00 is 05:00 UTC
    },
    executionsFailed: { ...sm, MetricName: 'ExecutionsFailed', Statistic: 'Sum', Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' },
    executionsTimedOut: {
      ...sm,
      MetricName: 'ExecutionsTimedOut',
      Statistic: 'Sum',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    executionsAborted: {
      ...sm,
      MetricName: 'ExecutionsAborted',
      Statistic: 'Sum',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    scheduleDeadLetters: {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Statistic: 'Maximum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [ref(stack.billing.schedule.deadLetterQueue).Ref, 'QueueName'] } }],
    },
    sweeperStorm: {
      ...fromApp,
      MetricName: Metric.sweeperStorm,
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    sweeperGaveUp: {
      ...fromApp,
      MetricName: Metric.runsGivenUp,
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    sweeperFailed: {
      Namespace: 'AWS/States',
      Dimensions: [{ Name: 'StateMachineArn', Value: ref(stack.billing.sweeper.stateMachine) }],
      MetricName: 'ExecutionsFailed',
      Statistic: 'Sum',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    },
    sweeperDeadLetters: {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Statistic: 'Maximum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [ref(stack.billing.sweeperSchedule.deadLetterQueue).Ref, 'QueueName'] } }],
    },
  };
  assert.deepEqual(Object.keys(stack.billing.alarms.alarms).sort(), Object.keys(expected).sort());
  assert.equal(ofType('AWS::CloudWatch::Alarm').length, Object.keys(expected).length);
  for (const [name, alarm] of Object.entries(stack.billing.alarms.alarms)) {
    const resource = template.toJSON().Resources[ref(alarm).Ref] as Resource;
    assert.ok(resource, name);
    assert.deepEqual(resource.Properties!.AlarmActions, [topic], `${name} notifies the topic`);
    assert.ok(String(resource.Properties!.AlarmDescription).length > 80, `${name} says what it means and what to do`);
    for (const [key, value] of Object.entries(expected[name as keyof typeof expected])) {
      assert.deepEqual(resource.Properties![key], value, `${name}.${key}`);
    }
  }
  // TransactionConflict of the two tables a fenced transaction writes, summed (a math expression, no MetricName).
  const conflicts = template.toJSON().Resources[ref(stack.billing.alarms.alarms.transactionConflicts).Ref] as Resource;
  const metrics = conflicts.Properties!.Metrics as Array<{
    Id: string;
    Expression?: string;
    ReturnData?: boolean;
    MetricStat?: { Metric: Record<string, unknown>; Stat: string; Period: number };
  }>;
  assert.deepEqual(metrics.find((m) => m.Expression)!.Expression, 'FILL(jobs, 0) + FILL(invoices, 0)');
  for (const [id, table] of [
    ['jobs', stack.billing.jobTable],
    ['invoices', stack.invoices],
  ] as const) {
    assert.deepEqual(metrics.find((m) => m.Id === id)!.MetricStat, {
      Metric: { Namespace: 'AWS/DynamoDB', MetricName: 'TransactionConflict', Dimensions: [{ Name: 'TableName', Value: ref(table) }] },
      Stat: 'Sum',
      Period: 300,
    });
  }
  // No alarm claims that ConditionalCheckFailedRequests counts a fenced transaction: only the app's metric does.
  assert.match(
    String((template.toJSON().Resources[ref(stack.billing.alarms.alarms.fencedRejections).Ref] as Resource).Properties!.AlarmDescription),
    /no per-table metric/,
  );
  template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: arnOf(stack.billing.alarms.key) });
  template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
  template.hasResourceProperties('AWS::SNS::TopicPolicy', {
    PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
  });
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
});

test('the deadline window: a fixed offset whose midnight is the deadline, at its latest UTC instant under DST', () => {
  assert.equal(deadlineWindowZone('UTC', 5), '-05:00');
  assert.equal(deadlineWindowZone('UTC', 0), '+00:00');
  assert.equal(deadlineWindowZone('Europe/Paris', 5), '-04:00'); // 04:00 UTC: 05:00 CET, 06:00 CEST (late, never early)
  assert.equal(deadlineWindowZone('America/New_York', 5), '-10:00'); // 10:00 UTC: 05:00 EST
  assert.equal(deadlineWindowZone('Asia/Tokyo', 5), '+04:00'); // 20:00 UTC the day before
  assert.equal(deadlineWindowZone('Asia/Kolkata', 5), '+00:30'); // 23:30 UTC the day before
});

test('the schedule starts the state machine with scheduledTime, retries, a DLQ and a role that can only start it', () => {
  template.hasResourceProperties('AWS::Scheduler::Schedule', {
    ScheduleExpression: STACK_DEFAULTS.scheduleExpression,
    ScheduleExpressionTimezone: STACK_DEFAULTS.scheduleTimeZone,
    State: 'ENABLED',
    Target: {
      Arn: ref(stack.billing.stateMachine),
      RoleArn: arnOf(stack.billing.schedule.role),
      Input: JSON.stringify({ scheduledTime: '<aws.scheduler.scheduled-time>' }),
      DeadLetterConfig: { Arn: arnOf(stack.billing.schedule.deadLetterQueue) },
      RetryPolicy: { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 },
    },
  });
  template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true });
  template.hasResourceProperties('AWS::SQS::QueuePolicy', {
    PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
  });
  template.hasResourceProperties('AWS::IAM::Role', {
    AssumeRolePolicyDocument: {
      Statement: [
        Match.objectLike({
          Principal: { Service: 'scheduler.amazonaws.com' },
          Condition: Match.objectLike({ StringEquals: Match.objectLike({ 'aws:SourceAccount': { Ref: 'AWS::AccountId' } }) }),
        }),
      ],
    },
  });
  const policies = ofType('AWS::IAM::Policy').filter((p) =>
    p.Properties!.Roles.some((r: unknown) => JSON.stringify(r) === JSON.stringify(ref(stack.billing.schedule.role))),
  );
  assert.equal(policies.length, 1);
  assert.deepEqual(policies[0].Properties!.PolicyDocument.Statement, [
    { Action: 'states:StartExecution', Effect: 'Allow', Resource: ref(stack.billing.stateMachine) },
    { Action: 'sqs:SendMessage', Effect: 'Allow', Resource: arnOf(stack.billing.schedule.deadLetterQueue) },
  ]);
});

/** Actions AWS authorizes only on Resource "*" (no resource-level permissions). */
const RESOURCE_STAR_ONLY = new Set([
  'xray:PutTraceSegments',
  'xray:PutTelemetryRecords',
  'xray:GetSamplingRules',
  'xray:GetSamplingTargets',
  'logs:CreateLogDelivery',
  'logs:GetLogDelivery',
  'logs:UpdateLogDelivery',
  'logs:DeleteLogDelivery',
  'logs:ListLogDeliveries',
  'logs:PutResourcePolicy',
  'logs:DescribeResourcePolicies',
  'logs:DescribeLogGroups',
  'cloudwatch:PutMetricData',
]);

test('IAM: no "*" action, no service-wide wildcard, no Resource "*" where the action has a specific resource', () => {
  const statements = [
    ...ofType('AWS::IAM::Policy').map((p) => p.Properties!.PolicyDocument),
    ...ofType('AWS::IAM::ManagedPolicy').map((p) => p.Properties!.PolicyDocument),
    ...ofType('AWS::IAM::Role').flatMap((r) => (r.Properties!.Policies ?? []).map((p: { PolicyDocument: unknown }) => p.PolicyDocument)),
  ].flatMap((doc) => doc.Statement as Array<{ Effect: string; Action: string | string[]; Resource: unknown }>);
  assert.ok(statements.length > 0);
  const problems: string[] = [];
  for (const s of statements.filter((x) => x.Effect === 'Allow')) {
    const actions = ([] as string[]).concat(s.Action);
    const resources = ([] as unknown[]).concat(s.Resource);
    for (const a of actions) if (a === '*' || /^[\w-]+:\*$/.test(a)) problems.push(`wildcard action ${a}`);
    if (resources.includes('*')) {
      for (const a of actions) if (!RESOURCE_STAR_ONLY.has(a)) problems.push(`${a} on Resource "*"`);
    }
  }
  assert.deepEqual(problems, []);
});

test('cdk-nag AWS Solutions: no unacknowledged finding (errors or warnings: either fails `cdk synth`)', () => {
  const report = new AwsSolutionsChecks().validateScope(app);
  const findings = report.violations.map(
    (v) => `${v.severity} ${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}: ${v.description}`,
  );
  assert.deepEqual(findings, []);
});

test('env-agnostic: the stack names no account or Region', () => {
  assert.ok(Stack.of(stack).account.startsWith('${Token'), 'account is the deploy-time pseudo parameter');
  assert.ok(Stack.of(stack).region.startsWith('${Token'), 'region is the deploy-time pseudo parameter');
});

test('context overrides reach the stack: time zone, deadline, thresholds, e-mail subscription', () => {
  const { stack: s, template: t } = synth({
    ...cdkJson.context,
    'aws:cdk:bundling-stacks': [], // the template is all this test reads: skip asset bundling
    [CONTEXT_KEY]: {
      scheduleTimeZone: 'Europe/Paris',
      billingDeadlineHour: 6,
      conditionalCheckFailedAlarmThreshold: 7,
      alarmEmail: 'billing-oncall@example.com',
    },
  });
  t.hasResourceProperties('AWS::Scheduler::Schedule', { ScheduleExpressionTimezone: 'Europe/Paris' });
  t.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'billing-oncall@example.com' });
  const alarm = (a: IConstruct) => t.toJSON().Resources[s.getLogicalId(a.node.defaultChild as CfnResource)] as Resource;
  assert.equal(alarm(s.billing.alarms.alarms.lockConditionalChecks).Properties!.Threshold, 7);
  assert.deepEqual(alarm(s.billing.alarms.alarms.notDone).Properties!.EvaluationWindow, { WallClockWindow: { Timezone: '-05:00' } });
});

test('invalid context is refused with one error listing every problem', () => {
  const bad = {
    renewMs: 4_000, // > leaseMs / 3
    clockOffsetAlarmMs: 2_000, // >= marginMs
    scheduleTimeZone: 'Mars/Olympus_Mons',
    chunkConcurrency: 41,
    scheduleExpression: 'cron(30 1 * * ?)',
    billingDeadlineHour: 24,
    fencedRejectionsAlarmThreshold: 0,
    alarmEmail: 'not-an-address',
  };
  const err = (() => {
    try {
      synth({ [CONTEXT_KEY]: bad });
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  assert.ok(err instanceof ConfigError, 'throws a ConfigError');
  const expected = [
    'renewMs',
    'clockOffsetAlarmMs',
    'scheduleTimeZone',
    'chunkConcurrency',
    'scheduleExpression',
    'billingDeadlineHour',
    'fencedRejectionsAlarmThreshold',
    'alarmEmail',
  ];
  assert.equal(err.problems.length, expected.length, err.message);
  for (const key of expected)
    assert.ok(
      err.problems.some((p) => p.startsWith(key)),
      `names ${key}: ${err.message}`,
    );
  assert.match(err.message, /renewMs \(4000\) must be at most leaseMs \/ 3/);

  assert.throws(() => parseStackConfig({ leaseMS: 10_000 }), /fencepost\.leaseMS is not a setting/);
  assert.throws(() => parseStackConfig({ leaseMs: '10000' }), /leaseMs must be a number/);
  assert.throws(() => parseStackConfig({ billingDeadlineHour: 2 }), /at least an hour after the scheduled start/);
  assert.deepEqual(parseStackConfig('{"leaseMs":20000,"renewMs":5000}'), { ...STACK_DEFAULTS, leaseMs: 20_000, renewMs: 5_000 });
});

test('the orphan sweeper: its own state machine on a schedule, reading the job table only through the sparse index', () => {
  const policies = ofType('AWS::IAM::Policy').flatMap(
    (p) => p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
  );
  const actions = policies.flatMap((s) => ([] as string[]).concat(s.Action));
  assert.ok(!actions.includes('dynamodb:Scan'), 'no function may scan any table');
  const queries = policies.filter((s) => ([] as string[]).concat(s.Action).includes('dynamodb:Query'));
  assert.ok(queries.length >= 2);
  for (const q of queries) assert.match(JSON.stringify(q.Resource), /\/index\/claimed/, 'Query only on the claimed index');
  template.hasResourceProperties('AWS::Scheduler::Schedule', {
    ScheduleExpression: STACK_DEFAULTS.sweeperScheduleExpression,
    Target: Match.objectLike({ Arn: ref(stack.billing.sweeper.stateMachine), DeadLetterConfig: Match.anyValue() }),
  });
  const definition = JSON.stringify(template.toJSON().Resources[ref(stack.billing.sweeper.stateMachine).Ref].Properties.DefinitionString);
  assert.match(definition, /WaitOutTheLease/);
  assert.match(definition, /\$\.sighted\.waitSeconds/, 'the second sighting waits the lease read from the lock items');
});

/** A state machine's definition from the template, its Fn::Join resolved with placeholder ARNs (as the local runner does). */
const definitionOf = (machine: IConstruct) =>
  JSON.parse(resolveJoin((template.toJSON().Resources[ref(machine).Ref] as Resource).Properties!.DefinitionString));

test('asl-validator: both synthesized definitions (billing and sweeper) are valid Amazon States Language', () => {
  for (const [name, machine] of [
    ['billing', stack.billing.stateMachine],
    ['sweeper', stack.billing.sweeper.stateMachine],
  ] as const) {
    const definition = definitionOf(machine);
    assert.ok(Object.keys(definition.States).length > 3, name);
    const result = aslValidator(definition);
    assert.deepEqual(result.errors, [], `${name}: ${result.errorsText('\n')}`);
    assert.equal(result.isValid, true, name);
  }
});

test('state machine log groups live under /aws/vendedlogs/states/ (the CloudWatch Logs resource-policy size limit)', () => {
  const groups = template.toJSON().Resources as Record<string, Resource>;
  for (const machine of [stack.billing.stateMachine, stack.billing.sweeper.stateMachine]) {
    const props = groups[ref(machine).Ref].Properties!;
    const groupId = props.LoggingConfiguration.Destinations[0].CloudWatchLogsLogGroup.LogGroupArn['Fn::GetAtt'][0] as string;
    assert.match(String(groups[groupId].Properties!.LogGroupName), /^\/aws\/vendedlogs\/states\/Fencepost-(billing|billing-sweeper)$/);
  }
});

test("the steps before the raise retry a process's death; after the raise the sweeper answers it; the history plan counts every retry", () => {
  const states = definitionOf(stack.billing.stateMachine).States as Record<string, { Retry?: { ErrorEquals: string[]; MaxAttempts: number }[] }>;
  const billChunk = (definitionOf(stack.billing.stateMachine).States.Chunks.ItemProcessor.States as typeof states).BillChunk;
  const retried = (st: (typeof states)[string]) => new Set((st.Retry ?? []).flatMap((r) => r.ErrorEquals));
  // What Lambda reports for a runtime that exited, a function past its timeout, a failure it cannot name, and what
  // Step Functions reports for a task past its TimeoutSeconds (the Lambda perhaps still running).
  const deaths = ['Runtime.ExitError', 'Sandbox.Timedout', 'Lambda.Unknown', 'States.Timeout'];
  for (const step of ['Prepare', 'Observe', 'Claim', 'RaiseFence']) {
    for (const name of deaths) assert.ok(retried(states[step]).has(name), `${step} retries ${name}`);
  }
  assert.ok(retried(states.RaiseFence).has('StopTimePassedError'), 'a stop time passed in a pause before the raise is retried');
  for (const [step, st] of [
    ['BillChunk', billChunk],
    ['Complete', states.Complete],
  ] as const) {
    for (const name of [...deaths, 'StopTimePassedError'])
      assert.ok(!retried(st).has(name), `${step} does not retry ${name}: the sweeper re-queues it`);
  }
  // The plan's worst case per task is the definition's: 5 events, and 3 for every retry of every retrier.
  const events = (st: (typeof states)[string]) => 5 + 3 * (st.Retry ?? []).reduce((n, r) => n + r.MaxAttempts, 0);
  for (const step of ['Prepare', 'Observe', 'Claim', 'RaiseFence']) assert.equal(events(states[step]), HISTORY.preRaiseTask, step);
  assert.equal(events(states.Complete), HISTORY.task);
  assert.equal(events(billChunk), HISTORY.task);
});

test('the chunk function is timed to its work (a minute), its task 30 s more; an Invoke timeout is retried', () => {
  assert.equal(CHUNK_TIMEOUT.toSeconds(), 60);
  const chunkFn = template.toJSON().Resources[ref(stack.chunkFunction).Ref] as Resource;
  assert.equal(chunkFn.Properties!.Timeout, 60);
  const definition = definitionOf(stack.billing.stateMachine);
  const billChunk = definition.States.Chunks.ItemProcessor.States.BillChunk;
  assert.equal(billChunk.TimeoutSeconds, 90);
  assert.ok(TRANSIENT_ERRORS.includes('Lambda.ClientExecutionTimeoutException'));
  assert.ok(billChunk.Retry[0].ErrorEquals.includes('Lambda.ClientExecutionTimeoutException'));
  for (const sweepTask of ['SightClaimed', 'VerifyAndRequeue']) {
    assert.ok(
      definitionOf(stack.billing.sweeper.stateMachine).States[sweepTask].Retry[0].ErrorEquals.includes('Lambda.ClientExecutionTimeoutException'),
      sweepTask,
    );
  }
});

test('each schedule carries its own description', () => {
  const schedules = ofType('AWS::Scheduler::Schedule');
  const byTarget = (machine: IConstruct) => schedules.find((x) => JSON.stringify(x.Properties!.Target.Arn) === JSON.stringify(ref(machine)))!;
  assert.match(byTarget(stack.billing.stateMachine).Properties!.Description, /scheduled billing run/);
  assert.match(byTarget(stack.billing.sweeper.stateMachine).Properties!.Description, /orphan sweeper/);
});

test("the Lambdas' AWS clients give up on a hung call: connection and request timeouts, thrown as errors", async () => {
  const clients = awsClients(); // no call is made: only the handlers' configuration is read
  try {
    for (const client of [clients.raw, clients.s3]) {
      // The handler resolves its options lazily (configProvider), before its first request; nothing is sent here.
      const handler = client.config.requestHandler as unknown as { configProvider: Promise<Record<string, unknown>> };
      const config = await handler.configProvider;
      assert.equal(config.connectionTimeout, CONNECTION_TIMEOUT_MS);
      assert.equal(config.requestTimeout, REQUEST_TIMEOUT_MS);
      assert.equal(config.throwOnRequestTimeout, true);
    }
    assert.ok(REQUEST_TIMEOUT_MS * 3 < CHUNK_TIMEOUT.toMilliseconds() / 2, 'three attempts of a hung call fit well inside the chunk timeout');
  } finally {
    clients.destroy();
  }
});

/** Distributed: a renewal every second and a 1 s margin let the 10 s lease cover the Map Run's start-up (lib/constructs/renewal-gap.ts). */
const DISTRIBUTED_LEASE = { renewMs: 1000, marginMs: 1000 };

test('large runs: above distributedMapAboveChunks the chunks run as a Distributed Map, granted and acknowledged', () => {
  const {
    app: a,
    stack: s,
    template: t,
  } = synth({
    ...cdkJson.context,
    'aws:cdk:bundling-stacks': [], // the template is all this test reads: skip asset bundling
    [CONTEXT_KEY]: { invoices: 1_000_000, chunkSize: 500, chunkConcurrency: 200, ...DISTRIBUTED_LEASE }, // 2,000 chunks
  });
  assert.equal(s.billing.workflow.distributed, true);
  assert.equal(stack.billing.workflow.distributed, false, 'the default night (10 chunks) stays inline');
  const machine = t.toJSON().Resources[s.getLogicalId(s.billing.stateMachine.node.defaultChild as CfnResource)] as Resource;
  const definition = JSON.parse(resolveJoin(machine.Properties!.DefinitionString));
  const map = definition.States.Chunks;
  assert.deepEqual(map.ItemProcessor.ProcessorConfig, { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' });
  assert.equal(map.MaxConcurrency, 200);
  assert.equal(map.ResultPath, null);
  const inline = definitionOf(stack.billing.stateMachine).States.Chunks;
  // The chunk task and its Retry are the inline ones; its output is cut to the chunk number (payload).
  const { OutputPath, ...billChunk } = map.ItemProcessor.States.BillChunk;
  assert.equal(OutputPath, '$.chunk');
  assert.deepEqual(billChunk.Retry, inline.ItemProcessor.States.BillChunk.Retry);
  assert.deepEqual({ ...billChunk, Resource: undefined }, { ...inline.ItemProcessor.States.BillChunk, Resource: undefined });
  // Today's routes, plus the one error AWS reports for a failed child, before States.ALL: it only looks whether the
  // lease is still ours (CheckAfterChunkFailure); once the chunks started no route gives the lease back.
  assert.deepEqual(map.Catch, [
    inline.Catch[0],
    { ErrorEquals: [MAP_RUN_FAILED], ResultPath: '$.error', Next: 'CheckAfterChunkFailure' },
    inline.Catch[1],
  ]);
  assert.deepEqual(inline.Catch[1], { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Failed' });
  // CDK's grant for the child executions: StartExecution on itself, Describe/Stop on its executions.
  const statements = (Object.values(t.findResources('AWS::IAM::Policy')) as Resource[]).flatMap(
    (p) => p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
  );
  const actions = statements.flatMap((x) => ([] as string[]).concat(x.Action));
  for (const a of ['states:StartExecution', 'states:DescribeExecution', 'states:StopExecution']) assert.ok(actions.includes(a), a);
  const report = new AwsSolutionsChecks().validateScope(a);
  assert.deepEqual(
    report.violations.map((v) => `${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`),
    [],
  );
  const valid = aslValidator(structuredClone(definition));
  assert.deepEqual(valid.errors, [], valid.errorsText('\n'));
});

test("large runs: the chunk plan is checked against AWS's limits, every problem listed", () => {
  const refused = (overrides: Record<string, unknown>) => {
    try {
      parseStackConfig(overrides);
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.problems;
    }
    return [];
  };
  // Inline: concurrency at most 40; distributed (2,000 chunks): up to 10,000.
  assert.match(refused({ chunkConcurrency: 41 }).join('\n'), /^chunkConcurrency must be an integer from 1 to 40 for an inline Map/);
  assert.deepEqual(refused({ invoices: 1_000_000, chunkSize: 500, chunkConcurrency: 41 }), []);
  assert.match(
    refused({ invoices: 1_000_000, chunkSize: 500, chunkConcurrency: 10_001 }).join('\n'),
    /^chunkConcurrency must be an integer from 1 to 10000 for a Distributed Map/,
  );
  // A chunk must fit half the chunk function's minute at 50 ms a transaction of 99: 599 transactions, 59,301 invoices.
  assert.deepEqual(refused({ invoices: 59_301, chunkSize: 59_301 }), []);
  assert.match(refused({ invoices: 60_000, chunkSize: 60_000 }).join('\n'), /^chunkSize \(60000\) makes a chunk of about 30\.4 s .* at most 59301$/m);
  // 2,000 chunks kept inline: the history can pass 25,000 events.
  assert.match(
    refused({ invoices: 1_000_000, chunkSize: 500, distributedMapAboveChunks: 2_000, chunkConcurrency: 40 }).join('\n'),
    /^distributedMapAboveChunks \(2000\) runs this run's 2000 chunks inline, whose history can reach \d+ events, above the 25000 quota: set it to at most \d+/m,
  );
  // A million chunks: the list alone passes 256 KiB, and one at a time they pass the 2-hour execution timeout.
  const million = refused({ invoices: 1_000_000, chunkSize: 1 });
  assert.deepEqual(
    million.map((p) => p.split(' ')[0]),
    ['chunkSize', 'chunkConcurrency'],
    million.join('\n'),
  );
  assert.match(million[0], /exceed the 262144-byte state payload quota/);
  assert.match(million[1], /past the execution's 2 hours timeout/);
  // The claim loop alone: 120 leases of 10 s watched in 1 s polls.
  assert.match(
    refused({ claimBudget: 120 }).join('\n'),
    /^claimBudget \(120\) × leaseMs \(10000\) lets the claim loop alone write up to \d+ history events/m,
  );
  assert.match(refused({ distributedMapAboveChunks: -1 }).join('\n'), /^distributedMapAboveChunks must be a non-negative integer/);
});

test('large runs: the plan the checks use (history per chunk, payload, chunk time) at the defaults', () => {
  const planOf = (invoices: number) => chunkMapPlan(jobSettings({ ...STACK_DEFAULTS, invoices }));
  const plan = planOf(STACK_DEFAULTS.invoices);
  assert.equal(plan.mode, 'inline');
  assert.equal(plan.chunks, 10);
  assert.equal(plan.eventsPerChunk, 19, '2 iteration events + a task of 5 events with 4 retries of 3');
  assert.ok(plan.historyEvents < 25_000 && plan.historyEvents === plan.fixedEvents + 190);
  assert.equal(billingChunks(STACK_DEFAULTS).chunkMs, 51 * 50 + 50);
  // Inline at the default threshold fits the history quota, with the defaults' claim loop.
  const atThreshold = planOf(500 * STACK_DEFAULTS.chunkSize);
  assert.equal(atThreshold.mode, 'inline');
  assert.ok(atThreshold.historyEvents <= 25_000, String(atThreshold.historyEvents));
  assert.equal(planOf(501 * STACK_DEFAULTS.chunkSize).mode, 'distributed');
  for (const n of [0, 1, 9, 10, 11, 99, 100, 101, 2_000, 12_345]) {
    assert.equal(chunkListBytes(n), JSON.stringify(Array.from({ length: n }, (_, i) => i)).length, String(n));
  }
});

test("the invoice table is warmed to the night's peak write rate when a new on-demand table's 4,000 WRU/s is too few", () => {
  const warm: Record<number, unknown> = {};
  for (const chunkConcurrency of [1, 4]) {
    // A claim budget as long as the whole night (200 chunks of 2.6 s, one at a time): FencedJob refuses a shorter one.
    // Its claim loop's worst-case history (every step before the raise taking every retry) leaves no room for 200
    // chunks inline: they run distributed.
    const config = { invoices: 1_000_000, chunkSize: 5_000, chunkConcurrency, claimBudget: 60, distributedMapAboveChunks: 0, ...DISTRIBUTED_LEASE };
    const { stack: s, template: t } = synth({ ...cdkJson.context, 'aws:cdk:bundling-stacks': [], [CONTEXT_KEY]: config });
    const table = t.toJSON().Resources[s.getLogicalId(s.invoices.node.defaultChild as CfnResource)] as Resource;
    // The model's peak: every running chunk commits one transaction of puts per msPerTransaction, 2 WRU an item.
    const running = Math.min(chunkConcurrency, billingChunks(config).chunks);
    const peak = Math.ceil((running * CHUNK_TIME.putsPerTransaction * TRANSACTIONAL_WRU_PER_ITEM * 1000) / CHUNK_TIME.msPerTransaction);
    warm[chunkConcurrency] = table.Properties!.WarmThroughput;
    assert.deepEqual(
      warm[chunkConcurrency],
      peak > NEW_ON_DEMAND_WRITE_UNITS ? { WriteUnitsPerSecond: peak } : undefined,
      `${chunkConcurrency} chunk(s) at once write ${peak} WRU/s at the peak`,
    );
  }
  assert.notDeepEqual(warm[4], undefined, 'four chunks at once need more than a new table sustains: the case is exercised');
});

/**
 * The invoice table's warm throughput at a night's size and concurrency: its WriteUnitsPerSecond (or undefined) and the
 * warnings the synth left on the table. `invoiceWarmWriteUnits` is given only when the case records one.
 */
function warmOf(config: Record<string, unknown>): { warm: number | undefined; warnings: string[] } {
  // A Distributed Map night: its lease must cover the Map Run's start-up too (lib/constructs/renewal-gap.ts), hence DISTRIBUTED_LEASE.
  const night = { invoices: 1_000_000, chunkSize: 5_000, claimBudget: 60, distributedMapAboveChunks: 0, ...DISTRIBUTED_LEASE, ...config };
  const { stack: s, template: t } = synth({ ...cdkJson.context, 'aws:cdk:bundling-stacks': [], [CONTEXT_KEY]: night });
  const table = t.toJSON().Resources[s.getLogicalId(s.invoices.node.defaultChild as CfnResource)] as Resource;
  const warnings = Annotations.fromStack(s)
    .findWarning(`/${s.invoices.node.path}`, Match.anyValue())
    .map((w) => String(w.entry.data));
  return { warm: (table.Properties!.WarmThroughput as { WriteUnitsPerSecond?: number } | undefined)?.WriteUnitsPerSecond, warnings };
}

/** The model's peak write rate (WRU/s) of `chunkConcurrency` chunks of 5,000 invoices at once. */
const modelPeak = (chunkConcurrency: number) =>
  Math.ceil((chunkConcurrency * CHUNK_TIME.putsPerTransaction * TRANSACTIONAL_WRU_PER_ITEM * 1000) / CHUNK_TIME.msPerTransaction);

// An on-demand table's throughput is bounded by the account's table-level quota, 40,000 write request units by default
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html), and
// a table can be pre-warmed up to that quota only
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html).
test('the invoice table is warmed at most to the on-demand table quota: 11 chunks of 5,000 at once (43,560 WRU/s) get 40,000 and a warning', () => {
  const peak = modelPeak(11);
  const { warm, warnings } = warmOf({ chunkConcurrency: 11 });
  assert.equal(warm, ON_DEMAND_TABLE_WRITE_QUOTA, `warmed to the quota, not to the peak (${peak})`);
  assert.ok(peak > ON_DEMAND_TABLE_WRITE_QUOTA, `the case asks more than the quota: ${peak}`);
  assert.ok(
    warnings.some((w) => w.includes(`${peak} WRU/s`) && w.includes('quota')),
    `a warning says the night's peak is above the quota: ${JSON.stringify(warnings)}`,
  );
  // A recorded warm throughput above the quota cannot be deployed: refused, by its name.
  assert.throws(
    () => parseStackConfig({ invoiceWarmWriteUnits: ON_DEMAND_TABLE_WRITE_QUOTA + 1 }),
    (e: unknown) => e instanceof ConfigError && /^invoiceWarmWriteUnits must be a whole number of write units from 4000 to 40000/.test(e.problems[0]),
  );
  assert.throws(() => parseStackConfig({ invoiceWarmWriteUnits: 3_999 }), /invoiceWarmWriteUnits must be a whole number/);
});

// Warm throughput cannot be decreased once it was raised (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html):
// a template that asks less than the table has fails the deploy.
test('the invoice table is never warmed less than its recorded warm throughput: 3 chunks at once then 2 keep 11,880', () => {
  // The first deploy: 3 chunks at once raise the table; the synth says what to record.
  const first = warmOf({ chunkConcurrency: 3 });
  assert.equal(first.warm, modelPeak(3));
  assert.ok(
    first.warnings.some((w) => w.includes(`invoiceWarmWriteUnits`) && w.includes(String(modelPeak(3)))),
    `the synth asks to record ${modelPeak(3)}: ${JSON.stringify(first.warnings)}`,
  );
  // Recorded, then fewer chunks at once: the table keeps what it has, and nothing more is asked.
  const recorded = { invoiceWarmWriteUnits: first.warm };
  const again = warmOf({ chunkConcurrency: 3, ...recorded });
  assert.deepEqual(again, { warm: first.warm, warnings: [] });
  const lower = warmOf({ chunkConcurrency: 2, ...recorded });
  assert.ok(modelPeak(2) < first.warm!, 'the case would lower it');
  assert.deepEqual(lower, { warm: first.warm, warnings: [] }, `not lowered to ${modelPeak(2)}`);
  // One chunk at once fits a new table, but a table once warmed stays as recorded.
  assert.equal(warmOf({ chunkConcurrency: 1, ...recorded }).warm, first.warm);
  assert.equal(warmOf({ chunkConcurrency: 1 }).warm, undefined, 'a table never warmed is not warmed for one chunk at once');
});

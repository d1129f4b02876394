/**
 * What a user's FencedJob hands out (issue 25, item 6): its tables, state machine and alarm topic as properties, and as
 * stack outputs only when asked (`outputs: true`; none by default, as aws-cdk-lib's constructs add none of their own).
 * The expectations are read off the template: each output's value is the reference to the resource of that kind the
 * job synthesized. And docs/ALARMS.md, which ships, describes this job: its alarm table lists exactly the alarms a
 * FencedJob of a user's makes, and every output a shipped doc names is one the job outputs.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { FencedJob, type FencedJobProps } from '../../lib/constructs/index';

const ROOT = path.resolve(__dirname, '..', '..');
/** An untyped JSON document (a template): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

function synth(props: Partial<FencedJobProps> = {}): { stack: Stack; job: FencedJob; template: Template; resources: Record<string, Json> } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Reports');
  const fn = new lambda.Function(stack, 'ReportChunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async (e) => ({ chunk: e.chunk });'),
    timeout: Duration.seconds(45),
  });
  const job = new FencedJob(stack, 'SalesReport', { name: 'sales-report', chunkFunction: fn, chunks: 3, ...props });
  const template = Template.fromStack(stack);
  return { stack, job, template, resources: (template.toJSON() as { Resources: Record<string, Json> }).Resources };
}

/** The one logical id of a resource type whose properties match `where` (the template's view, not the construct's). */
function only(resources: Record<string, Json>, type: string, where: (r: Json) => boolean = () => true): string {
  const ids = Object.entries(resources)
    .filter(([, r]) => r.Type === type && where(r))
    .map(([id]) => id);
  assert.equal(ids.length, 1, `one ${type}: ${ids.join(', ')}`);
  return ids[0];
}

const isJobTable = (r: Json) => JSON.stringify(r.Properties.GlobalSecondaryIndexes ?? []).includes('"claimed"');
const isJobMachine = (r: Json) => !JSON.stringify(r.Properties.DefinitionString).includes('Sweep');

test("a FencedJob's tables, state machine and alarm topic are properties that resolve to its template's resources", () => {
  const { stack, job, resources } = synth();
  const ref = (id: string) => ({ Ref: id });
  assert.deepEqual(stack.resolve(job.lockTable.tableName), ref(only(resources, 'AWS::DynamoDB::Table', (r) => !isJobTable(r))));
  assert.deepEqual(stack.resolve(job.jobTable.tableName), ref(only(resources, 'AWS::DynamoDB::Table', isJobTable)));
  assert.deepEqual(stack.resolve(job.stateMachine.stateMachineArn), ref(only(resources, 'AWS::StepFunctions::StateMachine', isJobMachine)));
  assert.deepEqual(stack.resolve(job.alarmTopic.topicArn), ref(only(resources, 'AWS::SNS::Topic')));
});

test('no stack outputs by default; outputs: true gives each its output, named after the job, valued from the template', () => {
  const plain = synth();
  assert.deepEqual(plain.template.findOutputs('*'), {}, 'a FencedJob adds no outputs unless asked');

  const { template, resources } = synth({ outputs: true });
  const locks = only(resources, 'AWS::DynamoDB::Table', (r) => !isJobTable(r));
  const jobs = only(resources, 'AWS::DynamoDB::Table', isJobTable);
  const machine = only(resources, 'AWS::StepFunctions::StateMachine', isJobMachine);
  const topic = only(resources, 'AWS::SNS::Topic');
  const dashboard = only(resources, 'AWS::CloudWatch::Dashboard');
  const expected: Record<string, Json> = {
    SalesReportLockTableName: { Ref: locks },
    SalesReportJobTableName: { Ref: jobs },
    SalesReportStateMachineArn: { Ref: machine },
    SalesReportAlarmTopicArn: { Ref: topic },
    SalesReportDashboardName: { Ref: dashboard },
  };
  for (const [key, value] of Object.entries(expected)) template.hasOutput(key, Match.objectLike({ Value: value, Description: Match.anyValue() }));
  assert.deepEqual(Object.keys(template.findOutputs('*')).sort(), Object.keys(expected).sort(), 'no manifest bucket, no bucket output');

  const withBucket = synth({ outputs: true, chunkWritesManifest: true });
  const bucket = only(withBucket.resources, 'AWS::S3::Bucket', (r) =>
    JSON.stringify(r.Properties.LifecycleConfiguration ?? {}).includes('"Prefix":"sales-report/"'),
  );
  withBucket.template.hasOutput('SalesReportManifestBucketName', Match.objectLike({ Value: { Ref: bucket } }));
});

const ALARMS = readFileSync(path.join(ROOT, 'docs/ALARMS.md'), 'utf8');

/** The first column of the table under a heading of docs/ALARMS.md: each `Name` in it. */
function tableNames(heading: string): string[] {
  const section = ALARMS.split(/^## /m).find((s) => s.startsWith(heading));
  assert.ok(section, `docs/ALARMS.md has a section "## ${heading}"`);
  const rows = section.split('\n').filter((l) => l.startsWith('| `'));
  return rows.flatMap((row) => [...row.split('|')[1].matchAll(/`([^`]+)`/g)].map((m) => m[1]));
}

test("docs/ALARMS.md's alarm table lists exactly the alarms a user's FencedJob makes (<Job> is the job's name in PascalCase)", () => {
  const { job } = synth();
  const made = job.node
    .findAll()
    .filter((c) => c instanceof cloudwatch.Alarm)
    .map((c) => c.node.id);
  const listed = tableNames('The alarms').map((n) => n.replace('<Job>', 'SalesReport'));
  assert.deepEqual([...listed].sort(), [...made].sort(), "the alarms docs/ALARMS.md lists for a user's job");
});

test('every stack output a shipped doc names is one a FencedJob with outputs: true has', () => {
  const { template } = synth({ outputs: true, chunkWritesManifest: true });
  const outputs = Object.keys(template.findOutputs('*'));
  const files = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files;
  const docs = ['README.md', ...files.filter((f) => f.startsWith('docs/') && f.endsWith('.md'))];
  assert.ok(docs.includes('docs/ALARMS.md'), `the package ships docs/ALARMS.md: ${docs.join(', ')}`);
  const problems = docs.flatMap((doc) =>
    [...readFileSync(path.join(ROOT, doc), 'utf8').matchAll(/`?([<>\w]+)`? output\b/g)]
      .map((m) => m[1])
      .filter((name) => /^[<A-Z]/.test(name))
      .filter((name) => !outputs.includes(name.replace('<Job>', 'SalesReport')))
      .map((name) => `${doc} names the ${name} output; a FencedJob outputs ${outputs.join(', ')}`),
  );
  assert.deepEqual(problems, []);
});

/**
 * `fencepost run` (the package's command, lib/cli/bin.ts) refusing what it cannot run, before anything starts: bad
 * options before the app is synthesized, and an app with no FencedJob, several, or not the one named, before the
 * embedded stack starts. The app here is a stand-in that writes a cloud assembly of marked state machines, as
 * FencedJob marks them (FENCED_JOB_MARK); the real synth and run of a user's job is in test/package/pack.test.ts.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import { JOB_TABLE, LOCK_TABLE } from '../../lib/core/schema';
import { FENCED_JOB_MARK } from '../../lib/lambda/env';
import { startEmbeddedStack, type EmbeddedStack } from '../../lib/local/stack';
import { resolveJoin } from '../../lib/local/workflow';

const ROOT = path.resolve(__dirname, '..', '..');
const work = mkdtempSync(path.join(tmpdir(), 'fencepost-local-run-'));
after(() => rmSync(work, { recursive: true, force: true }));
// The projects here find the CDK CLI `fencepost run` synthesizes with (aws-cdk) as an app's folder would: in a
// node_modules above them, the repository's.
symlinkSync(path.join(ROOT, 'node_modules'), path.join(work, 'node_modules'));

/** The package's command, run in `cwd`. */
function fencepost(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // tsx's loader by its path: the command runs in folders of its own, where `--import tsx` would not resolve.
  const tsx = pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, path.join(ROOT, 'lib/cli/bin.ts'), ...args], {
    cwd,
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/**
 * A stand-in CDK app: writes a cloud assembly with one stack whose template holds a marked job and sweeper state
 * machine per name, and touches `ran` so a test can tell it was run.
 */
function standInApp(dir: string, jobs: readonly string[]): string {
  const resources: Record<string, unknown> = {};
  for (const [i, name] of jobs.entries()) {
    resources[`Job${i}`] = { Type: 'AWS::StepFunctions::StateMachine', Properties: {}, Metadata: { [FENCED_JOB_MARK.job]: name } };
    resources[`Sweeper${i}`] = { Type: 'AWS::StepFunctions::StateMachine', Properties: {}, Metadata: { [FENCED_JOB_MARK.sweeper]: name } };
  }
  // As the CDK CLI reads it: a schema version it knows, and the stack's environment.
  const stack = {
    type: 'aws:cloudformation:stack',
    environment: 'aws://unknown-account/unknown-region',
    properties: { templateFile: 'App.template.json' },
  };
  const manifest = { version: '48.0.0', artifacts: { App: stack } };
  const file = path.join(dir, 'app.js');
  writeFileSync(
    file,
    `const fs = require('node:fs'); const path = require('node:path'); const out = process.env.CDK_OUTDIR;
fs.writeFileSync(path.join(__dirname, 'ran'), '');
fs.writeFileSync(path.join(out, 'manifest.json'), ${JSON.stringify(JSON.stringify(manifest))});
fs.writeFileSync(path.join(out, 'App.template.json'), ${JSON.stringify(JSON.stringify({ Resources: resources }))});`,
  );
  return 'node app.js';
}

function project(name: string, jobs: readonly string[]): { dir: string; app: string } {
  const dir = path.join(work, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return { dir, app: standInApp(dir, jobs) };
}

/**
 * A marked job and sweeper state machine over one function, ChunkFn, with this environment. Its bundle writes the
 * environment it was invoked with as JSON to the file its ENV_OUT variable names (when it has one).
 */
function markedJob(environment: Record<string, unknown>): Record<string, unknown> {
  const definition = {
    'Fn::Join': ['', ['{"StartAt":"Chunk","States":{"Chunk":{"Type":"Task","Resource":"', { 'Fn::GetAtt': ['ChunkFn', 'Arn'] }, '","End":true}}}']],
  };
  return {
    ChunkFn: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Code: { S3Key: 'abc.zip' },
        Handler: 'index.handler',
        Runtime: 'nodejs24.x',
        Environment: { Variables: { FENCEPOST_CHUNKS: '1', ...environment } },
      },
    },
    Job: {
      Type: 'AWS::StepFunctions::StateMachine',
      Properties: { DefinitionString: definition },
      Metadata: { [FENCED_JOB_MARK.job]: 'nightly-report' },
    },
    Sweeper: {
      Type: 'AWS::StepFunctions::StateMachine',
      Properties: { DefinitionString: definition },
      Metadata: { [FENCED_JOB_MARK.sweeper]: 'nightly-report' },
    },
  };
}

/**
 * A cloud assembly in `dir`/cdk.out with one stack of these resources and ChunkFn's bundle; inside a Stage (a nested
 * assembly, its stack's display name the construct path `Stage/Stack`, as CDK writes them) when `stage` is given.
 */
function writeAssembly(dir: string, resources: Record<string, unknown>, stage?: { stage: string; stack: string }): void {
  rmSync(dir, { recursive: true, force: true });
  const root = path.join(dir, 'cdk.out');
  const assembly = stage ? path.join(root, `assembly-${stage.stage}`) : root;
  mkdirSync(path.join(assembly, 'asset.abc'), { recursive: true });
  writeFileSync(
    path.join(assembly, 'asset.abc', 'index.js'),
    "exports.handler = async () => { if (process.env.ENV_OUT) require('node:fs').writeFileSync(process.env.ENV_OUT, JSON.stringify(process.env)); return {}; };",
  );
  const id = stage ? `${stage.stage}${stage.stack}1A2B3C4D` : 'App';
  writeFileSync(path.join(assembly, `${id}.template.json`), JSON.stringify({ Resources: resources }));
  const stack = {
    type: 'aws:cloudformation:stack',
    ...(stage ? { displayName: `${stage.stage}/${stage.stack}` } : {}),
    properties: { templateFile: `${id}.template.json`, ...(stage ? { stackName: `${stage.stage}-${stage.stack}` } : {}) },
  };
  writeFileSync(path.join(assembly, 'manifest.json'), JSON.stringify({ version: '1', artifacts: { [id]: stack } }));
  if (stage) {
    const nested = { type: 'cdk:cloud-assembly', properties: { directoryName: `assembly-${stage.stage}`, displayName: stage.stage } };
    writeFileSync(path.join(root, 'manifest.json'), JSON.stringify({ version: '1', artifacts: { [`assembly-${stage.stage}`]: nested } }));
  }
}

/** One embedded stack for the runs below (started at the first), given to `fencepost run` as endpoints. */
let stores: Promise<EmbeddedStack> | undefined;
after(async () => (await stores)?.stop());
async function onStores(): Promise<{ args: string[]; clients: Clients }> {
  stores ??= startEmbeddedStack();
  const { endpoints } = await stores;
  return { args: ['--dynamodb-endpoint', endpoints.dynamodb, '--s3-endpoint', endpoints.s3], clients: localClients(endpoints) };
}

/** What `fencepost run --json` printed (lib/cli/run-job.ts RunSummary), or a failure that quotes its stderr. */
function summaryOf(r: { code: number | null; stdout: string; stderr: string }): {
  stack: string;
  execution: { status: string; error?: string; cause?: string };
  tables: { logicalId: string; name: string; role: string }[];
} {
  assert.notEqual(r.stdout, '', `a summary on stdout; exit ${r.code}; stderr:\n${r.stderr}`);
  return JSON.parse(r.stdout) as ReturnType<typeof summaryOf>;
}

const STARTED = /starting the embedded stack/;

test('fencepost run refuses bad options in one line each, exit 2, before it runs the app', async () => {
  const p = project('bad-options', ['nightly-report']);
  const cases: [string[], RegExp][] = [
    [['--date', '2026-02-30'], /--date must be a calendar date YYYY-MM-DD, got "2026-02-30"/],
    [['--date', '30/11/2026'], /--date must be a calendar date YYYY-MM-DD/],
    [['--job', 'Nightly_Report'], /--job must be a job's name/],
    [['--dynamodb-endpoint', 'http://127.0.0.1:1'], /give both --dynamodb-endpoint and --s3-endpoint/],
    [['--dat', '2026-11-30'], /unknown option '--dat'; did you mean --date\?/],
  ];
  for (const [args, message] of cases) {
    const r = await fencepost(['run', '--app', p.app, ...args], p.dir);
    assert.equal(r.code, 2, `${args.join(' ')}: exit 2; stderr: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, '', 'nothing on stdout');
    assert.equal(existsSync(path.join(p.dir, 'ran')), false, `${args.join(' ')}: the app was not run`);
  }
});

test('fencepost run with no --app and no cdk.json says how to name the app, exit 2', async () => {
  const p = project('no-app', []);
  const r = await fencepost(['run', '--date', '2026-11-30'], p.dir);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /no app to synthesize: give --app "<command>".*cdk\.json with "app"/);
  assert.doesNotMatch(r.stderr, STARTED);
});

test('fencepost run takes the app from cdk.json, as cdk synth does, and refuses an app with no FencedJob (exit 2, no stack started)', async () => {
  const p = project('no-job', []);
  writeFileSync(path.join(p.dir, 'cdk.json'), JSON.stringify({ app: p.app, context: {} }));
  const r = await fencepost(['run', '--date', '2026-11-30'], p.dir);
  assert.equal(r.code, 2, r.stderr);
  assert.ok(existsSync(path.join(p.dir, 'ran')), "cdk.json's app was run");
  assert.match(r.stderr, /the app has no FencedJob/);
  assert.doesNotMatch(r.stderr, STARTED);
});

test('fencepost run with several FencedJobs needs --job, and refuses a --job the app does not have, naming the ones it has', async () => {
  const names = ['nightly-report', 'send-reminders'];
  const p = project('two-jobs', names);
  const several = await fencepost(['run', '--app', p.app, '--date', '2026-11-30'], p.dir);
  assert.equal(several.code, 2, several.stderr);
  assert.match(
    several.stderr,
    new RegExp(`the app has ${names.length} fenced jobs, ${names.map((n) => `${n} \\(stack App\\)`).join(', ')}: name one with --job`),
  );
  const unknown = await fencepost(['run', '--app', p.app, '--job', 'billing', '--date', '2026-11-30'], p.dir);
  assert.equal(unknown.code, 2, unknown.stderr);
  assert.match(
    unknown.stderr,
    /--job billing: the app has no FencedJob of that name; it has nightly-report \(stack App\), send-reminders \(stack App\)/,
  );
  for (const r of [several, unknown]) assert.doesNotMatch(r.stderr, STARTED);
});

test('fencepost --help lists run, and run --help documents its options', async () => {
  const main = await fencepost(['--help'], work);
  assert.equal(main.code, 0);
  assert.match(main.stdout, /^\s+run\s+run your FencedJob locally/m);
  const help = await fencepost(['run', '--help'], work);
  assert.equal(help.code, 0);
  for (const option of ['--app', '--job', '--date', '--dynamodb-endpoint', '--json'])
    assert.ok(help.stdout.includes(option), `run --help names ${option}`);
});

test('fencepost run refuses, before any stack starts, a function whose environment names what a local run does not provide (exit 2, the variable named)', async () => {
  const dir = path.join(work, 'queue-ref');
  const table = { Type: 'AWS::DynamoDB::Table', Properties: { KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }] } };
  writeAssembly(dir, {
    Locks: table,
    Jobs: table,
    Bucket: { Type: 'AWS::S3::Bucket', Properties: {} },
    Queue: { Type: 'AWS::SQS::Queue', Properties: {} },
    ...markedJob({
      FENCEPOST_LOCK_TABLE: { Ref: 'Locks' },
      FENCEPOST_JOB_TABLE: { Ref: 'Jobs' },
      FENCEPOST_BUCKET: { Ref: 'Bucket' },
      QUEUE_URL: { Ref: 'Queue' },
    }),
  });
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30'], dir);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /function ChunkFn: its environment variable QUEUE_URL is \{"Ref":"Queue"\}, which a local run does not provide/);
  assert.doesNotMatch(r.stderr, STARTED);
});

const table = {
  Type: 'AWS::DynamoDB::Table',
  Properties: { KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }] },
};

test("fencepost run of a job whose stack is inside a Stage: local names from the stack's name, not its construct path (Stage/Stack)", async () => {
  const dir = path.join(work, 'stage');
  const stage = { stage: 'Prod', stack: 'Reports' };
  writeAssembly(
    dir,
    {
      Locks: table,
      Jobs: table,
      Bucket: { Type: 'AWS::S3::Bucket', Properties: {} },
      ...markedJob({ FENCEPOST_LOCK_TABLE: { Ref: 'Locks' }, FENCEPOST_JOB_TABLE: { Ref: 'Jobs' }, FENCEPOST_BUCKET: { Ref: 'Bucket' } }),
    },
    stage,
  );
  const { args, clients } = await onStores();
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30', '--json', ...args], dir);
  const summary = summaryOf(r);
  assert.equal(summary.execution.status, 'SUCCEEDED', r.stderr);
  for (const t of summary.tables) {
    assert.doesNotMatch(t.name, /\//, `table ${t.logicalId}: no "/" in its local name`);
    await clients.raw.send(new DescribeTableCommand({ TableName: t.name }));
  }
  assert.deepEqual(
    summary.tables.map((t) => t.name).sort(),
    ['Jobs', 'Locks'].map((id) => `${stage.stage}-${stage.stack}-${id}`),
  );
  clients.destroy();
});

test('fencepost run of a job whose lock and job tables are given by name (Table.fromTableName): both created with the schema of lib/core/schema.ts', async () => {
  const dir = path.join(work, 'tables-by-name');
  const names = { locks: 'imported-locks', jobs: 'imported-jobs' };
  writeAssembly(dir, {
    Bucket: { Type: 'AWS::S3::Bucket', Properties: {} },
    ...markedJob({ FENCEPOST_LOCK_TABLE: names.locks, FENCEPOST_JOB_TABLE: names.jobs, FENCEPOST_BUCKET: { Ref: 'Bucket' } }),
  });
  const { args, clients } = await onStores();
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30', '--json', ...args], dir);
  const summary = summaryOf(r);
  assert.equal(summary.execution.status, 'SUCCEEDED', r.stderr);
  assert.deepEqual(summary.tables.map((t) => [t.name, t.role]).sort(), [
    [names.jobs, 'jobs'],
    [names.locks, 'locks'],
  ]);
  const locks = (await clients.raw.send(new DescribeTableCommand({ TableName: names.locks }))).Table!;
  assert.deepEqual(locks.KeySchema, [{ AttributeName: LOCK_TABLE.partitionKey.name, KeyType: 'HASH' }]);
  const jobs = (await clients.raw.send(new DescribeTableCommand({ TableName: names.jobs }))).Table!;
  assert.deepEqual(jobs.KeySchema, [{ AttributeName: JOB_TABLE.partitionKey.name, KeyType: 'HASH' }]);
  assert.deepEqual(
    jobs.GlobalSecondaryIndexes?.map((i) => i.IndexName),
    [JOB_TABLE.sparseIndex?.name],
  );
  clients.destroy();
});

test('fencepost run of a job whose manifest bucket is given by name (Bucket.fromBucketName): the bucket is created before the night', async () => {
  const dir = path.join(work, 'bucket-by-name');
  const bucket = 'imported-manifests';
  writeAssembly(dir, {
    Locks: table,
    Jobs: table,
    ...markedJob({ FENCEPOST_LOCK_TABLE: { Ref: 'Locks' }, FENCEPOST_JOB_TABLE: { Ref: 'Jobs' }, FENCEPOST_BUCKET: bucket }),
  });
  const { args, clients } = await onStores();
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30', '--json', ...args], dir);
  assert.equal(summaryOf(r).execution.status, 'SUCCEEDED', r.stderr);
  await assert.doesNotReject(clients.s3.send(new HeadBucketCommand({ Bucket: bucket })), `bucket ${bucket} exists; stderr:\n${r.stderr}`);
  clients.destroy();
});

test("fencepost run resolves a function's pseudo-parameters (AWS::Region, AccountId, Partition, URLSuffix, StackName) to the run's local values", async () => {
  const dir = path.join(work, 'pseudo');
  const out = path.join(dir, 'env.json');
  const pseudo = ['Region', 'AccountId', 'Partition', 'URLSuffix', 'StackName'];
  writeAssembly(dir, {
    Locks: table,
    Jobs: table,
    ...markedJob({
      FENCEPOST_LOCK_TABLE: { Ref: 'Locks' },
      FENCEPOST_JOB_TABLE: { Ref: 'Jobs' },
      JOB_ARN: { Ref: 'Job' },
      ENV_OUT: out,
      ...Object.fromEntries(pseudo.map((p) => [`P_${p}`, { Ref: `AWS::${p}` }])),
    }),
  });
  const { args, clients } = await onStores();
  clients.destroy();
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30', '--json', ...args], dir);
  const summary = summaryOf(r);
  assert.equal(summary.execution.status, 'SUCCEEDED', r.stderr);
  const env = JSON.parse(readFileSync(out, 'utf8')) as Record<string, string>;
  // The job's state machine ARN the same run gives the function: arn:<partition>:states:<region>:<account>:…
  const [, partition, , region, account] = env.JOB_ARN.split(':');
  assert.deepEqual(
    { region: env.P_Region, account: env.P_AccountId, partition: env.P_Partition, suffix: env.P_URLSuffix, stack: env.P_StackName },
    { region, account, partition, suffix: resolveJoin({ Ref: 'AWS::URLSuffix' }), stack: summary.stack },
  );
});

test('fencepost run refuses a lock table or manifest bucket given by a name DynamoDB or S3 would refuse, before any stack starts (exit 2)', async () => {
  const dir = path.join(work, 'bad-names');
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ FENCEPOST_LOCK_TABLE: 'a/b', FENCEPOST_JOB_TABLE: { Ref: 'Jobs' } }, /FENCEPOST_LOCK_TABLE "a\/b" is not a DynamoDB table name/],
    [
      { FENCEPOST_LOCK_TABLE: { Ref: 'Locks' }, FENCEPOST_JOB_TABLE: { Ref: 'Jobs' }, FENCEPOST_BUCKET: 'Manifests_Bucket' },
      /FENCEPOST_BUCKET "Manifests_Bucket" is not an S3 bucket name/,
    ],
  ];
  for (const [environment, message] of cases) {
    writeAssembly(dir, { Locks: table, Jobs: table, ...markedJob(environment) });
    const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30'], dir);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, STARTED);
  }
});

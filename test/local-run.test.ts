/**
 * `fencepost run` (the package's command, bin/package.ts) refusing what it cannot run, before anything starts: bad
 * options before the app is synthesized, and an app with no FencedJob, several, or not the one named, before the
 * embedded stack starts. The app here is a stand-in that writes a cloud assembly of marked state machines, as
 * FencedJob marks them (FENCED_JOB_MARK); the real synth and run of a user's job is in test/pack.test.ts.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { FENCED_JOB_MARK } from '../lambda/env';

const ROOT = path.resolve(__dirname, '..');
const work = mkdtempSync(path.join(tmpdir(), 'fencepost-local-run-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** The package's command, run in `cwd`. */
function fencepost(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // tsx's loader by its path: the command runs in folders of its own, where `--import tsx` would not resolve.
  const tsx = pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, path.join(ROOT, 'bin/package.ts'), ...args], {
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
  const manifest = { version: '1', artifacts: { App: { type: 'aws:cloudformation:stack', properties: { templateFile: 'App.template.json' } } } };
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
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const definition = {
    'Fn::Join': ['', ['{"StartAt":"Chunk","States":{"Chunk":{"Type":"Task","Resource":"', { 'Fn::GetAtt': ['ChunkFn', 'Arn'] }, '","End":true}}}']],
  };
  const table = { Type: 'AWS::DynamoDB::Table', Properties: { KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }] } };
  const resources = {
    Locks: table,
    Jobs: table,
    Bucket: { Type: 'AWS::S3::Bucket', Properties: {} },
    Queue: { Type: 'AWS::SQS::Queue', Properties: {} },
    ChunkFn: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Code: { S3Key: 'abc.zip' },
        Handler: 'index.handler',
        Runtime: 'nodejs24.x',
        Environment: {
          Variables: {
            FENCEPOST_LOCK_TABLE: { Ref: 'Locks' },
            FENCEPOST_JOB_TABLE: { Ref: 'Jobs' },
            FENCEPOST_BUCKET: { Ref: 'Bucket' },
            QUEUE_URL: { Ref: 'Queue' },
          },
        },
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
  const assembly = path.join(dir, 'cdk.out');
  mkdirSync(path.join(assembly, 'asset.abc'), { recursive: true });
  writeFileSync(path.join(assembly, 'asset.abc', 'index.js'), 'exports.handler = async () => ({});');
  writeFileSync(path.join(assembly, 'App.template.json'), JSON.stringify({ Resources: resources }));
  writeFileSync(
    path.join(assembly, 'manifest.json'),
    JSON.stringify({ version: '1', artifacts: { App: { type: 'aws:cloudformation:stack', properties: { templateFile: 'App.template.json' } } } }),
  );
  const r = await fencepost(['run', '--assembly', 'cdk.out', '--date', '2026-11-30'], dir);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /function ChunkFn: its environment variable QUEUE_URL is \{"Ref":"Queue"\}, which a local run does not provide/);
  assert.doesNotMatch(r.stderr, STARTED);
});

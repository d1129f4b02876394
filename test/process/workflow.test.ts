/**
 * The synthesized billing state machine, run locally (lib/local/workflow.ts) with real worker processes on the
 * embedded stack: a whole night, two executions of the same night at once, a holder process paused past its
 * lease between two chunk tasks, and bad input refused before anything is written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { audit, auditDeps } from '../../apps/billing/audit';
import { exitedAfterOutput } from '../../verify/chaos/worker-process';
import { runSweeperLocally, runWorkflowLocally, synthesizeWorkflow } from '../../lib/local/workflow';
import { billingApp } from '../../apps/billing/app';
import { systemClock } from '../../lib/core/clock';
import { DEFAULTS } from '../../apps/billing/settings';
import { Events } from '../../lib/core/events';
import { raise as raiseFence } from '../../lib/core/fence';
import { claim } from '../../lib/core/lease';
import { Keys } from '../../apps/billing/keys';
import { requeueRunName } from '../../lib/lambda/sweep-verify';
import { namespace, type Namespace } from '../support/stack';
import { spawn } from 'node:child_process';
import { startWorker } from '../support/worker';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const DATE = '2026-09-28';
/**
 * The workers' lease: a holder loses it only when a test stops it (a renewal has 6 s to be answered, which a loaded
 * machine does not miss; the 3 s lease this replaced left 2 s, and runs failed on it), and a second worker waits it out
 * in 8 s.
 */
const LEASE_MS = 8000;
const night = [
  '--date',
  DATE,
  '--invoices',
  '2000',
  '--chunk-size',
  '500',
  '--lease-ms',
  String(LEASE_MS),
  '--renew-ms',
  '1000',
  '--margin-ms',
  '1000',
  '--engine',
  'stepfunctions',
];

async function auditNight(ns: Namespace) {
  return audit(auditDeps(ns.clients, ns.tables, ns.bucket), DATE, 2000);
}

test('a whole night through the synthesized workflow completes and the audit holds', async () => {
  const ns = await namespace();
  const w = startWorker(ns, [...night, '--worker', 'exec-1']);
  assert.equal(await w.exited, 0, w.stderr.join('\n'));
  const kinds = new Set(w.events.map((e) => e.event));
  for (const k of ['sighted', 'claim', 'renew', 'fence-raised', 'manifest-raised', 'batch-committed', 'chunk-committed', 'completed', 'released'])
    assert.ok(kinds.has(k as never), k);
  assert.equal(w.events.filter((e) => e.event === 'chunk-committed').length, 4);
  assert.ok(w.events.filter((e) => e.event === 'renew').length >= 6, 'every task that acts for the holder renewed first');
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
  assert.equal(report.state, 'DONE');
});

test('two executions of the same night started together: one completes, the other ends lost or already-done; nothing twice', async () => {
  const ns = await namespace();
  const a = startWorker(ns, [...night, '--worker', 'exec-a']);
  const b = startWorker(ns, [...night, '--worker', 'exec-b']);
  const [ca, cb] = await Promise.all([a.exited, b.exited]);
  const outcomes = [a, b].map((w) =>
    w.events.find((e) => e.event === 'completed') ? 'completed' : w.events.find((e) => e.event === 'claim') ? 'claimed' : 'waited',
  );
  assert.ok(
    [ca, cb].every((c) => c === 0 || c === 3),
    `exit codes ${ca}, ${cb}: ${a.stderr.join(' ')} ${b.stderr.join(' ')}`,
  );
  assert.equal(outcomes.filter((o) => o === 'completed').length, 1, `exactly one completed: ${outcomes}`);
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
  assert.equal(report.invoicesFound, 2000);
});

test('a holder process paused past its lease between two chunk tasks is stopped; the other execution completes the night', async () => {
  const ns = await namespace();
  const a = startWorker(ns, [...night, '--worker', 'exec-a'], { faults: { sigstop: 'after-chunk:1' } });
  await a.waitFor((e) => e.fault === 'sigstop');
  const b = startWorker(ns, [...night, '--worker', 'exec-b']);
  const claimed = await b.waitFor((e) => e.event === 'claim');
  assert.equal(claimed.token, 2);
  assert.ok(Number(claimed.waitedMs) >= LEASE_MS, "B waited out A's lease in its Wait state");
  await b.waitFor((e) => e.event === 'fence-raised');
  a.child.kill('SIGCONT');
  assert.equal(await a.exited, 3, 'A ends as lost, quietly, with the lost exit code');
  assert.ok(
    a.events.some((e) => e.event === 'lease-lost' || e.event === 'batch-rejected' || e.event === 'commit-rejected'),
    'A learned it lost',
  );
  assert.ok(!a.events.some((e) => e.event === 'chunk-committed' && Number(e.chunk) > 1), 'A committed nothing after its pause');
  assert.equal(await b.exited, 0, b.stderr.join('\n'));
  assert.ok(
    b.events.some((e) => e.event === 'chunk-committed'),
    'B finished the chunks A left',
  );
  assert.ok(
    !b.events.some((e) => e.event === 'chunk-committed' && [0, 1].includes(Number(e.chunk))),
    'B skipped the chunks A had committed (learned from the raise)',
  );
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('bad state-machine input fails at validation with nothing written', async () => {
  const ns = await namespace();
  // In a child process: the handlers' runtime is per process, as in a Lambda.
  const script = `
    const { runWorkflowLocally } = require('./lib/local/workflow');
    const { billingApp } = require('./apps/billing/app');
    const { localClients } = require('./lib/core/aws/clients');
    const { callLogSink } = require('./verify/proofs/call-log');
    const given = ${JSON.stringify({ endpoints: ns.endpoints, tables: ns.tables, bucket: ns.bucket })};
    const common = { app: billingApp, clients: localClients(given.endpoints), endpoints: given.endpoints, tables: given.tables, bucket: given.bucket, onCall: callLogSink() };
    (async () => {
      const results = [];
      for (const input of [{}, { jobDate: '2026-02-30' }, { jobDate: 20260928 }, { scheduledTime: 'yesterday' }]) {
        results.push(await runWorkflowLocally({ ...common, name: 'bad-' + results.length, input }));
      }
      console.log(JSON.stringify(results));
    })();`;
  const p = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: `${__dirname}/../..`,
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  await exitedAfterOutput(p);
  const results = JSON.parse(out.trim().split('\n').at(-1)!) as { status: string; endState: string; cause: string }[];
  for (const r of results) {
    assert.equal(r.status, 'FAILED');
    assert.equal(r.endState, 'InvalidInput');
  }
  assert.match(results[1].cause, /not a calendar date/);
  for (const table of Object.values(ns.tables)) {
    const items = await ns.clients.ddb.send(new ScanCommand({ TableName: table }));
    assert.equal(items.Count, 0, `${table} is empty`);
  }
  const objects = await ns.clients.s3.send(new ListObjectsV2Command({ Bucket: ns.bucket }));
  assert.equal(objects.KeyCount ?? 0, 0, 'the bucket is empty');
});

/** A holder that claims and raises the fence for the night, then dies: no renewal ever again. */
async function deadHolder(ns: Namespace, settings: { leaseMs: number; renewMs: number; marginMs: number }) {
  const events = new Events('dead', systemClock);
  const held = await claim({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events }, Keys.lock(DATE), 'dead', {
    ...DEFAULTS,
    ...settings,
  });
  await raiseFence({ jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock }, Keys.job(DATE), held.token, 'dead', 4);
  return held;
}

/**
 * The dead holder's lease is short, so a sweep waits it out in 2 s (the sweeper waits the lease its lock item declares).
 * The re-queued runs take the default lease with a short renewal: nothing waits their lease out, and a 2 s lease left
 * a renewal 1.5 s to be answered, which a loaded machine missed (the run stopped at its stop time, though every part
 * of it was right).
 */
const deadLease = { leaseMs: 2000, renewMs: 500, marginMs: 500 };
const sweepSettings = { leaseMs: 10_000, renewMs: 1000, marginMs: 1000, invoices: 2000, chunkSize: 500, clockOffsetAlarmMs: 125 };
const sweepOn = (ns: Namespace, name: string) => ({
  app: billingApp,
  clients: ns.clients,
  endpoints: ns.endpoints,
  onCall: ns.onCall,
  tables: ns.tables,
  bucket: ns.bucket,
  settings: sweepSettings,
  name,
});

test("the synthesized sweeper, on its bundles, re-queues a dead holder's night and starts a billing run that completes it", async () => {
  const ns = await namespace();
  const held = await deadHolder(ns, deadLease);
  const r = await runSweeperLocally(sweepOn(ns, 'sweep'));
  assert.equal(r.status, 'SUCCEEDED', `${r.error}: ${r.cause}`);
  assert.equal(r.endState, 'Swept');
  assert.equal(r.started.length, 1, 'one billing run started for the re-queued night');
  assert.equal(r.started[0].name, requeueRunName(DATE, held.token, 'sweep'), 'named after the night, the fence seen and the sweep');
  assert.equal(r.started[0].result.endState, 'Completed', JSON.stringify(r.started[0].result));
  const report = await audit(auditDeps(ns.clients, ns.tables, ns.bucket), DATE, 2000);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a sweep whose StartExecution is refused writes nothing, so the next sweep still starts the night and it completes', async () => {
  const ns = await namespace();
  const held = await deadHolder(ns, deadLease);
  const first = await runSweeperLocally({ ...sweepOn(ns, 'sweep-1'), refuseStart: (call) => (call === 1 ? { when: 'before' } : undefined) });
  assert.equal(first.status, 'FAILED', 'VerifyAndRequeue fails on the refused start (ExecutionLimitExceeded is not retried)');
  assert.equal(first.started.length, 0, 'nothing was started');
  const second = await runSweeperLocally(sweepOn(ns, 'sweep-2'));
  assert.equal(second.status, 'SUCCEEDED', `${second.error}: ${second.cause}`);
  assert.deepEqual(
    second.started.map((s) => s.name),
    [requeueRunName(DATE, held.token, 'sweep-2')],
    'the next sweep still finds the night in the sparse index and starts it',
  );
  assert.equal(second.started[0].result.endState, 'Completed', JSON.stringify(second.started[0].result));
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a sweep that dies right after its StartExecution landed leaves a night its run completes; the next sweep finds nothing', async () => {
  const ns = await namespace();
  const held = await deadHolder(ns, deadLease);
  // The start lands, then the function fails before anything after it: as if it died there.
  const first = await runSweeperLocally({ ...sweepOn(ns, 'sweep-1'), refuseStart: (call) => (call === 1 ? { when: 'after' } : undefined) });
  assert.equal(first.status, 'FAILED');
  assert.deepEqual(
    first.started.map((s) => s.name),
    [requeueRunName(DATE, held.token, 'sweep-1')],
  );
  assert.equal(first.started[0].result.endState, 'Completed', JSON.stringify(first.started[0].result));
  const second = await runSweeperLocally(sweepOn(ns, 'sweep-2'));
  assert.equal(second.endState, 'NothingClaimed', 'the night is DONE: out of the sparse index');
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a StartExecution whose answer was lost is sent again with the same name and input, and meets the same execution', async () => {
  const ns = await namespace();
  const held = await deadHolder(ns, deadLease);
  // The start lands, its answer is a throttle: the SDK sends it again, and Step Functions answers with the open execution.
  const r = await runSweeperLocally({
    ...sweepOn(ns, 'sweep-1'),
    refuseStart: (call) => (call === 1 ? { when: 'after', type: 'ThrottlingException' } : undefined),
  });
  assert.equal(r.status, 'SUCCEEDED', `${r.error}: ${r.cause}`);
  assert.deepEqual(
    r.started.map((s) => s.name),
    [requeueRunName(DATE, held.token, 'sweep-1')],
    'one execution, though it was asked for twice',
  );
  assert.equal(r.started[0].result.endState, 'Completed', JSON.stringify(r.started[0].result));
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a re-queued run that dies before its raise leaves the night findable: the next sweep starts a new run (a new name), and it completes', async () => {
  const ns = await namespace();
  await deadHolder(ns, deadLease);
  const first = await runSweeperLocally({ ...sweepOn(ns, 'sweep-1'), killStarted: () => true });
  assert.equal(first.status, 'SUCCEEDED', `${first.error}: ${first.cause}`);
  assert.deepEqual(
    first.started.map((s) => s.result.status),
    ['FAILED'],
    'the re-queued run was started and died before its first task',
  );
  const second = await runSweeperLocally(sweepOn(ns, 'sweep-2'));
  assert.equal(second.endState, 'Swept', 'the next sweep still finds the night in the sparse index');
  assert.equal(second.started.length, 1, 'and starts one run for it');
  assert.notEqual(second.started[0].name, first.started[0].name, "a new name: the dead run's is taken by a closed execution");
  assert.equal(second.started[0].result.endState, 'Completed', JSON.stringify(second.started[0].result));
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('a night run as a Distributed Map (distributedMapAboveChunks: 0) completes on the bundles, chunks 3 at once', async () => {
  const ns = await namespace();
  // The default lease with the short renewal a Distributed Map asks for (lib/constructs/renewal-gap.ts): nothing here
  // waits a lease out, and a 3 s lease left a renewal 2 s to be answered, which a loaded machine missed (the run
  // failed with StopTimePassedError while every part of it was right).
  const settings = {
    leaseMs: 10_000,
    renewMs: 1000,
    marginMs: 1000,
    invoices: 2000,
    chunkSize: 500,
    chunkConcurrency: 3,
    distributedMapAboveChunks: 0,
    clockOffsetAlarmMs: 250,
  };
  const wf = synthesizeWorkflow(billingApp, settings);
  const chunks = (wf.definition.States as Record<string, { ItemProcessor?: { ProcessorConfig?: { Mode?: string } } }>).Chunks;
  assert.equal(chunks.ItemProcessor?.ProcessorConfig?.Mode, 'DISTRIBUTED', 'the template holds a Distributed Map');
  const r = await runWorkflowLocally({
    app: billingApp,
    clients: ns.clients,
    endpoints: ns.endpoints,
    onCall: ns.onCall,
    tables: ns.tables,
    bucket: ns.bucket,
    name: 'distributed',
    input: { jobDate: DATE },
    settings,
  });
  assert.equal(r.endState, 'Completed', `${r.error}: ${r.cause}`);
  assert.equal(r.history.filter((h) => h.type === 'StateEntered' && h.state === 'BillChunk').length, 4);
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

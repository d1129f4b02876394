/**
 * Every error name the state machines match (Retry and Catch `ErrorEquals`, both definitions as synthesized) is
 * thrown by the BUNDLED functions under that name, and the execution takes the route the design gives it
 * (docs/DESIGN.md §5): lost lease, stop time passed and fenced out end quietly in `Lost`; a transient store error
 * is retried; bad input ends in `InvalidInput`; anything else fails (`Failed`), the lease left to lapse once the chunks
 * started (released before: `ReleaseAfterFailure`).
 *
 * Each case drives a real bundle into the error: the lock stolen between two tasks, the fence raised under the
 * holder, a renewal answer held back past the stop time, the store answering 500, a table gone. A bundle built
 * without `keepNames` throws minified class names and every case here fails.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../../lib/core/clock';
import { raiseChunkFences, readJob } from '../../lib/core/fence';
import { Attr } from '../../lib/core/schema';
import { Keys } from '../../apps/billing/keys';
import { DEFAULT_BACKOFF, newRvn } from '../../lib/core/conditions';
import { startDynamoDbProxy, type DynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { runWorkflowLocally, synthesizeWorkflow, type LocalResult, type LocalExecution } from '../../lib/local/workflow';
import { billingApp } from '../../apps/billing/app';
import { LocalLambdas, type DeployedFunction } from '../../lib/local/lambda-runner';
import { namespace, type Namespace } from '../support/stack';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const DATE = '2026-09-28';
const SETTINGS = { leaseMs: 3000, renewMs: 1000, marginMs: 1000, invoices: 400, chunkSize: 200, clockOffsetAlarmMs: 250 };
const wf = synthesizeWorkflow(billingApp, SETTINGS);

/** Raised by the Lambda service, never by a function's code (Step Functions best practices: handle transient Lambda service exceptions). */
const SERVICE_ERRORS = [
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException',
];
/**
 * Reported by Lambda or Step Functions when a function's process dies or never answers, never thrown by its code: a
 * runtime that exited, a function past its own timeout (both produced by the local runner: test/process/lambda-runner.test.ts),
 * a failure Lambda cannot name, a task past its TimeoutSeconds. The steps before the raise retry them
 * (test/unit/explore-workflow.test.ts drives them through the definition).
 */
const PROCESS_DEATHS = ['Runtime.ExitError', 'Sandbox.Timedout', 'Lambda.Unknown', 'States.Timeout'];
/** Driven below: each is thrown by a bundle and routed by the definition. */
const DRIVEN = new Set<string>();

function errorEquals(machine: Record<string, unknown>): Set<string> {
  const names = new Set<string>();
  const visit = (states: Record<string, Record<string, unknown>>) => {
    for (const state of Object.values(states)) {
      for (const clause of [...((state.Retry as { ErrorEquals: string[] }[]) ?? []), ...((state.Catch as { ErrorEquals: string[] }[]) ?? [])]) {
        for (const n of clause.ErrorEquals) names.add(n);
      }
      const inner = (state.ItemProcessor ?? state.Iterator) as { States: Record<string, Record<string, unknown>> } | undefined;
      if (inner) visit(inner.States);
    }
  };
  visit(machine.States as Record<string, Record<string, unknown>>);
  return names;
}

let proxy: DynamoDbProxy | undefined;
async function night(
  ns: Namespace,
  name: string,
  input: Record<string, unknown>,
  hooks?: LocalExecution['hooks'],
  settings: Record<string, number> = SETTINGS,
): Promise<LocalResult> {
  proxy ??= await startDynamoDbProxy({ target: ns.endpoints.dynamodb });
  return runWorkflowLocally({
    app: billingApp,
    clients: ns.clients,
    endpoints: { ...ns.endpoints, dynamodb: proxy.endpoint },
    onCall: ns.onCall,
    tables: ns.tables,
    bucket: ns.bucket,
    name,
    input,
    settings,
    hooks,
  });
}

/** Who holds the night's lease now (undefined: nobody: it was given back). */
async function holderNow(ns: Namespace): Promise<unknown> {
  const lock = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { [Attr.pk]: Keys.lock(DATE) }, ConsistentRead: true }));
  return lock.Item?.holder;
}

/** A hook that deletes a table once `state` has run. */
const dropAfter = (ns: Namespace, state: string, table: string): LocalExecution['hooks'] => ({
  afterTask: async (ran) => {
    if (ran === state) await ns.clients.raw.send(new DeleteTableCommand({ TableName: table }));
  },
});

function failedWith(r: LocalResult, state: string): string | undefined {
  return r.history.find((h) => h.type === 'StateFailed' && h.state === state)?.error;
}
const entered = (r: LocalResult, state: string) => r.history.some((h) => h.type === 'StateEntered' && h.state === state);

test('bad input: Prepare throws ConfigError → InvalidInput, nothing written', async () => {
  const ns = await namespace();
  const r = await night(ns, 'bad-date', { jobDate: '2026-02-30' });
  assert.equal(failedWith(r, 'Prepare'), 'ConfigError');
  assert.equal(r.status, 'FAILED');
  assert.equal(r.endState, 'InvalidInput');
  DRIVEN.add('ConfigError');
});

test('the lock stolen after Claim: RaiseFence throws LeaseLostError → Lost (quietly)', async () => {
  const ns = await namespace();
  const r = await night(
    ns,
    'robbed',
    { jobDate: DATE },
    {
      afterTask: async (state) => {
        if (state !== 'Claim') return;
        await ns.clients.ddb.send(
          new UpdateCommand({
            TableName: ns.tables.locks,
            Key: { [Attr.pk]: Keys.lock(DATE) },
            UpdateExpression: `SET ${Attr.holder} = :thief, ${Attr.rvn} = :rvn, ${Attr.epoch} = ${Attr.epoch} + :one`,
            ExpressionAttributeValues: { ':thief': 'thief', ':rvn': newRvn(), ':one': 1 },
          }),
        );
      },
    },
  );
  assert.equal(failedWith(r, 'RaiseFence'), 'LeaseLostError');
  assert.equal(r.status, 'SUCCEEDED');
  assert.equal(r.endState, 'Lost');
  DRIVEN.add('LeaseLostError');
});

test('the fences raised under the holder: BillChunk throws FencedOutError → Lost (quietly)', async () => {
  const ns = await namespace();
  const r = await night(
    ns,
    'fenced',
    { jobDate: DATE },
    {
      afterTask: async (state) => {
        if (state !== 'RaiseFence') return;
        // What a newer holder's raise does to the chunk fences (the lock item still names us: our renewals pass).
        const deps = { jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
        const ours = Number((await readJob(deps, Keys.job(DATE)))?.fence);
        await raiseChunkFences(deps, Keys.job(DATE), ours + 1, [0, 1]);
      },
    },
  );
  assert.equal(failedWith(r, 'BillChunk'), 'FencedOutError');
  assert.equal(r.status, 'SUCCEEDED');
  assert.equal(r.endState, 'Lost');
  DRIVEN.add('FencedOutError');
});

test('a renewal answered after the stop time: BillChunk throws StopTimePassedError → Lost (quietly)', async () => {
  const ns = await namespace();
  const chunkFn = wf.job.taskFunctions.BillChunk;
  const r = await night(
    ns,
    'slow-renewal',
    { jobDate: DATE },
    {
      afterTask: (state) => {
        // The chunk's first act is a renewal; its answer arrives after lease − margin on the holder's own clock.
        if (state === 'RaiseFence') proxy!.inject({ kind: 'delay', ms: SETTINGS.leaseMs, operation: 'UpdateItem', principal: chunkFn });
      },
    },
  );
  assert.equal(failedWith(r, 'BillChunk'), 'StopTimePassedError');
  assert.equal(r.endState, 'Lost');
  DRIVEN.add('StopTimePassedError');
});

test("the store answering 500 past the SDK's own retries: BillChunk throws TransientStoreError, the task is retried and the night completes", async () => {
  const ns = await namespace();
  // One invocation gives up after the SDK's attempts per call (its default for DynamoDB, as bundled) times the
  // core's own transient retries + 1; the task's retry then succeeds.
  const sdkAttempts = await new DynamoDBClient({ region: 'us-east-1' }).config.maxAttempts();
  const r = await night(
    ns,
    'flaky-store',
    { jobDate: DATE },
    {
      afterTask: (state) => {
        if (state === 'RaiseFence')
          proxy!.inject({ kind: 'http-500', count: sdkAttempts * (DEFAULT_BACKOFF.retries + 1), operation: 'TransactWriteItems' });
      },
    },
  );
  assert.equal(failedWith(r, 'BillChunk'), 'TransientStoreError', `${JSON.stringify(r.history)} ${JSON.stringify(proxy!.stats())}`);
  assert.ok(
    r.history.some((h) => h.type === 'StateRetried' && h.state === 'BillChunk'),
    'the Retry clause took it',
  );
  assert.equal(r.endState, 'Completed');
  DRIVEN.add('TransientStoreError');
});

test("anything else (a table gone): the chunk fails with the store's error → States.ALL → Failed, the lease left to lapse", async () => {
  const ns = await namespace();
  const r = await night(ns, 'no-table', { jobDate: DATE }, dropAfter(ns, 'RaiseFence', ns.tables.invoices));
  assert.equal(failedWith(r, 'BillChunk'), 'ResourceNotFoundException');
  // A chunk's Lambda may still run under the lease once the chunks started: nothing gives it back.
  assert.ok(!entered(r, 'ReleaseAfterFailure'), 'no release after the chunks started');
  assert.equal(r.status, 'FAILED');
  assert.equal(r.endState, 'Failed');
  assert.equal(await holderNow(ns), 'no-table', "the lease is still the failed run's: it lapses");
  DRIVEN.add('States.ALL');
});

test('a raise that fails (the job table gone after the claim): RaiseFence → States.ALL → ReleaseAfterFailure → Failed, the lease given back', async () => {
  const ns = await namespace();
  const r = await night(ns, 'no-job-table', { jobDate: DATE }, dropAfter(ns, 'Claim', ns.tables.jobs));
  assert.equal(failedWith(r, 'RaiseFence'), 'ResourceNotFoundException');
  assert.ok(entered(r, 'ReleaseAfterFailure'), 'no chunk started: the lease is given back');
  assert.equal(r.endState, 'Failed');
  assert.equal(await holderNow(ns), undefined, 'released');
});

test('the same on a Distributed Map: the failure only looks whether the lease is ours (CheckAfterChunkFailure) and ends Failed, unreleased', async () => {
  const ns = await namespace();
  const distributed = { ...SETTINGS, distributedMapAboveChunks: 0 };
  const r = await night(ns, 'no-table-distributed', { jobDate: DATE }, dropAfter(ns, 'RaiseFence', ns.tables.invoices), distributed);
  assert.ok(entered(r, 'CheckAfterChunkFailure'), JSON.stringify(r.history.map((h) => [h.type, h.state])));
  assert.ok(!entered(r, 'ReleaseAfterFailure'));
  assert.equal(r.endState, 'Failed', 'the lease was still ours: loud');
  assert.equal(await holderNow(ns), 'no-table-distributed', 'nothing given back');
});

test("the sweeper's bundles throw TransientStoreError by name too (its only matched error of its own)", async () => {
  const sight = wf.sweeper.taskFunctions.SightClaimed;
  const fn = wf.functions[sight];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(fn.environment)) env[k] = typeof v === 'string' ? v : 'fencepost-t-x';
  const lambdas = new LocalLambdas({
    functions: { [sight]: { ...fn, environment: env } as DeployedFunction },
    endpoints: { dynamodb: 'http://127.0.0.1:9', s3: 'http://127.0.0.1:9' }, // nothing listens: the store cannot be reached
  });
  try {
    const err = await lambdas.invoke(sight, {}).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.equal(err?.name, 'TransientStoreError');
  } finally {
    await lambdas.close();
  }
});

test('every error name the two state machines match is driven above, or raised only by the Lambda service or Step Functions', () => {
  const names = new Set([...errorEquals(wf.job.definition), ...errorEquals(wf.sweeper.definition)]);
  assert.ok(names.size >= 8, `collected ${[...names].join(', ')}`);
  for (const name of names) {
    assert.ok(
      DRIVEN.has(name) || SERVICE_ERRORS.includes(name) || PROCESS_DEATHS.includes(name),
      `${name} is matched by a definition but no test drives a bundle into it`,
    );
  }
});

after(async () => proxy?.stop());

/**
 * The chunk function's context (lib/lambda/chunk-handler.ts, `fencepost/lambda`): what a job's work on one chunk is given,
 * read from the function's environment: on the in-memory stores and a virtual clock (no AWS client is reached:
 * noDynamo refuses every call that goes around the stores), and through the public handler as a deployed function
 * runs it, its runtime built from its own process environment, on DynamoDB Local.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { Events } from '../../lib/core/events';
import { raiseRun } from '../../lib/core/job';
import { jobKeys } from '../../lib/core/job-keys';
import { claim } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import type { Clients } from '../../lib/core/aws/clients';
import { chunkHandlerOn, fencedChunkHandler } from '../../lib/lambda/chunk-handler';
import { Env } from '../../lib/lambda/env';
import { createRuntime, lazily } from '../../lib/lambda/runtime';
import { noDynamo } from '../support/no-dynamo';
import { namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

/** A job that is not billing, in a number of chunks that is no default. */
const environment = {
  [Env.jobName]: 'reminders',
  [Env.chunks]: '5',
  [Env.lockTable]: 'locks',
  [Env.jobTable]: 'jobs',
  [Env.bucket]: 'bucket',
  [Env.worker]: 'test',
  REMINDER_TABLE: 'reminders-sent',
};
const DATE = '2026-03-14';

test("the chunk's work is given its chunk, the run's chunk count from FENCEPOST_CHUNKS, the date and the environment", async () => {
  const clock = new VirtualClock();
  const stores = { locks: new MemoryLockStore(), jobs: new MemoryJobStore({ clock, jobs: 'jobs' }), manifests: new MemoryManifestStore() };
  const clients = { ddb: noDynamo } as unknown as Clients;
  const source = lazily(() => createRuntime({ environment, clients, stores, clock }));
  const rt = source();
  // The workflow's steps before the chunk: a holder claims the lease and raises every fence (RaiseFence).
  const lease = await claim(rt.deps, rt.job.lock(DATE), 'holder-a', rt.lease);
  await raiseRun(rt.deps, { keys: rt.job, date: DATE, chunks: rt.chunks }, lease);

  const handler = chunkHandlerOn(source, async (c) => ({
    given: {
      chunk: c.chunk,
      chunks: c.chunks,
      date: c.date,
      table: c.env.REMINDER_TABLE,
      token: c.lease.token,
      fence: c.fence.fence.resource,
      fenceToken: c.fence.token,
    },
  }));
  const chunk = Number(environment[Env.chunks]) - 1; // the last chunk of the run
  const out = await handler({ jobDate: DATE, holder: 'holder-a', token: lease.token, chunk });
  assert.deepEqual(out, {
    chunk,
    given: {
      chunk,
      chunks: Number(environment[Env.chunks]),
      date: DATE,
      table: environment.REMINDER_TABLE,
      token: lease.token,
      fence: 'chunk-fence',
      fenceToken: lease.token, // the chunk's fence comes held with the claimed lease's token
    },
  });
});

test("the public handler, on its function's own environment, gives the work the public context only: no runtime, no hooks", async () => {
  const ns = await namespace();
  const keys = jobKeys('reminders');
  // The function's environment, as FencedJob sets it, and the SDK's own endpoint variable for DynamoDB Local.
  const variables = {
    [Env.jobName]: keys.name,
    [Env.chunks]: '3',
    [Env.lockTable]: ns.tables.locks,
    [Env.jobTable]: ns.tables.jobs,
    [Env.bucket]: ns.bucket,
    AWS_ENDPOINT_URL_DYNAMODB: ns.endpoints.dynamodb,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
  };
  const before = Object.fromEntries(Object.keys(variables).map((k) => [k, process.env[k]]));
  Object.assign(process.env, variables);
  try {
    const events = new Events('test', systemClock);
    const lease = await claim(
      { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events },
      keys.lock(DATE),
      'holder-a',
      LEASE_DEFAULTS,
    );
    const tables = { locks: ns.tables.locks, jobs: ns.tables.jobs };
    await raiseRun(
      { locks: new DynamoLockStore(ns.clients.ddb, tables.locks), jobs: new DynamoJobStore(ns.clients.ddb, tables.jobs), clock: systemClock, events },
      { keys, date: DATE, chunks: 3 },
      lease,
    );
    let given: string[] = [];
    const handler = fencedChunkHandler(async (c) => {
      given = Object.keys(c).sort();
      return { chunks: c.chunks };
    });
    assert.deepEqual(await handler({ jobDate: DATE, holder: 'holder-a', token: lease.token, chunk: 1 }), { chunk: 1, chunks: 3 });
    assert.deepEqual(given, ['chunk', 'chunks', 'date', 'env', 'fence', 'lease', 'manifest'], "the context's fields, and nothing of the runtime's");
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

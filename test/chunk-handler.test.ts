/**
 * The chunk function's context (lambda/chunk-handler.ts, `fencepost/lambda`): what a job's work on one chunk is given,
 * read from the function's environment, on the in-memory stores and a virtual clock (no DynamoDB, no AWS client is
 * reached: noDynamo refuses every call that goes around the stores).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../core/clock';
import { raiseRun } from '../core/job';
import { claim } from '../core/lease';
import { MemoryJobStore } from '../core/memory/job-store';
import { MemoryLockStore } from '../core/memory/lock-store';
import { MemoryManifestStore } from '../core/memory/manifest-store';
import type { Clients } from '../core/aws/clients';
import { chunkHandlerOn } from '../lambda/chunk-handler';
import { Env } from '../lambda/env';
import { createRuntime, lazily } from '../lambda/runtime';
import { noDynamo } from './support/no-dynamo';

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
  const lease = await claim(rt.leaseDeps, rt.job.lock(DATE), 'holder-a', rt.lease);
  await raiseRun(rt.runDeps, { keys: rt.job, date: DATE, chunks: rt.chunks }, lease);

  const handler = chunkHandlerOn(source, async (c) => ({
    given: { chunk: c.chunk, chunks: c.chunks, date: c.date, table: c.env.REMINDER_TABLE, token: c.lease.token, fence: c.fence.resource },
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
    },
  });
});

// A chunked job fenced by a lease: claim the job, raise its fence FIRST, then write each chunk's records in fenced
// batches (1 check on the fence + up to 99 puts, all or nothing). Run it twice: the second holder gets a higher
// token, finds every record already there, and a holder still carrying the first token can no longer write.
//
// Stores: FENCEPOST_TEST_DYNAMODB (tables made by local/provision.ts, prefix FENCEPOST_EXAMPLE_PREFIX).
import { FencedOutError, fenceOn, localClients, systemClock, tableNames, withLease, writeBatch, type FencedPut } from '../core';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB ?? 'http://127.0.0.1:8000', s3: process.env.FENCEPOST_TEST_S3 ?? '' });
const tables = tableNames(process.env.FENCEPOST_EXAMPLE_PREFIX ?? 'example-');
const holder = process.argv[2] ?? 'worker-1';
const job = 'report#2026-09-28';
const lines = (chunk: number, token: number): FencedPut[] =>
  Array.from({ length: 50 }, (_, i) => ({
    table: tables.jobs, // beside the job row here; a real job puts its records in a table of its own
    item: { pk: { S: `${job}#line#${chunk * 50 + i}` }, amount: { N: String(100 + i) }, token: { N: String(token) } },
  }));

async function main(): Promise<void> {
  const deps = { ddb: clients.ddb, table: tables.locks, clock: systemClock };
  const summary = await withLease(deps, job, holder, {}, async (lease) => {
    console.error(`${holder} claimed token ${lease.token}`);
    const fence = fenceOn({ ddb: clients.ddb, table: tables.jobs, key: { pk: job }, clock: systemClock, resource: 'report' });
    // 1. Raise the fence before anything else: from now on no lower token writes here, whatever its holder believes.
    await lease.act(() => fence.raise(lease.token, { owner: holder }));
    let recorded = 0;
    let alreadyRecorded = 0;
    for (let chunk = 0; chunk < 3; chunk++) {
      // 2. Check the stop time, then write the chunk under the fence; records an earlier holder wrote come back listed.
      const r = await lease.act(() => writeBatch(fence, lease.token, lines(chunk, lease.token)));
      recorded += r.recorded.length;
      alreadyRecorded += r.alreadyRecorded.length;
    }
    return { holder, token: lease.token, recorded, alreadyRecorded };
  });
  console.log(JSON.stringify(summary));
}

main()
  .catch((err: unknown) => {
    // A fence refusing us means: a newer holder took over. Stop; nothing of the refused batch was written.
    console.log(JSON.stringify({ holder, fencedOut: err instanceof FencedOutError, error: String(err) }));
    process.exitCode = err instanceof FencedOutError ? 3 : 1;
  })
  .finally(() => clients.destroy());

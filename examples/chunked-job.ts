// A chunked job fenced by a lease: claim the job, raise its fence FIRST, then write its records with the batched
// writer (plain items, cut into transactions of 1 check on the fence + up to 99 puts, each all or nothing). Run it
// twice: the second holder gets a higher token, finds every record already there, and a holder still carrying the
// first token can no longer write.
//
// Stores: FENCEPOST_TEST_DYNAMODB (tables made by local/provision.ts, prefix FENCEPOST_EXAMPLE_PREFIX).
import { awsStores, FencedOutError, fenceOn, localClients, systemClock, tableNames, withLease, writeFenced } from '../lib/core';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB ?? 'http://127.0.0.1:8000', s3: process.env.FENCEPOST_TEST_S3 ?? '' });
const tables = tableNames(process.env.FENCEPOST_EXAMPLE_PREFIX ?? 'example-');
const stores = awsStores(clients, tables); // the lock and job tables' stores, built once
const holder = process.argv[2] ?? 'worker-1';
const job = 'report#2026-09-28';
/** The job's records, as plain items: 3 chunks of 50 lines. */
const lines = (token: number) => Array.from({ length: 150 }, (_, i) => ({ pk: `${job}#line#${i}`, amount: 100 + (i % 50), token }));

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const summary = await withLease(deps, job, holder, {}, async (lease) => {
    console.error(`${holder} claimed token ${lease.token}`);
    const fence = fenceOn({ fences: stores.jobs, table: tables.jobs, key: { pk: job }, resource: 'report' });
    // 1. Raise the fence before anything else: from now on no lower token writes here, whatever its holder believes.
    const held = lease.fenced(fence); // the fence, with this lease's token: what the holder raises and writes with
    await lease.act(() => held.raise({ owner: holder }));
    // 2. Write under the fence, checking the stop time before each transaction; records an earlier holder wrote come
    //    back listed, not written again.
    const r = await writeFenced(held, lines(lease.token), {
      table: tables.jobs, // beside the job row here; a real job puts its records in a table of its own
      check: () => lease.check(),
    });
    const [recorded, alreadyRecorded] = [r.recorded.length, r.alreadyRecorded.length];
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

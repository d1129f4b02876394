// What the fence is for: a holder that pauses past its lease (a GC pause, a frozen VM) wakes up still believing it
// holds the lease, and writes. A newer holder raised the fence meanwhile: the store refuses the write, and none of it
// lands.
import { awsStores, FencedOutError, fenceOn, localClients, systemClock, tableNames, withLease, writeFenced } from 'fencepost';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const tables = tableNames('reminders-');
const stores = awsStores(clients, tables); // the lock and job tables' stores, built once
const night = process.argv[2] ?? '2026-12-01';
const job = `reminders#${night}`;
// A short lease, so the next holder waits 2 s for it to run out rather than the default 10 s.
const config = { leaseMs: 2000, renewMs: 500, marginMs: 500 };

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const fence = fenceOn({ fences: stores.jobs, table: tables.jobs, key: { pk: job } });
  await withLease(deps, job, 'pauses', config, async (paused) => {
    await paused.fenced(fence).raise();
    await paused.stopHeartbeat(); // it pauses: a frozen process renews nothing, so its lease runs out
    // Meanwhile the next holder sees the lease unrenewed for a full lease, claims it and raises the fence first.
    await withLease(deps, job, 'next', config, (next) => next.fenced(fence).raise());
    // The paused holder wakes up and writes with its token. It skips the stop-time check: the fence is the safety.
    try {
      await writeFenced(paused.fenced(fence), [{ pk: `${night}#dee`, user: 'dee', token: paused.token }], { table: 'reminders-sent' });
      console.log(`token ${paused.token} wrote: no newer holder has raised the fence`);
    } catch (err) {
      if (!(err instanceof FencedOutError)) throw err;
      console.log(`refused: token ${err.token} is below the fence, ${err.fence}`);
    }
  });
}

main().finally(() => clients.destroy());

// The smallest complete fenced job: claim the night's lease, raise the night's fence to the lease's token FIRST, then
// write through the fence. Run it twice: the second holder gets token 2 and finds every reminder already sent.
import { awsStores, fenceOn, localClients, systemClock, tableNames, withLease, writeFenced } from 'fencepost';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const tables = tableNames('reminders-');
const stores = awsStores(clients, tables); // the lock and job tables' stores, built once
const night = process.argv[2] ?? '2026-12-01';
const job = `reminders#${night}`; // one lease and one fence per night

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const result = await withLease(deps, job, `worker-${process.pid}`, {}, async (lease) => {
    const fence = fenceOn({ fences: stores.jobs, table: tables.jobs, key: { pk: job } });
    const held = lease.fenced(fence); // the fence, with this lease's token: what this holder raises and writes with
    await lease.act(() => held.raise()); // first: from now on no lower token writes here
    const reminders = ['ana', 'bo', 'cy'].map((user) => ({ pk: `${night}#${user}`, user, token: lease.token }));
    // Cut into transactions of 1 check on the fence + up to 99 puts; the stop time checked before each.
    const written = await writeFenced(held, reminders, { table: 'reminders-sent', check: () => lease.check() });
    return { token: lease.token, sent: written.recorded.length, alreadySent: written.alreadyRecorded.length };
  });
  console.log(JSON.stringify(result));
}

main().finally(() => clients.destroy());

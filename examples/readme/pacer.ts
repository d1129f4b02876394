// One pacer at a time: candidates queue for the role, the lowest live one leads, and every ledger entry it appends
// carries its epoch, so the ledger refuses a deposed leader's late write. Start it in two shells: the second waits,
// and leads with a higher epoch once the first resigns (its work is done, or Ctrl-C: it resigns at once).
import { setTimeout as sleep } from 'node:timers/promises';
import { awsStores, localClients, systemClock, tableNames } from 'fencepost';
import { awsLedgerStore, Election, EpochFence, ledgerKey } from 'fencepost/election';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const tables = tableNames('reminders-'); // the lock table holds the queue; the job table, the ledger
const stores = awsStores(clients, tables);
const me = process.argv[2] ?? `pacer-${process.pid}`;
const ticks = Number(process.argv[3] ?? 3); // entries to append, one a second, before resigning

async function main(): Promise<void> {
  const election = new Election({ locks: stores.locks, clock: systemClock }, 'pacer', { leaseMs: 2000, renewMs: 500, marginMs: 500 });
  const fence = new EpochFence({ ledger: awsLedgerStore(clients, tables.jobs), clock: systemClock }, ledgerKey('pacer'));
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  let appended = 0;
  const end = await election.run(me, {
    signal: stop.signal, // aborted: leave the queue, or resign, at once
    onNewLeader: (view) => console.error(`${me}: ${view.leader} leads with epoch ${view.epoch}`),
    onStartedLeading: async (leadership) => {
      const ledger = await leadership.ledger(fence); // its entries carry this leader's epoch
      while (appended < ticks && !leadership.signal.aborted) {
        await ledger.append({ tick: appended }); // checks the stop time, then appends under the fence
        appended++;
        await sleep(1000, undefined, { signal: leadership.signal }).catch(() => undefined); // aborts at the stop time
      }
    },
    onStoppedLeading: ({ why, epoch }) => console.error(`${me}: ${why} (epoch ${epoch})`),
  });
  console.log(JSON.stringify({ candidate: me, why: end.why, epoch: end.epoch, appended }));
}

main().finally(() => clients.destroy());

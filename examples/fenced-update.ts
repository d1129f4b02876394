// One fenced update inside your own transaction: put the guard of the fence your lease holds beside your Update, and
// the Update lands only while the fence accepts your lease's token. A late writer still holding an older token is
// refused (a typed FencedOutError), and nothing it sent lands.
//
// Stores: FENCEPOST_TEST_DYNAMODB (tables made by local/provision.ts, prefix FENCEPOST_EXAMPLE_PREFIX).
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { awsStores, fenceOn, localClients, systemClock, tableNames, withLease, type HeldFence } from '../lib/core';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB ?? 'http://127.0.0.1:8000', s3: process.env.FENCEPOST_TEST_S3 ?? '' });
const tables = tableNames(process.env.FENCEPOST_EXAMPLE_PREFIX ?? 'example-');
const stores = awsStores(clients, tables); // the lock and job tables' stores, built once
const holder = process.argv[2] ?? 'worker-1';
const account = 'acct#42';

/** Credit the account by 10, in one transaction with the fence's check at the holder's token: both land, or neither. */
async function credit(fence: HeldFence): Promise<void> {
  const update = {
    Update: {
      TableName: tables.jobs, // beside the fence here; a real job updates a table of its own
      Key: { pk: { S: account } },
      UpdateExpression: 'ADD balance :ten SET last_token = :t',
      ExpressionAttributeValues: { ':ten': { N: '10' }, ':t': { N: String(fence.token) } },
    },
  };
  await clients.ddb.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(), update] })).catch((err: unknown) => {
    throw fence.fencedOut(err) ?? err; // the guard (position 0) refused us: a typed FencedOutError
  });
}

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const summary = await withLease(deps, `ledger#${account}`, holder, {}, async (lease) => {
    const fence = fenceOn({
      fences: stores.jobs,
      table: tables.jobs,
      key: { pk: `ledger#${account}` },
      clock: systemClock,
      resource: 'ledger',
    });
    const held = lease.fenced(fence); // the fence, with this lease's token
    await lease.act(() => held.raise()); // the fence first
    await lease.act(() => credit(held)); // then the update, checked and guarded
    return { holder, token: lease.token };
  });
  console.log(JSON.stringify(summary));
}

main().finally(() => clients.destroy());

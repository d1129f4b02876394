// One fenced update inside your own transaction: put the fence's guard beside your Update, and the Update lands only
// while the fence accepts your token. A late writer still carrying an older token is refused, and nothing it sent lands.
//
// Stores: FENCEPOST_TEST_DYNAMODB (tables made by local/provision.ts, prefix FENCEPOST_EXAMPLE_PREFIX).
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { fenceOn, localClients, systemClock, tableNames, withLease, type Fence } from '../lib/core';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB ?? 'http://127.0.0.1:8000', s3: process.env.FENCEPOST_TEST_S3 ?? '' });
const tables = tableNames(process.env.FENCEPOST_EXAMPLE_PREFIX ?? 'example-');
const holder = process.argv[2] ?? 'worker-1';
const account = 'acct#42';

/** Credit the account by 10, in one transaction with the fence's check: both land, or neither. */
async function credit(fence: Fence, token: number): Promise<void> {
  const update = {
    Update: {
      TableName: tables.jobs, // beside the fence here; a real job updates a table of its own
      Key: { pk: { S: account } },
      UpdateExpression: 'ADD balance :ten SET last_token = :t',
      ExpressionAttributeValues: { ':ten': { N: '10' }, ':t': { N: String(token) } },
    },
  };
  await clients.ddb.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(token), update] })).catch((err: unknown) => {
    throw fence.fencedOut(err, token) ?? err; // the guard (position 0) refused us: a typed FencedOutError
  });
}

async function main(): Promise<void> {
  const deps = { ddb: clients.ddb, table: tables.locks, clock: systemClock };
  const summary = await withLease(deps, `ledger#${account}`, holder, {}, async (lease) => {
    const fence = fenceOn({ ddb: clients.ddb, table: tables.jobs, key: { pk: `ledger#${account}` }, clock: systemClock, resource: 'ledger' });
    await lease.act(() => fence.raise(lease.token)); // the fence first
    await lease.act(() => credit(fence, lease.token)); // then the update, checked and guarded
    // A writer that paused while holding the previous token wakes up and sends the same update: refused.
    const stale = await credit(fence, lease.token - 1).then(
      () => 'landed',
      (err: Error) => err.name,
    );
    return { holder, token: lease.token, staleWriter: stale };
  });
  console.log(JSON.stringify(summary));
}

main().finally(() => clients.destroy());

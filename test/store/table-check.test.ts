/**
 * The tables are checked at run time (issue 25, item 5), on DynamoDB Local: before the first claim or raise of a
 * process, the lock and job tables are described (DescribeTable, DescribeTimeToLive) once per table, and a table that
 * is not what the library needs is refused with a ConfigError naming it and what is wrong, before anything is written.
 * A TTL on the lock table can delete the item that holds the epoch, and the next claim then starts the fencing token
 * again at 1 (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html: expired items are deleted).
 * `createTables` on a table that exists checks it the same way, rather than answering ok.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { CreateTableCommand, UpdateTimeToLiveCommand, type CreateTableCommandInput, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import { createTables } from '../../lib/core/aws/provision';
import { systemClock } from '../../lib/core/clock';
import { ConfigError } from '../../lib/core/errors';
import { Events } from '../../lib/core/events';
import * as fence from '../../lib/core/fence';
import { claim } from '../../lib/core/lease';
import { tableNames } from '../../lib/core/schema';
import { withLease } from '../../lib/core/with-lease';
import type { AwsCall } from '../../lib/local/call-log';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { endpoints } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const T = { timeout: 120_000 };
const lease = { leaseMs: 1500, renewMs: 500, marginMs: 300, claimBudget: 30 };

let shared: Clients | undefined;
after(() => shared?.destroy());
async function clients(): Promise<Clients> {
  shared ??= localClients(await endpoints());
  return shared;
}

/** A prefix nothing has created. */
const fresh = () => `c${randomBytes(4).toString('hex')}-`;

/** Put TTL on a table, as a user might with the console or `aws dynamodb update-time-to-live`. */
async function enableTtl(raw: DynamoDBClient, table: string): Promise<void> {
  await raw.send(new UpdateTimeToLiveCommand({ TableName: table, TimeToLiveSpecification: { Enabled: true, AttributeName: 'expires' } }));
}

async function items(c: Clients, table: string): Promise<Record<string, unknown>[]> {
  return (await c.ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
}

/** What a refusal must be: a ConfigError whose message names the table and says what is wrong. */
async function refused(p: Promise<unknown>, table: string, wrong: RegExp): Promise<void> {
  const err = await p.then(
    () => assert.fail(`accepted a wrong ${table}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConfigError, `a ConfigError, got ${String((err as Error)?.stack ?? err)}`);
  assert.ok(err.message.includes(table), `names ${table}: ${err.message}`);
  assert.match(err.message, wrong);
}

test('a TTL on the lock table: createTables refuses it, and withLease refuses to claim (no token, nothing written)', T, async () => {
  const c = await clients();
  const prefix = fresh();
  const { locks } = await createTables(c, prefix);
  await enableTtl(c.raw, locks);
  await refused(createTables(c, prefix), locks, /TTL/);
  const deps = { locks: new DynamoLockStore(c.ddb, locks), clock: systemClock, events: new Events('A', systemClock) };
  let tokens = 0;
  await refused(
    withLease(deps, 'night#2026-09-28', 'A', lease, async () => void tokens++),
    locks,
    /TTL[\s\S]*epoch/,
  );
  assert.equal(tokens, 0, 'no token handed out');
  assert.deepEqual(await items(c, locks), [], 'no lock item written');
});

test('a TTL on the job table: the raise is refused before the fence is written', T, async () => {
  const c = await clients();
  const prefix = fresh();
  const { jobs } = await createTables(c, prefix);
  await enableTtl(c.raw, jobs);
  await refused(createTables(c, prefix), jobs, /TTL/);
  await refused(fence.raise({ jobs: new DynamoJobStore(c.ddb, jobs), clock: systemClock }, 'night#2026-09-28', 1, 'A', 2), jobs, /TTL/);
  assert.deepEqual(await items(c, jobs), [], 'no job row or chunk fence written');
});

/** The library's table under `name`, made wrong by `change`. */
function wrongTable(name: string, change: Partial<CreateTableCommandInput>): CreateTableCommandInput {
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    ...change,
  };
}

const claimedIndex = (projection: 'ALL' | 'KEYS_ONLY', sortKey = 'claimed_since') => ({
  AttributeDefinitions: [
    { AttributeName: 'pk', AttributeType: 'S' as const },
    { AttributeName: 'claim_shard', AttributeType: 'S' as const },
    { AttributeName: sortKey, AttributeType: 'S' as const },
  ],
  GlobalSecondaryIndexes: [
    {
      IndexName: 'claimed',
      KeySchema: [
        { AttributeName: 'claim_shard', KeyType: 'HASH' as const },
        { AttributeName: sortKey, KeyType: 'RANGE' as const },
      ],
      Projection: { ProjectionType: projection },
    },
  ],
});

test('a lock table with the wrong key: the claim is refused, naming the table and its key', T, async () => {
  const c = await clients();
  for (const change of [
    { AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'N' as const }] },
    { KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' as const }], AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' as const }] },
    {
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' as const },
        { AttributeName: 'sk', KeyType: 'RANGE' as const },
      ],
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' as const },
        { AttributeName: 'sk', AttributeType: 'S' as const },
      ],
    },
  ]) {
    const prefix = fresh();
    const { locks } = tableNames(prefix);
    await c.raw.send(new CreateTableCommand(wrongTable(locks, change)));
    const deps = { locks: new DynamoLockStore(c.ddb, locks), clock: systemClock, events: new Events('A', systemClock) };
    await refused(claim(deps, 'night#2026-09-28', 'A', lease), locks, /partition key pk \(S\)/);
    await refused(createTables(c, prefix), locks, /partition key pk \(S\)/);
  }
});

test('a job table without the sparse index, or with it wrong: the raise is refused, naming the table and the index', T, async () => {
  const c = await clients();
  for (const change of [{}, claimedIndex('KEYS_ONLY'), claimedIndex('ALL', 'since')]) {
    const prefix = fresh();
    const { jobs } = tableNames(prefix);
    await c.raw.send(new CreateTableCommand(wrongTable(jobs, change)));
    await refused(fence.raise({ jobs: new DynamoJobStore(c.ddb, jobs), clock: systemClock }, 'night#2026-09-28', 1, 'A', 2), jobs, /claimed/);
    assert.deepEqual(await items(c, jobs), [], 'nothing written');
  }
});

test('once per process per table: many claims and raises describe each table once', T, async () => {
  const ep = await endpoints();
  const seen: AwsCall[] = [];
  const proxy = await startDynamoDbProxy({ target: ep.dynamodb, onCall: (call) => void seen.push(call) });
  const c = localClients({ dynamodb: proxy.endpoint });
  try {
    const { locks, jobs } = await createTables(c, fresh());
    seen.length = 0;
    const deps = { locks: new DynamoLockStore(c.ddb, locks), clock: systemClock, events: new Events('A', systemClock) };
    for (let n = 0; n < 3; n++) {
      const l = await claim(deps, `night#2026-09-2${n}`, 'A', lease);
      await fence.raise({ jobs: new DynamoJobStore(c.ddb, jobs), clock: systemClock }, `night#2026-09-2${n}`, l.token, 'A', 1);
      await l.release();
    }
    const described = seen.filter((s) => s.operation.startsWith('Describe')).map((s) => `${s.operation} ${s.table}`);
    assert.deepEqual(
      described.sort(),
      [`DescribeTable ${jobs}`, `DescribeTable ${locks}`, `DescribeTimeToLive ${jobs}`, `DescribeTimeToLive ${locks}`],
      'each table described once, however many claims and raises',
    );
  } finally {
    c.destroy();
    await proxy.stop();
  }
});

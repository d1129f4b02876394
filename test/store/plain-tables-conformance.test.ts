/**
 * The plain tables' conformance suite: `fencepost/testing`'s plain reads and writes of a user's own tables
 * (lib/testing/tables.ts, on the memory job store) against DynamoDB's own PutItem, GetItem, UpdateItem and DeleteItem
 * (a DocumentClient on DynamoDB Local behind the conflict proxy), the SAME tests on both, so the kit a user tests with
 * cannot drift from the table it writes in production. The pages each behaviour is pinned to:
 *  - PutItem replaces an item with the same key, whole; a missing key attribute is a ValidationException:
 *    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html
 *  - UpdateItem edits an item's attributes, or creates the item if it does not exist:
 *    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
 *  - DeleteItem of an absent item succeeds (no condition): https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_DeleteItem.html
 *  - GetItem of an absent key returns no item: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html
 *  - A single-item write to an item a transaction in flight holds is refused with TransactionConflictException:
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling
 *    (DynamoDB Local serialises transactions: the conflict proxy emulates it, as in the job store's suite).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { localClients } from '../../lib/core/aws/clients';
import { DynamoJobStore } from '../../lib/core/aws/job-store';
import { VirtualClock } from '../../lib/core/clock';
import type { JobStore } from '../../lib/core/store/jobs';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { plainTables, type PlainTables } from '../../lib/testing/tables';
import { inFlightThrough } from '../support/in-flight';
import { namespace } from '../support/stack';

const T = { timeout: 60_000 };
/** Wide enough that "still in flight" holds on two loaded cores (as the job store's suite). */
const WINDOW_MS = 500;

interface World {
  readonly tables: PlainTables;
  /** A table keyed by `pk`. */
  readonly table: string;
  /** The job store over the same tables, for a fenced batch in flight. */
  readonly jobs: JobStore;
  /** The job table (where the fence item lives). */
  readonly jobTable: string;
  /** Start `act`, and resolve once its transaction holds its items, with its answer to come. */
  inFlight<R>(act: () => Promise<R>): Promise<{ answer(): Promise<R> }>;
  close(): Promise<void>;
}

const worlds: Record<string, () => Promise<World>> = {
  memory: async () => {
    const clock = new VirtualClock();
    const store = new MemoryJobStore({ clock, jobs: 'jobs', transactionMs: 20 });
    return {
      tables: plainTables(store),
      table: 'records',
      jobs: store,
      jobTable: 'jobs',
      inFlight: async (act) => {
        const running = act();
        running.catch(() => {}); // awaited by answer()
        return { answer: async () => (await clock.advance(20), running) };
      },
      close: async () => {},
    };
  },
  'dynamodb-local behind the conflict proxy': async () => {
    const ns = await namespace();
    const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, conflictWindowMs: WINDOW_MS });
    const { ddb, destroy } = localClients({ dynamodb: proxy.endpoint });
    // What a user's own code sends: the DocumentClient's commands, one call each, no condition.
    const tables: PlainTables = {
      put: async (TableName, Item) => void (await ddb.send(new PutCommand({ TableName, Item }))),
      get: async (TableName, Key) => (await ddb.send(new GetCommand({ TableName, Key, ConsistentRead: true }))).Item,
      update: async (TableName, Key, set) => {
        const names = Object.keys(set);
        await ddb.send(
          new UpdateCommand({
            TableName,
            Key,
            UpdateExpression: `SET ${names.map((_, i) => `#a${i} = :v${i}`).join(', ')}`,
            ExpressionAttributeNames: Object.fromEntries(names.map((n, i) => [`#a${i}`, n])),
            ExpressionAttributeValues: Object.fromEntries(names.map((n, i) => [`:v${i}`, set[n]])),
          }),
        );
      },
      delete: async (TableName, Key) => void (await ddb.send(new DeleteCommand({ TableName, Key }))),
    };
    return {
      tables,
      table: ns.tables.invoices,
      jobs: new DynamoJobStore(ddb, ns.tables.jobs),
      jobTable: ns.tables.jobs,
      inFlight: (act) => inFlightThrough(proxy, () => act()),
      close: async () => {
        destroy();
        await proxy.stop();
      },
    };
  },
};

const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

for (const [name, make] of Object.entries(worlds)) {
  describe(`plain tables conformance: ${name}`, () => {
    let w: World;
    before(async () => void (w = await make()));
    after(() => w.close());

    test('a put replaces the item with its key, whole; a get of an absent key finds nothing', T, async () => {
      const pk = unique('status');
      assert.equal(await w.tables.get(w.table, { pk }), undefined);
      await w.tables.put(w.table, { pk, state: 'recorded', by: 'worker-1' });
      await w.tables.put(w.table, { pk, state: 'sent' });
      assert.deepEqual(await w.tables.get(w.table, { pk }), { pk, state: 'sent' });
    });

    test('an update edits the attributes it sets and keeps the others, or creates the item', T, async () => {
      const [a, b] = [unique('status'), unique('status')];
      await w.tables.put(w.table, { pk: a, state: 'sent', by: 'worker-1' });
      await w.tables.update(w.table, { pk: a }, { by: 'worker-2' });
      await w.tables.update(w.table, { pk: b }, { state: 'new' });
      assert.deepEqual(await w.tables.get(w.table, { pk: a }), { pk: a, state: 'sent', by: 'worker-2' });
      assert.deepEqual(await w.tables.get(w.table, { pk: b }), { pk: b, state: 'new' });
    });

    test('a delete removes the item; a delete of an absent item succeeds', T, async () => {
      const pk = unique('status');
      await w.tables.put(w.table, { pk, state: 'sent' });
      await w.tables.delete(w.table, { pk });
      await w.tables.delete(w.table, { pk: unique('absent') });
      assert.equal(await w.tables.get(w.table, { pk }), undefined);
    });

    test('a put without the key attribute is refused with ValidationException', T, async () => {
      const note = unique('note');
      await assert.rejects(w.tables.put(w.table, { id: note, note }), { name: 'ValidationException' });
    });

    test('a plain write to an item a fenced batch in flight holds is refused with TransactionConflictException', T, async () => {
      const fence = { table: w.jobTable, key: { pk: unique('fence') } };
      const pk = unique('digest');
      await w.jobs.raiseFence(fence, 1);
      const batch = await w.inFlight(() =>
        w.jobs.recordBatch(fence, 1, [{ table: w.table, keyAttribute: 'pk', document: { pk, by: 'fenced' } }], unique('t')),
      );
      await assert.rejects(w.tables.put(w.table, { pk, by: 'plain' }), { name: 'TransactionConflictException' });
      assert.deepEqual(await batch.answer(), { kind: 'recorded' });
      assert.deepEqual(await w.tables.get(w.table, { pk }), { pk, by: 'fenced' });
    });
  });
}

/**
 * `fencepost/testing`'s plain tables (lib/testing/tables.ts): a user's own PutItem, GetItem, UpdateItem and DeleteItem
 * on the memory job store, with DynamoDB's rules for them (a put replaces the whole item, an update creates or edits,
 * a delete of an absent item succeeds, a write to an item a transaction holds is refused), and the items the fenced
 * batch and `dump` see.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { memoryStores } from '../../lib/testing/memory-stores';
import { plainTables } from '../../lib/testing/tables';

test('a put replaces the whole item; an update edits or creates; a delete of an absent item succeeds', async () => {
  const { tables, jobs } = memoryStores(new VirtualClock());
  await tables.put('status', { pk: 'w49', state: 'recorded', by: 'worker-1' });
  await tables.put('status', { pk: 'w49', state: 'sent' });
  assert.deepEqual(await tables.get('status', { pk: 'w49' }), { pk: 'w49', state: 'sent' }, 'PutItem replaces the item, whole');
  await tables.update('status', { pk: 'w49' }, { by: 'worker-2' });
  await tables.update('status', { pk: 'w50' }, { state: 'new' });
  assert.deepEqual(jobs.dump('status'), [
    { pk: 'w49', state: 'sent', by: 'worker-2' },
    { pk: 'w50', state: 'new' },
  ]);
  await tables.delete('status', { pk: 'w50' });
  await tables.delete('status', { pk: 'absent' });
  assert.deepEqual(await tables.get('status', { pk: 'w50' }), undefined);
});

test("a put takes its table's key attribute, and is refused without it", async () => {
  const { tables } = memoryStores(new VirtualClock(), { keys: { orders: 'id' } });
  await tables.put('orders', { id: 'o1', qty: 3 });
  assert.deepEqual(await tables.get('orders', { id: 'o1' }), { id: 'o1', qty: 3 });
  await assert.rejects(tables.put('orders', { pk: 'o2' }), { name: 'ValidationException' });
});

test('a plain write to an item a transaction in flight holds is refused with TransactionConflictException', async () => {
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs', transactionMs: 50 });
  const tables = plainTables(store);
  const fence = { table: 'jobs', key: { pk: 'f' } };
  await store.raiseFence(fence, 1);
  const batch = store.recordBatch(fence, 1, [{ table: 'digests', keyAttribute: 'pk', document: { pk: 'a' } }], 't1');
  await assert.rejects(tables.put('digests', { pk: 'a', by: 'plain' }), { name: 'TransactionConflictException' });
  await assert.rejects(tables.delete('digests', { pk: 'a' }), { name: 'TransactionConflictException' });
  await clock.advance(50);
  assert.deepEqual(await batch, { kind: 'recorded' });
  await tables.put('digests', { pk: 'a', by: 'plain' });
  assert.deepEqual(await tables.get('digests', { pk: 'a' }), { pk: 'a', by: 'plain' });
});

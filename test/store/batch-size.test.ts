/**
 * `writeFenced` cuts by size as well as by count (issue 25, item 11), on DynamoDB Local, which enforces both of
 * DynamoDB's limits:
 *   - "The aggregate size of the items in the transaction cannot exceed 4 MB"
 *     (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html);
 *   - an item is at most 400 KB (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html#limits-items),
 *     its size the lengths of its attribute names and values
 *     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
 * Cut by count alone, 99 items of ~60 KB are one transaction of ~6 MB, refused every time: a permanent error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { fenceOn, heldFence } from '../../lib/core/aws/fence';
import { DynamoFenceStore } from '../../lib/core/aws/job-store';
import { writeFenced } from '../../lib/core/batch';
import { MAX_PUTS_PER_TRANSACTION } from '../../lib/core/config';
import { ConfigError } from '../../lib/core/errors';
import type { FenceStore } from '../../lib/core/store/jobs';
import { namespace, type Namespace } from '../support/stack';

const T = { timeout: 120_000 };
const KB = 1024;
const MB = 1024 * KB;
const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

/** A fence on a fresh job-table item whose store notes the puts of every transaction it is sent. */
function notedFence(ns: Namespace, sent: number[]) {
  const store = new DynamoFenceStore(ns.clients.ddb);
  const noting: FenceStore = {
    raiseFence: (...a) => store.raiseFence(...a),
    readFence: (...a) => store.readFence(...a),
    readEffect: (...a) => store.readEffect(...a),
    markEffectDone: (...a) => store.markEffectDone(...a),
    recordBatch: (fence, token, puts, requestToken) => {
      sent.push(puts.length);
      return store.recordBatch(fence, token, puts, requestToken);
    },
  };
  return fenceOn({ fences: noting, table: ns.tables.jobs, key: { pk: unique('fence') }, resource: 'report' });
}

/** Every item of a table, by key (a consistent scan: the store's own view, not the writer's report). */
async function stored(ns: Namespace, table: string): Promise<Map<string, Record<string, unknown>>> {
  const items = new Map<string, Record<string, unknown>>();
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await ns.clients.ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey }));
    for (const item of page.Items ?? []) items.set(String(item.pk), item);
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey !== undefined);
  return items;
}

test('99 items of 60 KB (about 6 MB, over the 4 MB of a transaction): cut by size, every item lands as given', T, async () => {
  const ns = await namespace();
  const sent: number[] = [];
  const fence = notedFence(ns, sent);
  await fence.raise(1);
  const prefix = unique('big');
  const items = Array.from({ length: MAX_PUTS_PER_TRANSACTION }, (_, i) => ({ pk: `${prefix}#${i}`, body: randomBytes(30 * KB).toString('hex') }));
  const bytes = items.reduce((n, i) => n + Buffer.byteLength(i.body), 0);
  assert.ok(bytes > 4 * MB, `the items hold ${bytes} bytes of values alone: more than one transaction may take`);

  const r = await writeFenced(heldFence(fence, 1), items, { table: ns.tables.invoices });
  assert.equal(r.recorded.length, items.length);
  assert.ok(sent.length >= Math.ceil(bytes / (4 * MB)), `at least ${Math.ceil(bytes / (4 * MB))} transactions, sent ${sent.join(', ')} puts`);
  const table = await stored(ns, ns.tables.invoices);
  assert.deepEqual(
    items.filter((i) => table.get(i.pk)?.body !== i.body).map((i) => i.pk),
    [],
    'every item stored with its content',
  );
});

test('an item over 400 KB among small ones: a ConfigError naming its key, and nothing is sent or written', T, async () => {
  const ns = await namespace();
  const sent: number[] = [];
  const fence = notedFence(ns, sent);
  await fence.raise(1);
  const prefix = unique('huge');
  const small = Array.from({ length: 5 }, (_, i) => ({ pk: `${prefix}#${i}`, body: 'x' }));
  const huge = { pk: `${prefix}#huge`, body: 'y'.repeat(400 * KB) }; // the value alone is 400 KB; with its names, over
  const err = await writeFenced(heldFence(fence, 1), [...small, huge], { table: ns.tables.invoices }).then(
    () => assert.fail('an item over 400 KB was accepted'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConfigError, `a ConfigError, got ${String(err)}`);
  assert.match(err.message, new RegExp(`${huge.pk}[\\s\\S]*400 KB`), 'it names the item by its key, and the limit');
  assert.deepEqual(sent, [], 'nothing sent');
  assert.deepEqual([...(await stored(ns, ns.tables.invoices)).keys()], [], 'nothing written');
});

test('the size is counted as DynamoDB counts it: an item of exactly 400 KB (names and values) lands, one byte more is refused', T, async () => {
  const ns = await namespace();
  const fence = notedFence(ns, []);
  await fence.raise(1);
  const pk = unique('edge');
  // 'pk' + its value + 'body' + its value, in UTF-8 bytes: 400 KB exactly, with a 3-byte character in the body.
  const body = '€' + 'z'.repeat(400 * KB - Buffer.byteLength('pk' + pk + 'body') - Buffer.byteLength('€'));
  const r = await writeFenced(heldFence(fence, 1), [{ pk, body }], { table: ns.tables.invoices });
  assert.equal(r.recorded.length, 1);
  assert.equal((await stored(ns, ns.tables.invoices)).get(pk)?.body, body, 'DynamoDB Local took it: it is within its 400 KB');
  const more = { pk: `${pk}x`, body }; // its key one byte longer
  await assert.rejects(writeFenced(heldFence(fence, 1), [more], { table: ns.tables.invoices }), ConfigError);
  await assert.rejects(
    ns.clients.ddb.send(new PutCommand({ TableName: ns.tables.invoices, Item: more })),
    /Item size has exceeded the maximum allowed size/,
    'DynamoDB Local refuses it too: the limit is where the writer puts it',
  );
});

/**
 * The epoch ledger's store, one suite for both implementations: the DynamoDB store (lib/core/aws/ledger-store.ts) on
 * DynamoDB Local behind the conflict proxy, and the in-memory store (lib/testing/ledger-store.ts). Each test pins one
 * behaviour of DynamoDB the epoch fence relies on, so the in-memory store cannot drift from it. Sources:
 *   [GET]  GetItem, ConsistentRead: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html
 *   [UPD]  UpdateItem, ConditionExpression, ReturnValues ALL_NEW, ReturnValuesOnConditionCheckFailure ALL_OLD:
 *          https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
 *   [TX]   TransactWriteItems ("all or nothing"; TransactionCanceledException with CancellationReasons in the order of
 *          the actions, None where an action was fine; ClientRequestToken: "valid for 10 minutes after the first
 *          request that uses it is completed", "the same client token but a change in other parameters within the
 *          10-minute idempotency window" is IdempotentParameterMismatch):
 *          https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
 *   [CR]   CancellationReason (Item: the item as it was, with ALL_OLD):
 *          https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CancellationReason.html
 *   [SCAN] Scan, ConsistentRead: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html
 * DynamoDB Local keeps ClientRequestTokens itself (test/store/recorded-once.test.ts checks its premise); the conflict proxy
 * does not touch them (test/store/dynamodb-proxy.test.ts). The token's 10 minutes are pinned on the in-memory store only:
 * DynamoDB Local cannot be moved on by 10 minutes.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { VirtualClock } from '../../lib/core/clock';
import { entryKey } from '../../lib/election/epoch-fence';
import { MemoryLedgerStore } from '../../lib/testing/ledger-store';
import type { LedgerEntry, LedgerStore } from '../../lib/core/store/ledger';
import { namespace } from '../support/stack';

const KEY = 'ledger/pacer';

function entry(epoch: number, version: number, writer = 'A', extra: Record<string, unknown> = {}): LedgerEntry {
  return { ...extra, pk: entryKey(KEY, version), epoch, version, writer, written_at: new Date(Date.UTC(2026, 8, 28, 0, 0, version)).toISOString() };
}

interface Fixture {
  readonly name: string;
  fresh(): Promise<LedgerStore>;
}

const fixtures: Fixture[] = [
  {
    name: 'DynamoDB store on DynamoDB Local behind the conflict proxy',
    fresh: async () => {
      const ns = await namespace();
      return new DynamoLedgerStore(ns.clients.ddb, ns.tables.jobs);
    },
  },
  { name: 'in-memory store', fresh: async () => new MemoryLedgerStore(new VirtualClock()) },
];

for (const f of fixtures) {
  describe(f.name, () => {
    test('a new ledger reads as epoch 0, version 0, with no entries [GET] [SCAN]', async () => {
      const store = await f.fresh();
      assert.deepEqual(await store.head(KEY), { epoch: 0, version: 0 });
      assert.deepEqual(await store.entries(KEY), []);
    });

    test('raise: up or to the same epoch lands; below the fence it is refused with the fence item as it was (ALL_OLD) [UPD]', async () => {
      const store = await f.fresh();
      assert.deepEqual(await store.raise(KEY, 3), { ok: true, head: { epoch: 3, version: 0 } });
      assert.deepEqual(await store.raise(KEY, 3), { ok: true, head: { epoch: 3, version: 0 } }, 'the same epoch changes nothing');
      assert.deepEqual(await store.append(KEY, entry(3, 1), 't-1'), { ok: true });
      assert.deepEqual(await store.raise(KEY, 2), { ok: false, current: { epoch: 3, version: 1 } });
      assert.deepEqual(await store.head(KEY), { epoch: 3, version: 1 }, 'nothing written by the refused raise');
      assert.deepEqual(await store.raise(KEY, 5), { ok: true, head: { epoch: 5, version: 1 } }, 'the version is kept');
    });

    test('append writes the entry and moves the head in one transaction; entries come back in version order [TX] [SCAN]', async () => {
      const store = await f.fresh();
      for (let v = 1; v <= 3; v++)
        assert.deepEqual(await store.append(KEY, entry(v === 1 ? 1 : 2, v, 'A', { note: `n${v}` }), `t-${v}`), { ok: true });
      assert.deepEqual(await store.head(KEY), { epoch: 2, version: 3 });
      assert.deepEqual(await store.entries(KEY), [
        entry(1, 1, 'A', { note: 'n1' }),
        entry(2, 2, 'A', { note: 'n2' }),
        entry(2, 3, 'A', { note: 'n3' }),
      ]);
      assert.deepEqual(await store.entries('ledger/pace'), [], "a ledger whose key is a prefix of another's sees none of its entries");
    });

    test('append below the fence: cancelled, ConditionalCheckFailed on the fence item, None on the entry, nothing written [TX] [CR]', async () => {
      const store = await f.fresh();
      await store.append(KEY, entry(4, 1), 't-1');
      assert.deepEqual(await store.append(KEY, entry(3, 2, 'old'), 't-2'), {
        ok: false,
        reasons: ['ConditionalCheckFailed', 'None'],
        current: { epoch: 4, version: 1 },
      });
      assert.deepEqual(await store.head(KEY), { epoch: 4, version: 1 });
      assert.deepEqual(await store.entries(KEY), [entry(4, 1)], 'the entry, whose own condition held, was not written either');
    });

    test('append that skips a version or repeats one: cancelled with the head as it was; a repeat fails on both actions [TX] [CR]', async () => {
      const store = await f.fresh();
      await store.append(KEY, entry(1, 1), 't-1');
      assert.deepEqual(await store.append(KEY, entry(1, 3), 't-3'), {
        ok: false,
        reasons: ['ConditionalCheckFailed', 'None'],
        current: { epoch: 1, version: 1 },
      });
      assert.deepEqual(await store.append(KEY, entry(1, 1, 'B'), 't-1b'), {
        ok: false,
        reasons: ['ConditionalCheckFailed', 'ConditionalCheckFailed'],
        current: { epoch: 1, version: 1 },
      });
      assert.deepEqual(await store.entries(KEY), [entry(1, 1)]);
    });

    test('the first append of a ledger that was only raised: the fence item exists, the version does not yet [TX]', async () => {
      const store = await f.fresh();
      await store.raise(KEY, 2);
      assert.deepEqual(await store.append(KEY, entry(2, 2), 't-2'), {
        ok: false,
        reasons: ['ConditionalCheckFailed', 'None'],
        current: { epoch: 2, version: 0 },
      });
      assert.deepEqual(await store.append(KEY, entry(2, 1), 't-1'), { ok: true });
    });

    test('the same append sent again with its token answers ok and writes nothing; the token with another request is refused [TX]', async () => {
      const store = await f.fresh();
      assert.deepEqual(await store.append(KEY, entry(1, 1), 'lost-answer'), { ok: true });
      assert.deepEqual(await store.append(KEY, entry(1, 1), 'lost-answer'), { ok: true }, 'a retry after a lost answer succeeds');
      assert.deepEqual(await store.head(KEY), { epoch: 1, version: 1 });
      assert.deepEqual(await store.entries(KEY), [entry(1, 1)], 'written once');
      await assert.rejects(store.append(KEY, entry(1, 2), 'lost-answer'), (err: Error) => /IdempotentParameterMismatch/.test(err.name));
      assert.deepEqual(await store.head(KEY), { epoch: 1, version: 1 }, 'nothing written by the refused request');
    });
  });
}

test('in-memory store: a token is kept for 10 minutes after its request completed, then the same request is a new one [TX]', async () => {
  const clock = new VirtualClock();
  const store = new MemoryLedgerStore(clock);
  assert.deepEqual(await store.append(KEY, entry(1, 1), 'tok'), { ok: true });
  await clock.advance(10 * 60_000 - 1);
  assert.deepEqual(await store.append(KEY, entry(1, 1), 'tok'), { ok: true }, 'still inside the 10 minutes');
  await clock.advance(1);
  assert.deepEqual(
    await store.append(KEY, entry(1, 1), 'tok'),
    { ok: false, reasons: ['ConditionalCheckFailed', 'ConditionalCheckFailed'], current: { epoch: 1, version: 1 } },
    'after 10 minutes the conditions are evaluated again',
  );
  await store.append(KEY, entry(1, 2), 'tok'); // and the token may name another request
  assert.deepEqual(await store.head(KEY), { epoch: 1, version: 2 });
});

/**
 * The batched writer a user wants (issue 20, item 4): `writeFenced` takes any number of plain document items, cuts them
 * into transactions of 1 check + at most MAX_PUTS_PER_TRANSACTION puts itself, and reports what was already recorded;
 * a write under a fence nobody raised says exactly that (FenceNotRaisedError, not FencedOutError); bad input is refused
 * before anything is sent. The SAME tests run on the in-memory store (plain values kept as they are) and on DynamoDB
 * Local (the DynamoDB store marshals them), as the store conformance suites do.
 */
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { fenceOn, heldFence, type Fence } from '../../lib/core/aws/fence';
import { DynamoFenceStore } from '../../lib/core/aws/job-store';
import { writeBatch, writeFenced } from '../../lib/core/batch';
import { VirtualClock } from '../../lib/core/clock';
import { MAX_PUTS_PER_TRANSACTION } from '../../lib/core/config';
import { ConfigError, FenceNotRaisedError, FencedOutError } from '../../lib/core/errors';
import { MemoryJobStore } from '../../lib/testing/job-store';
import type { FenceStore } from '../../lib/core/store/jobs';
import { namespace } from '../support/stack';

const T = { timeout: 120_000 };
const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

/** Every transaction a store was sent: its puts and its ClientRequestToken. */
interface Sent {
  readonly puts: number;
  readonly requestToken: string;
}

/** A store that notes each transaction before passing it on. */
function noting(store: FenceStore, sent: Sent[]): FenceStore {
  return {
    raiseFence: (...a) => store.raiseFence(...a),
    readFence: (...a) => store.readFence(...a),
    readEffect: (...a) => store.readEffect(...a),
    markEffectDone: (...a) => store.markEffectDone(...a),
    recordBatch: (fence, token, puts, requestToken) => {
      sent.push({ puts: puts.length, requestToken });
      return store.recordBatch(fence, token, puts, requestToken);
    },
  };
}

/** What a process killed after `applied` transactions leaves: the last one applied but its answer never heard, no more sent. */
function dyingAfter(store: FenceStore, applied: number): FenceStore {
  let sent = 0;
  const died = () => new Error('the process died');
  return {
    ...noting(store, []),
    recordBatch: async (fence, token, puts, requestToken) => {
      if (++sent > applied) throw died();
      const out = await store.recordBatch(fence, token, puts, requestToken);
      if (sent === applied) throw died(); // applied by the store, the answer lost with the process
      return out;
    },
  };
}

interface World {
  /** A fence on a new item of the fence table, its store noting what it is sent (or the store given). */
  fence(sent: Sent[], on?: (store: FenceStore) => FenceStore): Fence;
  /** A table for the records (partition key `pk`). */
  readonly records: string;
  /** The item under `pk` in `table`, as read back (undefined: absent). */
  read(table: string, pk: string): Promise<Record<string, unknown> | undefined>;
}

const worlds: Record<string, () => Promise<World>> = {
  memory: async () => {
    const store = new MemoryJobStore({ clock: new VirtualClock(), jobs: 'jobs' });
    return {
      records: 'records',
      fence: (sent, on) =>
        fenceOn({ fences: on ? on(store) : noting(store, sent), table: 'jobs', key: { pk: unique('fence') }, clock: new VirtualClock() }),
      read: (table, pk) => store.readFence({ table, key: { pk } }),
    };
  },
  'dynamodb-local': async () => {
    const ns = await namespace();
    const store = new DynamoFenceStore(ns.clients.ddb);
    return {
      records: ns.tables.invoices,
      // No clock given: the system clock is the default.
      fence: (sent, on) =>
        fenceOn({ fences: on ? on(store) : noting(store, sent), table: ns.tables.jobs, key: { pk: unique('fence') }, resource: 'report' }),
      read: (table, pk) => store.readFence({ table, key: { pk } }),
    };
  },
};

/** `n` plain documents, keys from `from`, of several attribute types. */
const docs = (prefix: string, n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({
    pk: `${prefix}#${from + i}`,
    amount: 100 + from + i,
    paid: (from + i) % 2 === 0,
    lines: [{ sku: 'a', qty: 1 }],
    note: null,
  }));

for (const [name, make] of Object.entries(worlds)) {
  describe(`the batched writer: ${name}`, () => {
    let w: World;
    before(async () => {
      w = await make();
    });

    test('250 plain items: cut into transactions of at most 99 puts, each its own token; written once, then all already recorded', T, async () => {
      const sent: Sent[] = [];
      const fence = w.fence(sent);
      await fence.raise(3);
      const items = docs(unique('line'), 250);
      const r = await writeFenced(heldFence(fence, 3), items, { table: w.records });
      const transactions = Math.ceil(items.length / MAX_PUTS_PER_TRANSACTION);
      assert.equal(r.recorded.length, items.length, 'every item written by this call');
      assert.equal(r.alreadyRecorded.length, 0);
      assert.equal(r.transactions, transactions);
      assert.deepEqual(
        sent.map((s) => s.puts),
        Array.from({ length: transactions }, (_, t) => Math.min(MAX_PUTS_PER_TRANSACTION, items.length - t * MAX_PUTS_PER_TRANSACTION)),
        'in order, full transactions first',
      );
      assert.equal(new Set(sent.map((s) => s.requestToken)).size, transactions, 'each transaction its own ClientRequestToken');
      for (const i of [0, MAX_PUTS_PER_TRANSACTION, items.length - 1])
        assert.deepEqual(await w.read(w.records, items[i].pk), items[i], 'stored as the plain document given');

      // A retried chunk (a new call, the same items): nothing written again, every item reported already recorded.
      const again = await writeFenced(heldFence(fence, 3), items, { table: w.records });
      assert.equal(again.recorded.length, 0);
      assert.deepEqual(again.alreadyRecorded, items, 'the very items passed, in order');
    });

    test('some recorded before: the rest written, those reported; a smaller batch size cuts smaller transactions', T, async () => {
      const sent: Sent[] = [];
      const fence = w.fence(sent);
      await fence.raise(5);
      const prefix = unique('line');
      const earlier = docs(prefix, 7, 20); // an earlier holder's items 20..26
      await writeFenced(heldFence(fence, 5), earlier, { table: w.records });
      sent.length = 0;
      const items = docs(prefix, 45);
      const putsPerTransaction = 10;
      const r = await writeFenced(heldFence(fence, 5), items, { table: w.records, putsPerTransaction });
      assert.deepEqual(
        r.alreadyRecorded.map((i) => i.pk),
        earlier.map((i) => i.pk),
      );
      assert.equal(r.recorded.length, items.length - earlier.length);
      assert.ok(
        sent.every((s) => s.puts <= putsPerTransaction),
        `at most ${putsPerTransaction} puts a transaction: ${sent.map((s) => s.puts).join(', ')}`,
      );
      // Each cut with a recorded item is sent once more without it (a new request, a new token).
      const cutsWithEarlier = new Set(earlier.map((_, k) => Math.floor((20 + k) / putsPerTransaction))).size;
      assert.equal(r.transactions, Math.ceil(items.length / putsPerTransaction) + cutsWithEarlier);
    });

    test("the caller's check runs before each transaction: its throw stops the write there, the earlier ones recorded", T, async () => {
      const sent: Sent[] = [];
      const fence = w.fence(sent);
      await fence.raise(2);
      const items = docs(unique('line'), 25);
      const putsPerTransaction = 10;
      let checks = 0;
      const stopAt = 2; // the stop time passes before the third transaction
      const check = () => {
        if (++checks > stopAt) throw new Error('stop time passed');
      };
      await assert.rejects(writeFenced(heldFence(fence, 2), items, { table: w.records, putsPerTransaction, check }), /stop time passed/);
      assert.equal(sent.length, stopAt, 'no transaction after the check that threw');
      const stored = await Promise.all(items.map(async (i) => (await w.read(w.records, i.pk)) !== undefined));
      assert.deepEqual(
        stored,
        items.map((_, k) => k < stopAt * putsPerTransaction),
      );
    });

    // Crash answer (docs/DESIGN.md, the fenced write): killed between two of its transactions.
    test(
      'dies between two transactions, the last one applied but unheard: the redo records the rest, the first ones already recorded',
      T,
      async () => {
        const items = docs(unique('line'), 250);
        let alive: FenceStore | undefined;
        const dying = w.fence([], (store) => dyingAfter((alive = store), 2));
        await dying.raise(4);
        await assert.rejects(writeFenced(heldFence(dying, 4), items, { table: w.records }), /the process died/);
        const cut = 2 * MAX_PUTS_PER_TRANSACTION;
        const stored = await Promise.all(items.map(async (i) => (await w.read(w.records, i.pk)) !== undefined));
        assert.deepEqual(
          stored,
          items.map((_, k) => k < cut),
          'the first two transactions landed, nothing after',
        );
        // The next holder (token 5) raises the same fence and redoes the write.
        const redo = fenceOn({ ...dying.target, fences: alive! });
        await redo.raise(5);
        const r = await writeFenced(heldFence(redo, 5), items, { table: w.records });
        assert.deepEqual(r.alreadyRecorded, items.slice(0, cut), "each item recorded once: the dead holder's come back listed");
        assert.deepEqual(r.recorded, items.slice(cut));
      },
    );

    test('a write under a fence never raised says so (FenceNotRaisedError), and writes nothing; a newer holder is FencedOutError', T, async () => {
      const fence = w.fence([]);
      const items = docs(unique('line'), 3);
      await assert.rejects(writeFenced(heldFence(fence, 4), items, { table: w.records }), (err: unknown) => {
        assert.ok(err instanceof FenceNotRaisedError, `a FenceNotRaisedError, got ${String(err)}`);
        assert.ok(!(err instanceof FencedOutError), 'no other holder is blamed');
        assert.match(err.message, /has not been raised: raise it to 4 first \(lease\.fenced\(fence\)\.raise\(\)\) before writing/);
        return true;
      });
      // The same for the low-level batch.
      const wire = { table: w.records, item: { pk: { S: items[0].pk } } };
      await assert.rejects(writeBatch(heldFence(fence, 4), [wire]), FenceNotRaisedError);
      for (const i of items) assert.equal(await w.read(w.records, i.pk), undefined, 'nothing written');
      await fence.raise(6);
      await assert.rejects(
        writeFenced(heldFence(fence, 4), items, { table: w.records }),
        (err: unknown) => err instanceof FencedOutError && err.fence === 6,
      );
      for (const i of items) assert.equal(await w.read(w.records, i.pk), undefined, 'nothing written');
    });

    test('bad input is a ConfigError naming each problem, before anything is sent', T, async () => {
      const sent: Sent[] = [];
      const fence = w.fence(sent);
      await fence.raise(1);
      const good = docs(unique('line'), 120);
      const cases: [string, unknown[], object, RegExp][] = [
        ['an item that is not an object', [...good, null, 'x', [1]], {}, /item 120 .*not an object.*item 121.*item 122/s],
        ['an item without its key', [...good, { amount: 1 }], {}, /item 120 has no 'pk'/],
        ['a key of another type', [...good, { pk: true }], {}, /item 120: its key 'pk' must be a string or a number/],
        [
          'a value DynamoDB cannot take',
          [...good, { pk: 'u', n: undefined, x: Number.NaN }],
          {},
          /item 120: 'n' is undefined.*'x' is not a finite number/s,
        ],
        ['the same key twice', [...good, { pk: good[3].pk }], {}, /item 120 repeats the key of item 3/],
        [
          'a batch size of 0',
          good,
          { putsPerTransaction: 0 },
          new RegExp(`putsPerTransaction must be an integer from 1 to ${MAX_PUTS_PER_TRANSACTION} .*got 0$`),
        ],
        [
          'a batch size above the limit',
          good,
          { putsPerTransaction: MAX_PUTS_PER_TRANSACTION + 1 },
          new RegExp(`got ${MAX_PUTS_PER_TRANSACTION + 1}$`),
        ],
        ['a fractional batch size', good, { putsPerTransaction: 2.5 }, /putsPerTransaction must be an integer/],
        ['no table', good, { table: '' }, /table must be a table name/],
      ];
      for (const [what, items, options, message] of cases) {
        await assert.rejects(
          writeFenced(heldFence(fence, 1), items as never, { table: w.records, ...options }),
          (err: unknown) => err instanceof ConfigError && message.test(err.message),
          what,
        );
      }
      assert.equal(sent.length, 0, 'nothing sent');
      assert.equal(await w.read(w.records, good[0].pk), undefined, 'nothing written');
      const none = await writeFenced(heldFence(fence, 1), [], { table: w.records });
      assert.deepEqual([none.recorded.length, none.alreadyRecorded.length, none.transactions], [0, 0, 0], 'no items, nothing sent');
    });
  });
}

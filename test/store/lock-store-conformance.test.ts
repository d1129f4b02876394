/**
 * One conformance suite for the lock store (lib/core/store/lock.ts), run against the DynamoDB store on DynamoDB Local
 * behind the conflict proxy (lib/local/dynamodb-proxy.ts, which applies AWS's transaction-conflict rules that DynamoDB
 * Local itself does not: it serialises transactions instead of cancelling them) and against the in-memory store, so
 * the two cannot drift. Each test names the AWS page that documents the behaviour it pins.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { ConfigError } from '../../lib/core/errors';
import { DynamoLockStore, type DocumentClient } from '../../lib/core/aws/lock-store';
import { cancellationReasons, isTransient } from '../../lib/core/conditions';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { bumpEpochs } from '../../lib/core/restore';
import { EPOCH_FLOOR_KEY, type BumpView, type ClaimWrite, type LockStore } from '../../lib/core/store/lock';
import { localClients } from '../../lib/core/aws/clients';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { namespace } from '../support/stack';

/** A lock table of its own (the epoch floor is table-wide), with its raw items: a backup, and a restore into it. */
interface Table {
  readonly store: LockStore;
  /** The same table, its scan two items a page. */
  readonly pagedBy2: LockStore;
  items(): Promise<Record<string, unknown>[]>;
  load(items: readonly Record<string, unknown>[]): Promise<void>;
}

interface Subject {
  readonly name: string;
  /** A store for one test; keys are unique per test, so one table may serve them all. */
  store(): LockStore;
  /** A new, empty table. */
  table(): Promise<Table>;
  /** A new, empty table with TTL enabled on it (attribute `expires`), and its name. */
  expiringTable(): Promise<Table & { readonly name: string }>;
}

let aws: LockStore | undefined;
let proxied: DocumentClient | undefined;
const subjects: Subject[] = [
  {
    name: 'DynamoDB (Local, behind the conflict proxy)',
    store: () => aws!,
    table: async () => {
      const ns = await namespace();
      const TableName = ns.tables.locks;
      return {
        store: new DynamoLockStore(proxied!, TableName),
        pagedBy2: new DynamoLockStore(proxied!, TableName, 2),
        items: async () => (await ns.clients.ddb.send(new ScanCommand({ TableName, ConsistentRead: true }))).Items ?? [],
        load: async (items) => {
          for (const Item of items) await ns.clients.ddb.send(new PutCommand({ TableName, Item }));
        },
      };
    },
    expiringTable: async () => {
      const ns = await namespace();
      const TableName = ns.tables.locks;
      await ns.clients.raw.send(new UpdateTimeToLiveCommand({ TableName, TimeToLiveSpecification: { Enabled: true, AttributeName: 'expires' } }));
      return {
        name: TableName,
        store: new DynamoLockStore(proxied!, TableName),
        pagedBy2: new DynamoLockStore(proxied!, TableName, 2),
        items: async () => (await ns.clients.ddb.send(new ScanCommand({ TableName, ConsistentRead: true }))).Items ?? [],
        load: async () => assert.fail('not used'),
      };
    },
  },
  {
    name: 'in memory',
    store: () => new MemoryLockStore({ scanPageSize: 2 }),
    table: async () => {
      const store = new MemoryLockStore({ scanPageSize: 2 });
      const items = (store as unknown as { items: Map<string, Record<string, unknown> & { pk: string }> }).items;
      return {
        store,
        pagedBy2: store,
        items: async () => structuredClone([...items.values()]),
        load: async (loaded) => {
          for (const item of structuredClone(loaded)) items.set(item.pk as string, item as Record<string, unknown> & { pk: string });
        },
      };
    },
    expiringTable: async () => {
      const store = new MemoryLockStore({ table: 'expiring-locks', timeToLive: 'expires' });
      const items = (store as unknown as { items: Map<string, Record<string, unknown>> }).items;
      return { name: 'expiring-locks', store, pagedBy2: store, items: async () => [...items.values()], load: async () => assert.fail('not used') };
    },
  },
];

let stop: (() => Promise<void>) | undefined;
// Registered at the top: an `after` inside `before` would run as soon as `before` ends.
after(async () => stop?.());
before(async () => {
  const ns = await namespace();
  // A transaction's items stay in flight 300 ms after DynamoDB Local answered: two sent together overlap.
  const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, conflictWindowMs: 300 });
  const client = localClients({ dynamodb: proxy.endpoint, s3: ns.endpoints.s3 });
  stop = async () => {
    client.destroy();
    await proxy.stop();
  };
  aws = new DynamoLockStore(client.ddb, ns.tables.locks);
  proxied = client.ddb;
});

const key = (what: string) => `${what}#${randomUUID().slice(0, 8)}`;
const write = (holder: string, rvn = randomUUID()): ClaimWrite => ({ holder, leaseMs: 10_000, rvn, wallIso: new Date(0).toISOString() });

/** Every item of the table, page by page. */
async function scanAll(store: LockStore): Promise<Map<string, BumpView>> {
  const seen = new Map<string, BumpView>();
  let start: string | undefined;
  do {
    const page = await store.scanPage(start);
    for (const item of page.items) seen.set(item.key, item);
    start = page.next;
  } while (start !== undefined);
  return seen;
}

for (const subject of subjects) {
  describe(`lock store: ${subject.name}`, () => {
    // "TTL ... deletes expired items" (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html): a
    // deleted lock item would start its epoch again at 1, so a lock table with TTL enabled takes no claim and no join.
    test('a lock table with TTL enabled: the claim and the join are refused with a ConfigError naming it, nothing written', async () => {
      const t = await subject.expiringTable();
      const k = key('ttl');
      for (const attempt of [
        () => t.store.claim(k, { epoch: undefined }, write('A')),
        () => t.store.claim(k, { free: true }, write('A')),
        () => t.store.join({ roleKey: `role#${k}`, last: undefined, seq: 1, candidateKey: `cand#${k}`, candidate: write('A') }),
      ]) {
        const err = await attempt().then(
          () => assert.fail('a lock table with TTL took a write'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof ConfigError, String(err));
        assert.match(err.message, new RegExp(`${t.name} \\(the lock table\\) has TTL ENABLED on attribute 'expires'`));
      }
      assert.deepEqual(await t.items(), [], 'nothing written');
    });

    // Strongly consistent reads return the last updated value: a read answered after a write's answer sees it.
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html
    // The epoch +1 from nothing: SET with if_not_exists.
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html#Expressions.UpdateExpressions.SET.PreventingAttributeOverwrites
    test('a claim of a free key lands with epoch 1 and is read back at once; a key never written reads undefined', async () => {
      const store = subject.store();
      const k = key('free');
      assert.equal(await store.read(k), undefined);
      const w = write('A');
      const out = await store.claim(k, { free: true }, w);
      assert.ok(out.ok);
      assert.deepEqual(
        [out.item.holder, out.item.rvn, out.item.epoch, out.item.lease_ms],
        [w.holder, w.rvn, 1, w.leaseMs],
        'ALL_NEW: the item as written',
      );
      const read = await store.read(k);
      assert.deepEqual([read?.holder, read?.rvn, read?.epoch], [w.holder, w.rvn, 1]);
    });

    // A failed condition changes nothing, and ReturnValuesOnConditionCheckFailure ALL_OLD returns the item as it was.
    // https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
    test('a claim on a condition that fails changes nothing and returns the item that won', async () => {
      const store = subject.store();
      const k = key('held');
      const a = write('A');
      await store.claim(k, { free: true }, a);
      const before = await store.read(k);
      const lost = await store.claim(k, { free: true }, write('B'));
      assert.equal(lost.ok, false);
      assert.deepEqual(lost.ok ? undefined : [lost.current?.holder, lost.current?.rvn, lost.current?.epoch], [a.holder, a.rvn, 1]);
      assert.deepEqual(await store.read(k), before, 'nothing written');
      const stale = await store.claim(k, { rvn: 'not-the-rvn' }, write('B'));
      assert.equal(stale.ok ? 'landed' : stale.current?.rvn, a.rvn, 'a stale rvn fails with the current one');
      const missing = await store.claim(key('never'), { rvn: a.rvn }, write('B'));
      assert.deepEqual(missing, { ok: false, current: undefined }, 'no item: nothing to return');
    });

    // The claim rule (rvn unchanged) and the flip (epoch unchanged) are condition expressions on the item.
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
    test('claim on the rvn seen, and the flip on the epoch seen: each adds 1 to the epoch', async () => {
      const store = subject.store();
      const k = key('rvn');
      const a = write('A');
      await store.claim(k, { free: true }, a);
      const b = await store.claim(k, { rvn: a.rvn }, write('B'));
      assert.equal(b.ok && b.item.epoch, 2, 'rvn unchanged: claimed over a holder');
      const flip = await store.claim(k, { epoch: 2 }, write('C'));
      assert.equal(flip.ok && flip.item.holder, 'C', 'epoch unchanged: flipped over a live holder');
      assert.equal(flip.ok && flip.item.epoch, 3);
      const staleFlip = await store.claim(k, { epoch: 2 }, write('D'));
      assert.equal(staleFlip.ok ? 'landed' : staleFlip.current?.epoch, 3, 'a stale epoch fails with the current one');
      const fresh = key('flip');
      assert.equal((await store.claim(fresh, { epoch: undefined }, write('E'))).ok, true, 'never claimed: the flip lands');
      assert.equal((await store.claim(fresh, { epoch: undefined }, write('F'))).ok, false, 'claimed since: it does not');
    });

    // Renew and release are conditional writes on "still ours"; the release removes the holder, never the item.
    // https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
    test('renew and release land only while still ours; the release keeps the epoch', async () => {
      const store = subject.store();
      const k = key('renew');
      await store.claim(k, { free: true }, write('A'));
      const rvn = randomUUID();
      assert.deepEqual(await store.renew(k, { holder: 'A', epoch: 1 }, rvn, 'w'), { ok: true, item: undefined });
      assert.equal((await store.read(k))?.rvn, rvn, 'a new rvn');
      const wrong = await store.renew(k, { holder: 'A', epoch: 7 }, randomUUID(), 'w');
      assert.equal(wrong.ok ? 'landed' : wrong.current?.rvn, rvn, 'another epoch: refused, with the item as it is');
      const rel = randomUUID();
      assert.equal((await store.release(k, { holder: 'A', epoch: 1 }, rel, 'w')).ok, true);
      const released = await store.read(k);
      assert.deepEqual([released?.holder, released?.rvn, released?.epoch], [undefined, rel, 1], 'holder gone, epoch kept, new rvn');
      const again = await store.release(k, { holder: 'A', epoch: 1 }, randomUUID(), 'w');
      assert.equal(again.ok ? 'landed' : again.current?.rvn, rel, 'released already: nothing more to release');
      assert.deepEqual(await store.renew(key('none'), { holder: 'A', epoch: 1 }, rvn, 'w'), { ok: false, current: undefined });
    });

    // A transaction is all or nothing: one failed condition cancels every action.
    // https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
    // ADD to a number set, DELETE from it; a set is never empty (the last DELETE removes the attribute).
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html#Expressions.UpdateExpressions.DELETE
    test('the join and the removal are all or nothing', async () => {
      const store = subject.store();
      const role = key('election/r');
      const cand = (seq: number) => `${role}/${seq}`;
      const one = write('A');
      assert.deepEqual(await store.join({ roleKey: role, last: undefined, seq: 1, candidateKey: cand(1), candidate: one }), { ok: true });
      assert.deepEqual(await store.readRole(role), { epoch: 1, members: [1] });
      const c1 = await store.read(cand(1));
      assert.deepEqual([c1?.holder, c1?.epoch, c1?.rvn, c1?.lease_ms], [one.holder, 1, one.rvn, one.leaseMs], 'a candidate item is a lock item');
      assert.deepEqual(await store.join({ roleKey: role, last: undefined, seq: 2, candidateKey: cand(2), candidate: write('B') }), { ok: false });
      assert.equal(await store.read(cand(2)), undefined, 'counter taken: the candidate item was not written either');
      // The counter is right, but the candidate item exists: the counter does not move.
      assert.deepEqual(await store.join({ roleKey: role, last: 1, seq: 2, candidateKey: cand(1), candidate: write('B') }), { ok: false });
      assert.deepEqual(await store.readRole(role), { epoch: 1, members: [1] }, 'the counter did not move');
      assert.deepEqual(await store.join({ roleKey: role, last: 1, seq: 2, candidateKey: cand(2), candidate: write('B') }), { ok: true });
      assert.deepEqual(await store.removeCandidate(role, cand(1), 1, { rvn: 'not-it' }), { ok: false });
      assert.deepEqual((await store.readRole(role))?.members.toSorted(), [1, 2], 'the condition failed: still queued');
      assert.deepEqual(await store.removeCandidate(role, cand(1), 1, { rvn: one.rvn }), { ok: true });
      assert.equal(await store.read(cand(1)), undefined);
      assert.deepEqual(await store.removeCandidate(role, cand(2), 2, { holder: 'B', epoch: 2 }), { ok: true });
      assert.deepEqual(await store.readRole(role), { epoch: 2, members: [] }, 'the counter stays; the queue is empty');
    });

    // Two transactions on one item at once: DynamoDB cancels one with reason TransactionConflict (and a single-item
    // write on an item in a transaction fails with TransactionConflictException); nothing of it is applied.
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling
    test('two removals that overlap on the role item: one is cancelled with TransactionConflict, transient, and applies nothing', async () => {
      const store = subject.store();
      const role = key('election/c');
      const [w1, w2] = [write('A'), write('B')];
      await store.join({ roleKey: role, last: undefined, seq: 1, candidateKey: `${role}/1`, candidate: w1 });
      await store.join({ roleKey: role, last: 1, seq: 2, candidateKey: `${role}/2`, candidate: w2 });
      const settled = await Promise.allSettled([
        store.removeCandidate(role, `${role}/1`, 1, { rvn: w1.rvn }),
        store.removeCandidate(role, `${role}/2`, 2, { rvn: w2.rvn }),
      ]);
      const landed = settled.flatMap((s, i) => (s.status === 'fulfilled' && s.value.ok ? [i + 1] : []));
      const refused = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason] : []));
      assert.equal(landed.length, 1, `exactly one removal landed: ${JSON.stringify(settled)}`);
      assert.equal(refused.length, 1);
      const codes = (cancellationReasons(refused[0]) ?? []).map((r) => r.Code ?? 'None');
      assert.ok(codes.includes('TransactionConflict'), `reasons ${codes.join(',')}`);
      assert.ok(isTransient(refused[0]), 'a conflict is worth sending again');
      const other = 3 - landed[0];
      assert.deepEqual((await store.readRole(role))?.members, [other], 'the cancelled removal left its sequence queued');
      assert.notEqual(await store.read(`${role}/${other}`), undefined, '... and its item in place');
    });

    test('a single-item write on a candidate item inside a transaction fails with TransactionConflictException', async () => {
      const store = subject.store();
      const role = key('election/w');
      const w1 = write('A');
      await store.join({ roleKey: role, last: undefined, seq: 1, candidateKey: `${role}/1`, candidate: w1 });
      const removal = store.removeCandidate(role, `${role}/1`, 1, { holder: 'A', epoch: 1 });
      // Over HTTP, give the transaction time to reach the store; the memory store holds its items from the call on.
      if (!(store instanceof MemoryLockStore)) await new Promise((r) => setTimeout(r, 100));
      const renewal = store.renew(`${role}/1`, { holder: 'A', epoch: 1 }, randomUUID(), 'w');
      await assert.rejects(renewal, (err: Error) => err.name === 'TransactionConflictException' && isTransient(err));
      assert.deepEqual(await removal, { ok: true });
    });

    // Scan pages: LastEvaluatedKey names where the next page starts (ExclusiveStartKey); strongly consistent.
    // https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html
    test('the restore bump: every item found page by page, each bumped once per run id, the old epoch returned', async () => {
      const store = subject.store();
      const keys = [key('bump'), key('bump'), key('bump')];
      for (const k of keys) await store.claim(k, { free: true }, write('A'));
      await store.claim(keys[0], { epoch: 1 }, write('B')); // epoch 2
      const scanned = await scanAll(store);
      assert.deepEqual(
        keys.map((k) => scanned.get(k)?.epoch),
        [2, 1, 1],
      );
      const run = `run-${randomUUID()}`;
      assert.deepEqual(await store.bump(keys[0], 1000, run), { ok: true, from: 2 });
      assert.deepEqual(await store.bump(keys[0], 1000, run), { ok: false }, 'once per run id');
      assert.equal((await store.read(keys[0]))?.epoch, 1002);
      assert.deepEqual(await store.bump(keys[0], 1000, `${run}-2`), { ok: true, from: 1002 }, 'another run bumps again');
      assert.deepEqual(await store.bump(key('absent'), 1000, run), { ok: false }, 'no item: nothing created');
      assert.deepEqual((await scanAll(store)).get(keys[0])?.bumpRuns.toSorted(), [run, `${run}-2`].sort(), 'the runs recorded in the item');
    });

    // "If LastEvaluatedKey is not empty, it does not necessarily mean that there is more data in the result set"
    // (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html): a scan that reaches its Limit
    // stops there with a key. The memory store ended a last full page without one; the explored restore on DynamoDB
    // Local sent one scan more (verify/explore/dynamo.ts).
    test('a full scan page ends with a key even when nothing follows: the next page is empty and ends the scan', async () => {
      const t = await subject.table();
      for (const k of [key('page'), key('page')]) await t.store.claim(k, { free: true }, write('A'));
      const first = await t.pagedBy2.scanPage();
      assert.equal(first.items.length, 2);
      assert.notEqual(first.next, undefined, 'the Limit was reached: a key to go on from');
      assert.deepEqual(await t.pagedBy2.scanPage(first.next), { items: [] }, 'then an empty last page');
    });

    // The epoch floor: one reserved item, raised like every item (NOT contains(bump_runs, :run)), created by its first
    // raise; a write that creates a lock item starts above it (a claim's if_not_exists, the join's ConditionCheck).
    // https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
    test("the epoch floor: raised once per run id, and every item created after starts above it (a claim, the flip, a role's first join)", async () => {
      const { store } = await subject.table();
      assert.equal(await store.readFloor(), 0, 'never raised: 0');
      const [by, run] = [1000, `run-${randomUUID()}`];
      assert.deepEqual(await store.raiseFloor(by, run), { ok: true, from: 0 }, 'the first raise creates it');
      assert.deepEqual(await store.raiseFloor(by, run), { ok: false }, 'once per run id');
      assert.deepEqual(await store.raiseFloor(by, `${run}-2`), { ok: true, from: by }, 'another run raises it again');
      const floor = await store.readFloor();
      assert.equal(floor, 2 * by);

      const free = await store.claim(key('free'), { free: true }, write('A'));
      assert.equal(free.ok && free.item.epoch, floor + 1, "a free key's first claim starts above the floor");
      const k = key('flip');
      const flip = await store.claim(k, { epoch: undefined }, write('B'));
      assert.equal(flip.ok && flip.item.epoch, floor + 1, 'the flip of a key never claimed starts above the floor');
      const next = await store.claim(k, { epoch: floor + 1 }, write('C'));
      assert.equal(next.ok && next.item.epoch, floor + 2, 'then +1 as ever');
      const held = await store.claim(k, { free: true }, write('D'));
      assert.equal(held.ok ? 'landed' : held.current?.epoch, floor + 2, 'a free claim of a held key fails with the item that won');

      const role = key('election/floor');
      const join = (seq: number) => store.join({ roleKey: role, last: undefined, seq, candidateKey: `${role}/${seq}`, candidate: write('E') });
      assert.deepEqual(await join(floor), { ok: false }, "a role's first sequence at the floor is refused");
      assert.deepEqual([await store.readRole(role), await store.read(`${role}/${floor}`)], [undefined, undefined], 'nothing written');
      assert.deepEqual(await join(floor + 1), { ok: true });
      assert.equal((await store.readRole(role))?.epoch, floor + 1);
    });

    // Reference Part 8 "Restores" (etcd's --bump-revision): a key the backup lacks must also start above the bump.
    test('a restore from a backup that lacks a key, then the bump: the first claim of that key is above every epoch handed out before', async () => {
      const live = await subject.table();
      const [j, k] = ['night/2026-09-27', 'night/2026-09-28'];
      const handed: number[] = [];
      const take = async (table: Table, lockKey: string) => {
        const out = await table.store.claim(lockKey, { epoch: (await table.store.read(lockKey))?.epoch }, write('A'));
        assert.ok(out.ok);
        handed.push(Number(out.item.epoch));
        return Number(out.item.epoch);
      };
      for (let i = 0; i < 2; i++) await take(live, j);
      const backup = await live.items(); // holds j only: k is first claimed after it
      for (let i = 0; i < 3; i++) await take(live, k);
      await take(live, j);
      const before = Math.max(...handed);

      const restored = await subject.table();
      await restored.load(backup);
      assert.equal(await restored.store.read(k), undefined, 'the restored table lacks k');
      // The floor as the backup had it (none: 0); the bump must cover every epoch handed out since the backup.
      const floor = Number(backup.find((item) => item.pk === EPOCH_FLOOR_KEY)?.epoch ?? 0);
      const by = 100;
      assert.ok(by > before);
      const bump = () => bumpEpochs({ locks: restored.store }, { by, runId: 'r1', dryRun: false });
      const report = await bump();

      const first = await take(restored, k);
      assert.ok(first > before, `k's first epoch ${first} is above every epoch handed out before the restore (${before})`);
      assert.equal(first, floor + by + 1, "k's first claim starts above the raised floor");
      assert.ok((await take(restored, j)) > before, 'and so is the next epoch of a key the backup held');
      assert.deepEqual(report.floor, { from: floor, to: floor + by, alreadyRaised: false });
      assert.deepEqual(
        report.changed.map((c) => c.key),
        [j],
        'the items the table holds are bumped; the floor is not one of them',
      );
      const again = await bump();
      assert.deepEqual(
        [again.floor, again.alreadyBumped],
        [{ from: floor + by, to: floor + by, alreadyRaised: true }, [j]],
        'the same run id raises nothing twice',
      );
      assert.equal((await restored.store.read(EPOCH_FLOOR_KEY))?.epoch, floor + by, 'the floor is an item of the lock table');
    });
  });
}

/**
 * The job store's conformance suite (issue 19, item 3): the SAME tests run against the in-memory store
 * (lib/testing/job-store.ts, on a VirtualClock) and against the DynamoDB store (lib/core/aws/job-store.ts) on DynamoDB
 * Local behind the conflict proxy (lib/local/dynamodb-proxy.ts), so the two cannot drift. Each test that pins an AWS
 * behaviour cites the page that documents it:
 *  - if_not_exists in an update's SET (the first value stays):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html#Expressions.UpdateExpressions.SET.PreventingAttributeOverwrites
 *  - UpdateItem, ReturnValues ALL_OLD and ReturnValuesOnConditionCheckFailure ALL_OLD (the old item on success, the
 *    item that won on a failed condition): https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
 *  - TransactWriteItems: all or nothing, CancellationReasons in request order, ConditionCheck with ALL_OLD, the
 *    ClientRequestToken (idempotent for 10 minutes after the first completed; another request with the same token is
 *    IdempotentParameterMismatch): https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
 *    (ClientRequestToken also: https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/dynamodb/aws.sdk.kotlin.services.dynamodb.model/-transact-write-items-request/client-request-token.html)
 *  - Transaction conflicts (a transaction, or a single-item write, on an item another transaction holds):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling
 *  - Sparse indexes (only items carrying the index key are in it):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-indexes-general-sparse-indexes.html
 *  - A GSI is eventually consistent, no consistent read:
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.Reads
 *  - Pages: a query that reaches its Limit stops there with a LastEvaluatedKey, which "does not necessarily mean that
 *    there is more data": https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Pagination.html
 *
 * Where DynamoDB Local does not follow AWS, the AWS side of a test says so: the conflict proxy emulates
 * TransactionConflict (DynamoDB Local serialises transactions; test/store/dynamodb-proxy.test.ts); DynamoDB Local's GSI is
 * updated with the write (no lag to observe), so the index lag is pinned on the in-memory store only, as are the
 * token's 10 minutes (no test waits 10 minutes of real time).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { DynamoJobStore } from '../../lib/core/aws/job-store';
import { ConfigError } from '../../lib/core/errors';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { isTransient } from '../../lib/core/conditions';
import { raiseJobRow } from '../../lib/core/fence';
import { claimShard, jobKeys, type JobKeys } from '../../lib/core/job-keys';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { Attr } from '../../lib/core/schema';
import { localClients } from '../../lib/core/aws/clients';
import type { BatchPut, FenceItem, JobRow, JobStore, RowRaise } from '../../lib/core/store/jobs';
import { sightClaimed, type SweeperDeps } from '../../lib/core/sweeper';
import { startDynamoDbProxy, type DynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { inFlightThrough } from '../support/in-flight';
import { namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';

const T = { timeout: 60_000 };
/** Wide enough that "still in flight" holds on two loaded cores (as test/store/dynamodb-proxy.test.ts). */
const WINDOW_MS = 500;

/** What each store's run of the suite is given. */
interface World {
  readonly store: JobStore;
  /** The same table, two items a page (the memory store's pageSize, DynamoDB's Limit). */
  readonly pagedBy2: JobStore;
  /** A table for the batch's puts (partition key `pk`). */
  readonly records: string;
  /** Start `act`, and resolve once it is in flight (its transaction holds its items), with its answer to come. */
  inFlight<R>(act: (store: JobStore) => Promise<R>): Promise<{ answer(): Promise<R> }>;
  /** Wait until the sparse index has caught up with every write so far (the lag on memory; a poll on DynamoDB). */
  settleIndex(check: () => Promise<boolean>): Promise<void>;
  /** What a job's holders and sweeper run on, over this store: the job table, a lock table, the clock. */
  deps(job: string): SweeperDeps;
  /** The virtual clock, when the store runs on one (memory): time-window tests need it. */
  readonly clock?: VirtualClock;
  /** Stop what the world started. */
  close(): Promise<void>;
  /** A new, empty job table with TTL enabled on it (attribute `expires`): its store and name. */
  expiring(): Promise<{ readonly store: JobStore; readonly name: string }>;
}

const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;
/** The shard the store-level tests raise their rows under (what the core would pass for a job of that name). */
const SHARD = claimShard('conformance');
const raiseOf = (token: number, owner = 'A', chunkCount = 2): RowRaise => ({
  token,
  owner,
  chunkCount,
  claimedSince: '2026-09-28T00:00:00.000Z',
  shard: SHARD,
});
const put = (table: string, pk: string, note = 'x'): BatchPut => ({ table, item: { pk: { S: pk }, note: { S: note } }, keyAttribute: 'pk' });
const allClaimed = (store: JobStore): Promise<JobRow[]> => allClaimedOf(store, SHARD);
async function allClaimedOf(store: JobStore, shard: string): Promise<JobRow[]> {
  const rows: JobRow[] = [];
  let next: string | undefined;
  do {
    const page = await store.claimedPage(shard, next);
    rows.push(...page.items);
    next = page.next;
  } while (next !== undefined);
  return rows;
}
async function thrown(p: Promise<unknown>): Promise<Error & { CancellationReasons?: { Code?: string }[] }> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected a rejection');
}

const LAG_MS = 1_000;
const TRANSACTION_MS = 20;

const worlds: Record<string, () => Promise<World>> = {
  memory: async () => {
    const clock = new VirtualClock();
    const store = new MemoryJobStore({ clock, jobs: 'jobs', indexLagMs: LAG_MS, pageSize: 2, transactionMs: TRANSACTION_MS });
    // Every other call's transaction is over once the clock has moved past it.
    const settled = Object.assign(Object.create(store) as MemoryJobStore, {
      recordBatch: async (...args: Parameters<JobStore['recordBatch']>) => {
        const answer = store.recordBatch(...args);
        answer.catch(() => {}); // awaited below
        await clock.advance(TRANSACTION_MS);
        return answer;
      },
    });
    const lockStore = new MemoryLockStore();
    return {
      store: settled,
      pagedBy2: store,
      records: 'records',
      deps: (job) => ({ jobs: store, locks: lockStore, clock, job }),
      clock,
      close: async () => {},
      expiring: async () => ({ store: new MemoryJobStore({ clock, jobs: 'expiring-jobs', timeToLive: 'expires' }), name: 'expiring-jobs' }),
      inFlight: async (act) => {
        const running = act(store); // holds its items until the clock has moved TRANSACTION_MS
        running.catch(() => {}); // awaited by answer()
        return { answer: async () => (await clock.advance(TRANSACTION_MS), running) };
      },
      settleIndex: async (check) => {
        await clock.advance(LAG_MS);
        assert.ok(await check(), 'the index caught up after the lag');
      },
    };
  },
  'dynamodb-local behind the conflict proxy': async () => {
    const ns = await namespace();
    const proxy: DynamoDbProxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, conflictWindowMs: WINDOW_MS });
    const clients = localClients({ dynamodb: proxy.endpoint });
    const store = new DynamoJobStore(clients.ddb, ns.tables.jobs);
    return {
      close: async () => {
        clients.destroy();
        await proxy.stop();
      },
      store,
      pagedBy2: new DynamoJobStore(clients.ddb, ns.tables.jobs, 2),
      expiring: async () => {
        const other = await namespace();
        const TableName = other.tables.jobs;
        await other.clients.raw.send(
          new UpdateTimeToLiveCommand({ TableName, TimeToLiveSpecification: { Enabled: true, AttributeName: 'expires' } }),
        );
        return { store: new DynamoJobStore(clients.ddb, TableName), name: TableName };
      },
      records: ns.tables.invoices,
      deps: (job) => ({
        jobs: new DynamoJobStore(clients.ddb, ns.tables.jobs),
        locks: new DynamoLockStore(clients.ddb, ns.tables.locks),
        clock: systemClock,
        job,
      }),
      inFlight: (act) => inFlightThrough(proxy, () => act(store)),
      settleIndex: async (check) => {
        for (const t0 = performance.now(); !(await check()); await new Promise((r) => setTimeout(r, 20)))
          if (performance.now() - t0 > 10_000) assert.fail('the index never caught up');
      },
    };
  },
};

for (const [name, make] of Object.entries(worlds)) {
  describe(`job store conformance: ${name}`, () => {
    let w: World;
    before(async () => {
      w = await make();
    });
    after(() => w.close());
    const fenceIn = (jobs: string, pk: string): FenceItem => ({ table: jobs, key: { [Attr.pk]: pk } });

    // TTL deletes expired items (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html): a deleted
    // job row or chunk fence would forget its token, so a job table with TTL enabled takes no raise.
    test('a job table with TTL enabled: the raise is refused with a ConfigError naming it, and nothing is written', T, async () => {
      const t = await w.expiring();
      const err = await thrown(t.store.raiseJob(unique('job'), raiseOf(1)));
      assert.ok(err instanceof ConfigError, String(err));
      assert.match(err.message, new RegExp(`${t.name} \\(the job table\\) has TTL ENABLED on attribute 'expires'`));
      assert.deepEqual((await t.store.scanPage()).items, [], 'nothing written');
    });

    // UpdateItem ReturnValues / ReturnValuesOnConditionCheckFailure ALL_OLD (API_UpdateItem.html).
    test('raise the job row: the old row on success (ALL_OLD), the row that won on a refusal; equal is accepted', T, async () => {
      const job = unique('job');
      assert.deepEqual(await w.store.raiseJob(job, raiseOf(5)), { ok: true, old: undefined }, 'the first raise finds no row');
      const again = await w.store.raiseJob(job, raiseOf(5, 'A2'));
      assert.ok(again.ok && again.old?.fence === 5 && again.old.owner === 'A', 'equal is accepted, and the old row comes back');
      const higher = await w.store.raiseJob(job, raiseOf(7, 'B', 3));
      assert.ok(higher.ok && higher.old?.owner === 'A2');
      const lower = await w.store.raiseJob(job, raiseOf(6, 'Z'));
      assert.equal(lower.ok, false);
      assert.ok(!lower.ok && lower.current?.fence === 7 && lower.current.owner === 'B', 'the refusal carries the row that won');
      const row = await w.store.readJob(job);
      assert.deepEqual([row?.fence, row?.state, row?.owner_token, row?.owner, row?.chunk_count, row?.claim_shard], [7, 'RUNNING', 7, 'B', 3, SHARD]);
    });

    test('a DONE row stays DONE: complete needs fence and owner at the token; a later raise is refused with the DONE row', T, async () => {
      const job = unique('job');
      await w.store.raiseJob(job, raiseOf(3));
      const wrong = await w.store.complete(job, 2);
      assert.ok(!wrong.ok && wrong.current?.fence === 3, 'a stale owner cannot complete');
      assert.equal((await w.store.complete(job, 3)).ok, true);
      const row = await w.store.readJob(job);
      assert.deepEqual([row?.state, row?.claim_shard, row?.claimed_since], ['DONE', undefined, undefined], 'DONE leaves the index attributes');
      const late = await w.store.raiseJob(job, raiseOf(9));
      assert.ok(!late.ok && late.current?.state === 'DONE');
    });

    test('chunk fences: raise (never raised or not above), the old item back; done only while the fence is ours', T, async () => {
      const chunk = `${unique('job')}#chunk#00`;
      const item = fenceIn(w.store.table, chunk);
      assert.deepEqual(await w.store.raiseFence(item, 4, { chunk: 0 }), { ok: true, old: undefined });
      assert.deepEqual(await w.store.markChunkDone(chunk, 4), { ok: true, old: { pk: chunk, chunk: 0, fence: 4 } });
      const raised = await w.store.raiseFence(item, 6, { chunk: 0 });
      assert.ok(raised.ok && raised.old?.done_by === 4, "the old item tells the earlier holder's progress");
      const zombie = await w.store.markChunkDone(chunk, 4);
      assert.ok(!zombie.ok && zombie.current?.fence === 6 && zombie.current.done_by === 4, 'refused, with the item that won');
      const low = await w.store.raiseFence(item, 5);
      assert.ok(!low.ok && low.current?.fence === 6);
      assert.deepEqual(await w.store.readFence(item), { pk: chunk, chunk: 0, fence: 6, done_by: 4 });
      assert.equal(await w.store.readFence(fenceIn(w.store.table, unique('never'))), undefined);
    });

    // Sparse index (bp-indexes-general-sparse-indexes.html), eventually consistent (GSI.html#GSI.Reads).
    test('the sparse index holds exactly the RUNNING rows: in with the raise, out with complete; never a chunk', T, async () => {
      const [a, b, c] = [unique('a'), unique('b'), unique('c')];
      for (const job of [a, b, c]) await w.store.raiseJob(job, raiseOf(2));
      await w.store.raiseFence(fenceIn(w.store.table, `${a}#chunk#00`), 2, { chunk: 0 });
      const ours = async () => (await allClaimed(w.store)).map((r) => r.pk).filter((pk) => [a, b, c].some((j) => pk.startsWith(j)));
      await w.settleIndex(async () => (await ours()).length === 3);
      assert.deepEqual((await ours()).sort(), [a, b, c].sort(), 'three rows (pages followed to the end), no chunk item');
      assert.equal((await w.store.complete(a, 2)).ok, true);
      await w.settleIndex(async () => (await ours()).length === 2);
      assert.deepEqual((await ours()).sort(), [b, c].sort());
    });

    test("each job's claimed rows are its own: on one job table, a job's sweeper sights its rows and never another job's", T, async () => {
      const date = '2026-09-28';
      const [reminders, exports] = [unique('reminders'), unique('exports')].map(jobKeys);
      // The raise of each job's row, as a holder of that job makes it (lib/core/fence.ts): the core decides where it is indexed.
      for (const k of [reminders, exports]) await raiseJobRow(w.deps(k.name), k.job(date), 2, `${k.name}-holder`, 1);
      const sighted = async (k: JobKeys) => (await sightClaimed(w.deps(k.name), { leaseMs: 1_000 })).sightings.map((s) => s.jobId);
      await w.settleIndex(
        async () => (await sighted(reminders)).includes(reminders.job(date)) && (await sighted(exports)).includes(exports.job(date)),
      );
      assert.deepEqual(await sighted(reminders), [reminders.job(date)], "the reminders sweeper sights its own row, and no other job's");
      assert.deepEqual(await sighted(exports), [exports.job(date)], "the exports sweeper sights its own row, and no other job's");
    });

    test('a full page ends with a LastEvaluatedKey even when nothing follows: the next page is empty and ends the query', T, async () => {
      const shard = unique('shard');
      for (const job of [unique('job'), unique('job')]) await w.store.raiseJob(job, { ...raiseOf(1), shard });
      await w.settleIndex(async () => (await allClaimedOf(w.store, shard)).length === 2);
      const first = await w.pagedBy2.claimedPage(shard);
      assert.equal(first.items.length, 2);
      assert.notEqual(first.next, undefined, 'the Limit was reached: a key to go on from');
      assert.deepEqual(await w.pagedBy2.claimedPage(shard, first.next), { items: [] }, 'then an empty last page');
    });

    test("the sweeper's re-queue only counts, on exactly the row it saw: RUNNING, owner, fence and count", T, async () => {
      const job = unique('job');
      await w.store.raiseJob(job, raiseOf(2));
      const first = await w.store.requeue(job, { ownerToken: 2, fence: 2, requeues: 0 });
      assert.ok(first.ok && first.old?.requeues === undefined, 'the first finds no count');
      const row = await w.store.readJob(job);
      assert.deepEqual([row?.state, row?.requeues, row?.claim_shard], ['RUNNING', 1, SHARD], 'still RUNNING and indexed');
      const stale = await w.store.requeue(job, { ownerToken: 2, fence: 2, requeues: 0 });
      assert.ok(!stale.ok && stale.current?.requeues === 1, 'another sweep recorded it first: refused, with the row');
      assert.equal((await w.store.requeue(job, { ownerToken: 2, fence: 2, requeues: 1 })).ok, true);
      await w.store.raiseJob(job, raiseOf(3, 'B'));
      const moved = await w.store.requeue(job, { ownerToken: 2, fence: 2, requeues: 2 });
      assert.ok(!moved.ok && moved.current?.fence === 3, 'a new holder raised in between: refused');
      await w.store.complete(job, 3);
      const done = await w.store.requeue(job, { ownerToken: 3, fence: 3, requeues: 2 });
      assert.ok(!done.ok && done.current?.state === 'DONE', 'a DONE night is not re-queued');
    });

    // TransactWriteItems: all or nothing, reasons in request order (API_TransactWriteItems.html).
    test('a batch under the fence: recorded; already-recorded puts by position, and then nothing else written', T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      await w.store.raiseFence(fence, 3);
      const [p1, p2, p3] = [unique('r'), unique('r'), unique('r')];
      assert.deepEqual(await w.store.recordBatch(fence, 3, [put(w.records, p1)], unique('tok')), { kind: 'recorded' });
      const out = await w.store.recordBatch(fence, 3, [put(w.records, p2), put(w.records, p1), put(w.records, p3)], unique('tok'));
      assert.deepEqual(out, { kind: 'already-recorded', positions: [1] });
      assert.equal(await w.store.readFence({ table: w.records, key: { pk: p2 } }), undefined, 'all or nothing: p2 was not written');
      assert.deepEqual(await w.store.readFence({ table: w.records, key: { pk: p1 } }), { pk: p1, note: 'x' });
    });

    // UpdateItem with attribute_exists and if_not_exists (API_UpdateItem.html; Expressions.UpdateExpressions.html#Expressions.UpdateExpressions.SET.PreventingAttributeOverwrites).
    test("a side effect's record: DONE only over a recorded intent; the first DONE's token and answer stay", T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      await w.store.raiseFence(fence, 3);
      const pk = unique('effect#fp');
      const at = '2026-12-01T00:00:00.000Z';
      assert.equal(await w.store.markEffectDone(w.records, pk, { token: 3, wallIso: at }), false, 'no intent: nothing written');
      assert.equal(await w.store.readEffect(w.records, pk), undefined);
      const intent = { pk, state: 'INTENT', effect: 'email#ana', idempotency_key: 'fp-1', token: 3 };
      const recorded = await w.store.recordBatch(fence, 3, [{ table: w.records, keyAttribute: 'pk', document: intent }], unique('tok'));
      assert.deepEqual(recorded, { kind: 'recorded' });
      assert.deepEqual(await w.store.readEffect(w.records, pk), intent);
      assert.equal(await w.store.markEffectDone(w.records, pk, { token: 3, result: 'msg-1', wallIso: at }), true);
      assert.equal(await w.store.markEffectDone(w.records, pk, { token: 4, result: 'msg-2', wallIso: '2026-12-02T00:00:00.000Z' }), true);
      assert.deepEqual(await w.store.readEffect(w.records, pk), { ...intent, state: 'DONE', done_by: 3, done_at: at, result: 'msg-1' });
    });

    // ConditionCheck with ReturnValuesOnConditionCheckFailure ALL_OLD (API_TransactWriteItems.html).
    test('a batch below the fence, or under a fence never raised, is fenced out with the fence item that won; nothing written', T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      const p = unique('r');
      const unraised = await w.store.recordBatch(fence, 1, [put(w.records, p)], unique('tok'));
      assert.equal(unraised.kind, 'fenced-out');
      assert.ok(unraised.kind === 'fenced-out' && unraised.current === undefined, 'no item to return');
      await w.store.raiseFence(fence, 8);
      const out = await w.store.recordBatch(fence, 7, [put(w.records, p)], unique('tok'));
      assert.ok(out.kind === 'fenced-out' && out.current?.fence === 8);
      assert.equal(await w.store.readFence({ table: w.records, key: { pk: p } }), undefined);
      assert.equal((await w.store.recordBatch(fence, 8, [put(w.records, p)], unique('tok'))).kind, 'recorded', 'equal is accepted');
    });

    // ClientRequestToken (API_TransactWriteItems.html#DDB-TransactWriteItems-request-ClientRequestToken).
    test('ClientRequestToken: the same request again is a success that writes nothing; another request with it is refused', T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      await w.store.raiseFence(fence, 1);
      const token = unique('tok');
      const p = unique('r');
      const request = [put(w.records, p)];
      assert.deepEqual(await w.store.recordBatch(fence, 1, request, token), { kind: 'recorded' });
      // A new request would now find p recorded (already-recorded): a success means the first one's answer, replayed.
      assert.deepEqual(await w.store.recordBatch(fence, 1, request, token), { kind: 'recorded' });
      const other = await thrown(w.store.recordBatch(fence, 1, [put(w.records, p, 'other')], token));
      assert.equal(other.name, 'IdempotentParameterMismatchException');
      assert.equal(isTransient(other), false, 'not worth resending');
      assert.deepEqual(await w.store.readFence({ table: w.records, key: { pk: p } }), { pk: p, note: 'x' });
      if (!w.clock) return; // DynamoDB Local: nobody waits 10 minutes of real time
      await w.clock.advance(10 * 60_000);
      assert.deepEqual(
        await w.store.recordBatch(fence, 1, request, token),
        { kind: 'already-recorded', positions: [0] },
        'after 10 minutes, a new request',
      );
    });

    // Transaction conflict handling (transaction-apis.html#transaction-conflict-handling); DynamoDB Local serialises
    // transactions, the conflict proxy emulates the conflict (test/store/dynamodb-proxy.test.ts).
    test('two transactions on the same fence item: the second is cancelled with TransactionConflict at it, and may be sent again', T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      await w.store.raiseFence(fence, 2);
      const [p1, p2] = [unique('r'), unique('r')];
      const first = await w.inFlight((store) => store.recordBatch(fence, 2, [put(w.records, p1)], unique('tok')));
      const token = unique('tok');
      const err = await thrown(w.store.recordBatch(fence, 2, [put(w.records, p2)], token));
      assert.equal(err.name, 'TransactionCanceledException');
      assert.deepEqual(
        err.CancellationReasons?.map((r) => r.Code),
        ['TransactionConflict', 'None'],
      );
      assert.equal(isTransient(err), true, 'only transient reasons: thrown, for the retry helper');
      assert.deepEqual(await first.answer(), { kind: 'recorded' });
      assert.equal(await w.store.readFence({ table: w.records, key: { pk: p2 } }), undefined, 'the cancelled one wrote nothing');
      assert.deepEqual(await w.store.recordBatch(fence, 2, [put(w.records, p2)], token), { kind: 'recorded' }, 'sent again once the first is over');
    });

    test('a single-item write on an item a transaction holds fails with TransactionConflictException; a read does not', T, async () => {
      const fence = fenceIn(w.store.table, unique('fence'));
      await w.store.raiseFence(fence, 2);
      const first = await w.inFlight((store) => store.recordBatch(fence, 2, [put(w.records, unique('r'))], unique('tok')));
      const err = await thrown(w.store.raiseFence(fence, 3));
      assert.equal(err.name, 'TransactionConflictException');
      assert.equal(isTransient(err), true);
      assert.equal((await w.store.readFence(fence))?.fence, 2);
      await first.answer();
      assert.equal((await w.store.raiseFence(fence, 3)).ok, true);
    });
  });
}

describe('the in-memory store only: what DynamoDB Local cannot show', () => {
  test('the sparse index lags each change by indexLagMs × random(), and never shows an older version after a newer one', async () => {
    const clock = new VirtualClock();
    const LAG = 400;
    const draws = [0, 1, 0];
    const store = new MemoryJobStore({ clock, jobs: 'jobs', indexLagMs: LAG, random: () => draws.shift()! });
    const fences = async () => (await allClaimed(store)).map((r) => r.fence);
    await store.raiseJob('a', raiseOf(1)); // drawn 0: in the index at once
    assert.deepEqual(await fences(), [1]);
    await clock.advance(100);
    await store.raiseJob('a', raiseOf(2)); // drawn 1: reaches the index at 100 + LAG
    await clock.advance(100);
    assert.equal((await store.complete('a', 2)).ok, true); // drawn 0, but after the raise to 2
    assert.equal((await store.readJob('a'))?.state, 'DONE', 'the table read is strongly consistent');
    await clock.advance(100 + LAG - 200 - 1);
    assert.deepEqual(await fences(), [1], 'a GSI has no consistent read: still the first raise, then neither later change early');
    await clock.advance(1);
    assert.deepEqual(await fences(), [], 'the raise to 2 and the completion arrive together, in order: out of the index');
  });

  test('a transaction in flight for transactionMs holds its items until the clock moves past it', async () => {
    const clock = new VirtualClock();
    const store = new MemoryJobStore({ clock, jobs: 'jobs', transactionMs: 50 });
    const fence = { table: 'jobs', key: { pk: 'f' } };
    await store.raiseFence(fence, 1);
    const first = store.recordBatch(fence, 1, [put('records', 'a')], 't1');
    const again = await thrown(store.recordBatch(fence, 1, [put('records', 'a')], 't1'));
    assert.equal(again.name, 'TransactionInProgressException', 'the same token while in flight');
    await clock.advance(49);
    assert.equal((await thrown(store.raiseFence(fence, 2))).name, 'TransactionConflictException');
    await clock.advance(1);
    assert.deepEqual(await first, { kind: 'recorded' });
    assert.equal((await store.raiseFence(fence, 2)).ok, true);
  });
});

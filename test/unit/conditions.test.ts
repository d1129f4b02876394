/**
 * Retry classification by reason, not by name (docs/DESIGN.md "Retry classification"). Pure: no store. The errors are
 * built with the SDK's own exception classes, as the SDK parses them off the wire (HTTP 400, CancellationReasons in
 * the order of TransactItems; https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  ConditionalCheckFailedException,
  TransactionCanceledException,
  TransactionConflictException,
  type CancellationReason as SdkCancellationReason,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { heldFence } from '../../lib/core/aws/fence';
import { DEFAULT_BACKOFF, classifyCancellation, fullJitterMs, isTransient, retryTransient } from '../../lib/core/conditions';
import type { Clock } from '../../lib/core/clock';
import { writeBatch, type FencedPut } from '../../lib/core/batch';
import { fencedTransaction } from '../../lib/core/batch';
import { writeInvoices, type InvoiceWriteDeps } from '../../apps/billing/night';
import { ConfigError, FenceNotRaisedError, FencedOutError } from '../../lib/core/errors';
import { fenceOn } from '../../lib/core/fence';
import { chunkBatches } from '../../apps/billing/invoices';
import { DynamoFenceStore, DynamoJobStore } from '../../lib/core/aws/job-store';

const meta = { httpStatusCode: 400, requestId: 'test', attempts: 1, totalRetryDelay: 0 };

/** A cancellation as the SDK parses it: one reason per item, in request order. */
export function cancelled(...codes: string[]): TransactionCanceledException {
  const reasons: SdkCancellationReason[] = codes.map((Code) => (Code === 'None' ? { Code } : { Code, Message: Code }));
  const message = `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`;
  return new TransactionCanceledException({ $metadata: meta, message, Message: message, CancellationReasons: reasons });
}

/** A store that answers each TransactWriteItems with the next scripted error, then succeeds; `sent` records every request. */
function scripted(...answers: Error[]) {
  const sent: TransactWriteItemsCommandInput[] = [];
  const ddb = {
    send: async (cmd: { input: TransactWriteItemsCommandInput }) => {
      sent.push(cmd.input);
      const next = answers.shift();
      if (next) throw next;
      return {};
    },
  } as unknown as DynamoDBDocumentClient;
  return { ddb, sent };
}

describe('classifyCancellation: every mix of reasons', () => {
  const cases: Array<[string, string[], ReturnType<typeof classifyCancellation>]> = [
    ['a conflict on the fence ConditionCheck (position 0)', ['TransactionConflict', 'None', 'None'], { kind: 'transient' }],
    ['a conflict on a Put', ['None', 'TransactionConflict', 'None'], { kind: 'transient' }],
    ['throttling on one item', ['None', 'ThrottlingError'], { kind: 'transient' }],
    ['provisioned throughput on one item', ['ProvisionedThroughputExceeded', 'None'], { kind: 'transient' }],
    ['all three transient reasons together', ['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded'], { kind: 'transient' }],
    ['the fence condition failed', ['ConditionalCheckFailed', 'None', 'None'], { kind: 'condition', failed: [0] }],
    ['the fence condition failed beside a conflict on a Put', ['ConditionalCheckFailed', 'TransactionConflict'], { kind: 'condition', failed: [0] }],
    ['a Put already recorded beside a conflict on the fence', ['TransactionConflict', 'ConditionalCheckFailed'], { kind: 'condition', failed: [1] }],
    ['a Put already recorded beside throttling', ['None', 'ThrottlingError', 'ConditionalCheckFailed'], { kind: 'condition', failed: [2] }],
    ['several Puts already recorded', ['None', 'ConditionalCheckFailed', 'None', 'ConditionalCheckFailed'], { kind: 'condition', failed: [1, 3] }],
    ['the fence and a Put both failed', ['ConditionalCheckFailed', 'ConditionalCheckFailed'], { kind: 'condition', failed: [0, 1] }],
    ['a validation error', ['None', 'ValidationError'], { kind: 'permanent' }],
    ['a conflict beside a validation error', ['TransactionConflict', 'ValidationError'], { kind: 'permanent' }],
    ['an item collection too large', ['ItemCollectionSizeLimitExceeded'], { kind: 'permanent' }],
    ['a reason we do not know', ['SomethingNew'], { kind: 'permanent' }],
    ['only None', ['None', 'None'], { kind: 'permanent' }],
    ['no reasons at all', [], { kind: 'permanent' }],
  ];
  for (const [what, codes, expected] of cases) {
    test(`${what}: ${expected.kind}`, () => {
      assert.deepEqual(classifyCancellation(codes.map((Code) => ({ Code }))), expected);
      assert.equal(isTransient(cancelled(...codes)), expected.kind === 'transient', 'isTransient agrees');
    });
  }

  test('a reason without a Code counts as None; undefined reasons are permanent', () => {
    assert.deepEqual(classifyCancellation([{}, { Code: 'TransactionConflict' }]), { kind: 'transient' });
    assert.deepEqual(classifyCancellation(undefined), { kind: 'permanent' });
  });
});

describe('isTransient on single-item writes and transport errors', () => {
  test('TransactionConflictException (a write met an ongoing transaction) is transient', () => {
    assert.equal(isTransient(new TransactionConflictException({ $metadata: meta, message: 'Transaction is ongoing for the item' })), true);
  });
  test('ConditionalCheckFailedException is not: the data decided', () => {
    assert.equal(isTransient(new ConditionalCheckFailedException({ $metadata: meta, message: 'The conditional request failed' })), false);
  });
  test('the name and status of a cancellation alone decide nothing', () => {
    const bare = Object.assign(new Error('cancelled'), { name: 'TransactionCanceledException', $metadata: { httpStatusCode: 400 } });
    assert.equal(isTransient(bare), false, 'no reasons: permanent');
  });
  test('5xx, throttling names and dropped connections are transient; a 400 ValidationException is not', () => {
    assert.equal(isTransient({ name: 'InternalServerError', $metadata: { httpStatusCode: 500 } }), true);
    assert.equal(isTransient({ name: 'ThrottlingException', $metadata: { httpStatusCode: 400 } }), true);
    assert.equal(isTransient({ name: 'TransactionInProgressException', $metadata: { httpStatusCode: 400 } }), true);
    assert.equal(isTransient(Object.assign(new Error('reset'), { code: 'ECONNRESET' })), true);
    assert.equal(isTransient({ name: 'ValidationException', $metadata: { httpStatusCode: 400 } }), false);
  });
});

describe('backoff with full jitter', () => {
  test('a uniform wait in [0, min(cap, base * 2^retry))', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6].map((r) => fullJitterMs(r, () => 0.5)),
      [12.5, 25, 50, 100, 200, 400, 500],
    );
    assert.equal(
      fullJitterMs(3, () => 0),
      0,
    );
    assert.ok(fullJitterMs(10, () => 0.999999) < DEFAULT_BACKOFF.capMs);
  });

  test('retryTransient retries transient failures with the injected sleep and random, then succeeds', async () => {
    const slept: number[] = [];
    let calls = 0;
    const out = await retryTransient({ sleep: async (ms) => void slept.push(ms), random: () => 0.25 }, async () => {
      if (++calls < 3) throw new TransactionConflictException({ $metadata: meta, message: 'Transaction is ongoing for the item' });
      return 'done';
    });
    assert.equal(out, 'done');
    assert.deepEqual(slept, [6.25, 12.5]);
  });

  test('retryTransient throws a permanent failure at once, and a transient one after its retries', async () => {
    let calls = 0;
    const ccf = new ConditionalCheckFailedException({ $metadata: meta, message: 'The conditional request failed' });
    await assert.rejects(
      retryTransient({ sleep: async () => {} }, async () => {
        calls++;
        throw ccf;
      }),
      (e) => e === ccf,
    );
    assert.equal(calls, 1);
    calls = 0;
    await assert.rejects(
      retryTransient(
        { sleep: async () => {} },
        async () => {
          calls++;
          throw cancelled('TransactionConflict');
        },
        { ...DEFAULT_BACKOFF, retries: 3 },
      ),
    );
    assert.equal(calls, 4);
  });
});

/** A clock that stands at 0 and sets no timer: these writes only sleep between retries. */
const noTimers: Omit<Clock, 'sleep'> = {
  monotonicMs: () => 0,
  wallMs: () => 0,
  after: () => assert.fail('no timer is set by a fenced write'),
};

describe('the fenced batch decides by reason (a scripted store: no DynamoDB)', () => {
  const batch = [...chunkBatches({ date: '2026-09-28', invoices: 10, chunkSize: 10, putsPerTransaction: 3 }, 0)][0]; // 3 invoices
  const clock = (slept: number[]): Clock => ({ ...noTimers, sleep: async (ms) => void slept.push(ms) });

  const depsOf = (ddb: DynamoDBDocumentClient, slept: number[]): InvoiceWriteDeps => ({
    jobs: new DynamoJobStore(ddb, 'jobs'),
    invoices: 'inv',
    clock: clock(slept),
    random: () => 0.5,
  });

  test('a conflict on the fence check is retried: same request, same ClientRequestToken, after a jittered backoff', async () => {
    const { ddb, sent } = scripted(cancelled('TransactionConflict', 'None', 'None', 'None'), cancelled('None', 'ThrottlingError', 'None', 'None'));
    const slept: number[] = [];
    const r = await writeInvoices(depsOf(ddb, slept), 'job', 7, batch);
    assert.deepEqual(r, { recorded: 3, alreadyRecorded: 0, transactions: 3 });
    assert.equal(sent.length, 3);
    assert.equal(new Set(sent.map((s) => s.ClientRequestToken)).size, 1, 'one token for the unchanged request');
    assert.deepEqual(sent[2], sent[0], 'the very same request');
    assert.equal(sent[0].TransactItems?.length, 4, '1 ConditionCheck + the Puts');
    assert.deepEqual(slept, [12.5, 25]);
  });

  test('ConditionalCheckFailed on the fence is FencedOutError, even beside a conflict; nothing is retried', async () => {
    for (const codes of [
      ['ConditionalCheckFailed', 'None', 'None', 'None'],
      ['ConditionalCheckFailed', 'TransactionConflict', 'None', 'ConditionalCheckFailed'],
    ]) {
      const err = cancelled(...codes);
      err.CancellationReasons![0].Item = { pk: { S: 'job' }, fence: { N: '9' } }; // ALL_OLD: the fence item that won
      const { ddb, sent } = scripted(err);
      await assert.rejects(writeInvoices(depsOf(ddb, []), 'job', 7, batch), (e) => e instanceof FencedOutError && e.fence === 9);
      assert.equal(sent.length, 1);
    }
  });

  test('ConditionalCheckFailed on a fence item that does not exist is FenceNotRaisedError, not a newer holder', async () => {
    const { ddb, sent } = scripted(cancelled('ConditionalCheckFailed', 'None', 'None', 'None')); // no ALL_OLD item
    await assert.rejects(writeInvoices(depsOf(ddb, []), 'job', 7, batch), (e) => e instanceof FenceNotRaisedError && !(e instanceof FencedOutError));
    assert.equal(sent.length, 1);
  });

  test('a Put already recorded beside a conflict is decided by the condition: dropped, the rest sent as a new request', async () => {
    const { ddb, sent } = scripted(cancelled('TransactionConflict', 'None', 'ConditionalCheckFailed', 'None'));
    const slept: number[] = [];
    const r = await writeInvoices(depsOf(ddb, slept), 'job', 7, batch);
    assert.deepEqual(r, { recorded: 2, alreadyRecorded: 1, transactions: 2 });
    assert.deepEqual(slept, [], 'not a transient retry: no backoff');
    assert.equal(sent[1].TransactItems?.length, 3, 'the check + the two Puts left');
    assert.notEqual(sent[1].ClientRequestToken, sent[0].ClientRequestToken, 'another request, another token');
  });

  test('a permanent reason is thrown as it came', async () => {
    const err = cancelled('None', 'ValidationError', 'None', 'None');
    const { ddb, sent } = scripted(err);
    await assert.rejects(writeInvoices(depsOf(ddb, []), 'job', 7, batch), (e) => e === err);
    assert.equal(sent.length, 1);
  });

  test('a conflict that never clears is thrown after the retries', async () => {
    const { ddb, sent } = scripted(...Array.from({ length: 20 }, () => cancelled('TransactionConflict', 'None', 'None', 'None')));
    await assert.rejects(writeInvoices(depsOf(ddb, []), 'job', 7, batch), TransactionCanceledException);
    assert.equal(sent.length, DEFAULT_BACKOFF.retries + 1);
  });
});

describe('the generic fenced batch: typed outcomes, and the 99-put limit (a scripted store)', () => {
  const put = (table: string, pk: string): FencedPut => ({ table, item: { pk: { S: pk }, note: { S: `for ${pk}` } } });
  const clock: Clock = { ...noTimers, sleep: async () => {} };

  test('any items, in any tables: the already-recorded ones are listed (the very objects passed), the rest recorded', async () => {
    const { ddb, sent } = scripted(cancelled('None', 'None', 'ConditionalCheckFailed', 'None'));
    const f = fenceOn({ fences: new DynamoFenceStore(ddb), table: 'orders', key: { pk: 'order#7' }, clock });
    const puts = [put('ledger', 'a'), put('audit', 'b'), put('ledger', 'c')];
    const r = await writeBatch(heldFence(f, 4), puts);
    assert.deepEqual(r.alreadyRecorded, [puts[1]], 'position 2 is the second put');
    assert.ok(r.alreadyRecorded[0] === puts[1], 'the caller gets its own object back');
    assert.deepEqual(r.recorded, [puts[0], puts[2]]);
    assert.equal(r.transactions, 2);
    const check = sent[0].TransactItems?.[0].ConditionCheck;
    assert.deepEqual(check?.Key, { pk: { S: 'order#7' } }, 'the guard checks the fence item, in AttributeValue form');
    assert.equal(check?.ConditionExpression, 'fence <= :t');
    assert.deepEqual(
      sent[0].TransactItems?.slice(1).map((t) => [t.Put?.TableName, t.Put?.ConditionExpression, t.Put?.ExpressionAttributeNames]),
      [
        ['ledger', 'attribute_not_exists(#key)', { '#key': 'pk' }],
        ['audit', 'attribute_not_exists(#key)', { '#key': 'pk' }],
        ['ledger', 'attribute_not_exists(#key)', { '#key': 'pk' }],
      ],
    );
  });

  test('fenced out is a FencedOutError naming the fence, with the fence it met; nothing else is sent', async () => {
    const err = cancelled('ConditionalCheckFailed', 'None');
    err.CancellationReasons![0].Item = { pk: { S: 'order#7' }, fence: { N: '9' } };
    const { ddb, sent } = scripted(err);
    const f = fenceOn({ fences: new DynamoFenceStore(ddb), table: 'orders', key: { pk: 'order#7' }, clock, resource: 'order' });
    await assert.rejects(
      writeBatch(heldFence(f, 4), [put('ledger', 'a')]),
      (e) => e instanceof FencedOutError && e.resource === 'order' && e.fence === 9 && e.token === 4,
    );
    assert.equal(sent.length, 1);
  });

  test('more than 99 puts is a ConfigError before anything is sent; 99 is sent as one transaction of 100 actions', async () => {
    const { ddb, sent } = scripted();
    const f = fenceOn({ fences: new DynamoFenceStore(ddb), table: 'orders', key: { pk: 'order#7' }, clock });
    const many = Array.from({ length: 100 }, (_, i) => put('ledger', `p${i}`));
    await assert.rejects(writeBatch(heldFence(f, 1), many), (e) => e instanceof ConfigError && /at most 99 puts/.test(e.message));
    assert.equal(sent.length, 0, 'nothing sent');
    const r = await writeBatch(heldFence(f, 1), many.slice(0, 99));
    assert.equal(r.recorded.length, 99);
    assert.equal(sent[0].TransactItems?.length, 100);
  });

  test("the ClientRequestToken is the call's own and follows the whole request: another call, content or token, another one", async () => {
    const { ddb, sent } = scripted();
    const f = fenceOn({ fences: new DynamoFenceStore(ddb), table: 'orders', key: { pk: 'order#7' }, clock });
    await writeBatch(heldFence(f, 1), [put('ledger', 'a')]);
    await writeBatch(heldFence(f, 1), [put('ledger', 'a')]); // a retried chunk: a replay of the first would count its puts again
    await writeBatch(heldFence(f, 1), [{ table: 'ledger', item: { pk: { S: 'a' }, note: { S: 'other' } } }]);
    await writeBatch(heldFence(f, 2), [put('ledger', 'a')]);
    assert.equal(new Set(sent.map((s) => s.ClientRequestToken)).size, 4);
    // Within a call, the same request keeps its token (the retry above, "same request, same ClientRequestToken").
    const once = (call: string) => fencedTransaction(heldFence(f, 1), [put('ledger', 'a')], call).ClientRequestToken;
    assert.equal(once('c1'), once('c1'));
    assert.notEqual(once('c1'), once('c2'));
  });
});

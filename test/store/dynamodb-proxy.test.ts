/**
 * Pins lib/local/dynamodb-proxy.ts to DynamoDB's documented behaviour, speaking to it only through
 * @aws-sdk/client-dynamodb (and raw HTTP where the wire itself is the point), in front of the real DynamoDB Local.
 * Sources:
 *  - Transaction conflict handling: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling
 *  - TransactWriteItems API reference (cancellation reason codes and messages):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
 *  - TransactionCanceledException (when DynamoDB cancels a transaction, reasons in request order):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html#API_TransactWriteItems_Errors
 *  - Error handling (wire shape `{"__type": "com.amazonaws.dynamodb.v20120810#…", "message": …}`, 500 and 503):
 *    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html
 *
 * What the proxy does NOT emulate (DynamoDB Local's own behaviour is what callers get there):
 *  - conflicts of TransactGetItems with ongoing writes (a read transaction is never cancelled), and of
 *    BatchWriteItem or PartiQL (ExecuteStatement, ExecuteTransaction) with transactions;
 *  - a single-item write holding its item: a transaction arriving while a PutItem is in flight is not cancelled;
 *  - the exact timing of AWS's conflict window: here it runs from the moment the proxy knows the items' keys until
 *    DynamoDB Local answered plus `conflictWindowMs`, and the caller waits for it too;
 *  - idempotency tokens (ClientRequestToken's 10-minute window, TransactionInProgressException for a retry of a
 *    transaction still in flight, IdempotentParameterMismatchException): a retry is just another transaction;
 *  - real throttling: partition and item-collection limits, adaptive capacity, ThrottlingException or
 *    ProvisionedThroughputExceededException on single-item calls; only injected faults exist;
 *  - a 503 from AWS's front end with an HTML body (seen in aws-sdk-js-v3 issues 4683 and 6718): the proxy's 503 is
 *    the JSON shape the error handling page describes;
 *  - global tables, streams, and anything DynamoDB Local itself does not implement.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  CreateTableCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  DynamoDBServiceException,
  GetItemCommand,
  InternalServerError,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactionConflictException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { endpoints } from '../support/stack';
import { startDynamoDbProxy, type DynamoDbProxy, type DynamoDbProxyOptions } from '../../lib/local/dynamodb-proxy';
import type { AwsCall } from '../../lib/local/call-log';

const T = { timeout: 60_000 };
const WINDOW_MS = 500; // wide enough that "still in flight" holds on two loaded cores
const CONFLICT_URL = 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling';

let base: string; // the test stack's DynamoDB endpoint
let table: string;
const proxies: DynamoDbProxy[] = [];
const clients: DynamoDBClient[] = [];

// Failed calls are what these tests provoke: keep the SDK from logging each one.
const logger = { debug() {}, info() {}, warn() {}, error() {} };

function client(endpoint: string, o: { accessKeyId?: string; region?: string; maxAttempts?: number } = {}): DynamoDBClient {
  const c = new DynamoDBClient({
    endpoint,
    region: o.region ?? 'us-east-1',
    credentials: { accessKeyId: o.accessKeyId ?? 'conformance', secretAccessKey: 'local' },
    maxAttempts: o.maxAttempts ?? 1,
    logger,
  });
  clients.push(c);
  return c;
}

async function proxyWith(o: Partial<DynamoDbProxyOptions> = {}): Promise<DynamoDbProxy> {
  const p = await startDynamoDbProxy({ target: base, ...o });
  proxies.push(p);
  return p;
}

const key = (pk: string, sk = '1'): Record<string, AttributeValue> => ({ pk: { S: pk }, sk: { N: sk } });
const put = (pk: string, sk = '1'): TransactWriteItem => ({ Put: { TableName: table, Item: { ...key(pk, sk), v: { S: 'put' } } } });
const update = (pk: string, sk = '1'): TransactWriteItem => ({
  Update: { TableName: table, Key: key(pk, sk), UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'updated' } } },
});
const check = (pk: string, sk = '1'): TransactWriteItem => ({
  ConditionCheck: { TableName: table, Key: key(pk, sk), ConditionExpression: 'attribute_not_exists(pk) OR attribute_exists(pk)' },
});
const unique = (what: string) => `${what}-${randomBytes(3).toString('hex')}`;

async function exists(c: DynamoDBClient, pk: string, sk = '1'): Promise<boolean> {
  const out = await c.send(new GetItemCommand({ TableName: table, Key: key(pk, sk), ConsistentRead: true }));
  return out.Item !== undefined;
}

/** Waits until the proxy has forwarded `n` requests in all (so a transaction is in DynamoDB Local or in its window). */
async function forwarded(p: DynamoDbProxy, n: number): Promise<void> {
  const t0 = performance.now();
  while (p.stats().forwarded < n) {
    if (performance.now() - t0 > 10_000) assert.fail(`the proxy forwarded ${p.stats().forwarded} of ${n} requests`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function rejection(promise: Promise<unknown>): Promise<DynamoDBServiceException> {
  let caught: unknown;
  await assert.rejects(promise, (err: unknown) => ((caught = err), true));
  assert.ok(caught instanceof DynamoDBServiceException, `expected a DynamoDBServiceException, got ${String(caught)}`);
  return caught;
}

const codes = (err: TransactionCanceledException) => (err.CancellationReasons ?? []).map((r) => r.Code);

before(async () => {
  base = (await endpoints()).dynamodb;
  table = unique('proxy-conformance');
  await client(base).send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'N' },
        { AttributeName: 'v', AttributeType: 'S' },
      ],
      GlobalSecondaryIndexes: [
        { IndexName: 'by-v', KeySchema: [{ AttributeName: 'v', KeyType: 'HASH' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
      ],
    }),
  );
});

after(async () => {
  for (const c of clients) c.destroy();
  await Promise.all(proxies.map((p) => p.stop()));
});

describe(`TransactWriteItems vs an ongoing TransactWriteItems (${CONFLICT_URL})`, () => {
  test('two concurrent transactions sharing an item: exactly one wins, the other is cancelled with TransactionConflict at that item', T, async () => {
    const p = await proxyWith({ conflictWindowMs: WINDOW_MS });
    const c = client(p.endpoint);
    const shared = unique('shared');
    const [a1, b1, b2] = [unique('a1'), unique('b1'), unique('b2')];
    // The shared item is spelled sk=1 in one and sk=1.0 in the other: one number, so one item.
    const a = c.send(new TransactWriteItemsCommand({ TransactItems: [put(a1), update(shared, '1')] }));
    const b = c.send(new TransactWriteItemsCommand({ TransactItems: [put(shared, '1.0'), put(b1), put(b2)] }));
    const [ra, rb] = await Promise.allSettled([a, b]);
    assert.equal([ra, rb].filter((r) => r.status === 'fulfilled').length, 1, 'exactly one transaction wins');
    const lost = (ra.status === 'rejected' ? ra : rb) as PromiseRejectedResult;
    const err = lost.reason as TransactionCanceledException;
    assert.ok(err instanceof TransactionCanceledException, `got ${String(err)}`);
    assert.equal(err.name, 'TransactionCanceledException');
    assert.equal(err.$metadata.httpStatusCode, 400);
    assert.equal(err.$fault, 'client');
    const expected = ra.status === 'rejected' ? ['None', 'TransactionConflict'] : ['TransactionConflict', 'None', 'None'];
    assert.deepEqual(codes(err), expected);
    for (const r of err.CancellationReasons ?? []) {
      assert.equal(r.Message, r.Code === 'None' ? undefined : 'Transaction is ongoing for the item');
    }
    assert.equal(err.message, `Transaction cancelled, please refer cancellation reasons for specific reasons [${expected.join(', ')}]`);
    // All or nothing: the loser wrote none of its items; the winner all of its.
    const direct = client(base);
    assert.equal(await exists(direct, a1), ra.status === 'fulfilled');
    assert.equal(await exists(direct, b1), rb.status === 'fulfilled');
    assert.equal(p.stats().transactionConflicts, 1);
    assert.equal(p.stats().forwarded, 1, 'the cancelled transaction never reached DynamoDB Local');
  });

  test('a transaction that only ConditionChecks the in-flight item conflicts too', T, async () => {
    const p = await proxyWith({ conflictWindowMs: WINDOW_MS });
    const c = client(p.endpoint);
    const shared = unique('shared');
    const other = unique('other');
    const first = c.send(new TransactWriteItemsCommand({ TransactItems: [put(shared)] }));
    await forwarded(p, 1);
    const err = await rejection(c.send(new TransactWriteItemsCommand({ TransactItems: [put(other), check(shared)] })));
    assert.ok(err instanceof TransactionCanceledException);
    assert.deepEqual(codes(err), ['None', 'TransactionConflict']);
    await first;
    assert.equal(await exists(c, other), false);
    // Once the first transaction is over, the same transaction goes through.
    await c.send(new TransactWriteItemsCommand({ TransactItems: [put(other), check(shared)] }));
    assert.equal(await exists(c, other), true);
  });

  test('transactions on disjoint items never conflict', T, async () => {
    const p = await proxyWith({ conflictWindowMs: WINDOW_MS });
    const c = client(p.endpoint);
    const runs = Array.from({ length: 8 }, (_, i) => unique(`disjoint${i}`));
    await Promise.all(
      runs.map((r) => c.send(new TransactWriteItemsCommand({ TransactItems: [put(r, '1'), put(r, '2'), update(r, '3'), check(r, '4')] }))),
    );
    assert.equal(p.stats().transactionConflicts, 0);
    for (const r of runs) assert.equal(await exists(c, r, '3'), true);
  });
});

describe(`single-item writes vs an ongoing TransactWriteItems (${CONFLICT_URL})`, () => {
  test('PutItem, UpdateItem and DeleteItem on an in-flight item fail with TransactionConflictException; GetItem succeeds', T, async () => {
    const p = await proxyWith({ conflictWindowMs: WINDOW_MS });
    const c = client(p.endpoint);
    const shared = unique('shared');
    const tx = c.send(new TransactWriteItemsCommand({ TransactItems: [put(shared)] }));
    await forwarded(p, 1);
    const writes: [string, () => Promise<unknown>][] = [
      ['PutItem', () => c.send(new PutItemCommand({ TableName: table, Item: { ...key(shared), v: { S: 'single' } } }))],
      [
        'UpdateItem',
        () =>
          c.send(
            new UpdateItemCommand({
              TableName: table,
              Key: key(shared),
              UpdateExpression: 'SET v = :v',
              ExpressionAttributeValues: { ':v': { S: 'single' } },
            }),
          ),
      ],
      ['DeleteItem', () => c.send(new DeleteItemCommand({ TableName: table, Key: key(shared) }))],
    ];
    for (const [name, write] of writes) {
      const err = await rejection(write());
      assert.ok(err instanceof TransactionConflictException, `${name}: got ${err.name}`);
      assert.equal(err.name, 'TransactionConflictException');
      assert.equal(err.message, 'Transaction is ongoing for the item');
      assert.equal(err.$metadata.httpStatusCode, 400);
      assert.equal(err.$fault, 'client');
    }
    // "If an ongoing TransactWriteItems … conflicts with a concurrent GetItem request, both operations can succeed."
    await c.send(new GetItemCommand({ TableName: table, Key: key(shared) }));
    // Another item of the same table is free.
    await c.send(new PutItemCommand({ TableName: table, Item: { ...key(shared, '2'), v: { S: 'single' } } }));
    await tx;
    await c.send(new PutItemCommand({ TableName: table, Item: { ...key(shared), v: { S: 'after' } } }));
    assert.equal(p.stats().writeConflicts, 3);
  });
});

describe('injected faults, as AWS sends them (API_TransactWriteItems.html; Programming.Errors.html)', () => {
  test('throttle-cancel: TransactionCanceledException with ThrottlingError at the chosen item; nothing is written', T, async () => {
    const p = await proxyWith();
    const c = client(p.endpoint, { maxAttempts: 3 });
    const [x, y] = [unique('x'), unique('y')];
    p.inject({ kind: 'throttle-cancel', item: 1 });
    const err = await rejection(c.send(new TransactWriteItemsCommand({ TransactItems: [put(x), put(y)] })));
    assert.ok(err instanceof TransactionCanceledException);
    assert.deepEqual(codes(err), ['None', 'ThrottlingError']);
    assert.match(err.CancellationReasons?.[1].Message ?? '', /^Throughput exceeds the current capacity of your table or index\./);
    assert.equal(err.$metadata.httpStatusCode, 400);
    assert.equal(err.$fault, 'client');
    assert.equal(err.$retryable, undefined);
    assert.equal(err.$metadata.attempts, 1, 'the SDK does not retry a cancelled transaction by itself');
    assert.equal(await exists(c, x), false);
    assert.equal(p.stats().injected['throttle-cancel'], 1);
  });

  test('throughput-cancel: ProvisionedThroughputExceeded; the fault is used up after `count` transactions', T, async () => {
    const p = await proxyWith();
    const c = client(p.endpoint);
    p.inject({ kind: 'throughput-cancel', count: 2 });
    for (let i = 0; i < 2; i++) {
      const err = await rejection(c.send(new TransactWriteItemsCommand({ TransactItems: [put(unique('t')), put(unique('t'))] })));
      assert.ok(err instanceof TransactionCanceledException);
      assert.deepEqual(codes(err), ['ProvisionedThroughputExceeded', 'None']);
      assert.match(err.CancellationReasons?.[0].Message ?? '', /^The level of configured provisioned throughput for the table was exceeded/);
    }
    await c.send(new PutItemCommand({ TableName: table, Item: key(unique('single')) })); // cancellations are for transactions only
    await c.send(new TransactWriteItemsCommand({ TransactItems: [put(unique('t'))] }));
    assert.equal(p.stats().injected['throughput-cancel'], 2);
  });

  test('http-500: InternalServerError, a server fault the SDK retries; http-503: ServiceUnavailable', T, async () => {
    const p = await proxyWith();
    const once = client(p.endpoint);
    p.inject({ kind: 'http-500' });
    const e500 = await rejection(once.send(new GetItemCommand({ TableName: table, Key: key('any') })));
    assert.ok(e500 instanceof InternalServerError);
    assert.equal(e500.name, 'InternalServerError');
    assert.equal(e500.message, 'Internal server error');
    assert.equal(e500.$metadata.httpStatusCode, 500);
    assert.equal(e500.$fault, 'server');
    assert.equal(e500.$retryable, undefined);

    p.inject({ kind: 'http-503', operation: 'PutItem' });
    await once.send(new GetItemCommand({ TableName: table, Key: key('any') })); // another operation: not armed for it
    const e503 = await rejection(once.send(new PutItemCommand({ TableName: table, Item: key(unique('p')) })));
    assert.equal(e503.name, 'ServiceUnavailable'); // not modelled: the SDK's base exception, named from __type
    assert.equal(e503.$metadata.httpStatusCode, 503);
    assert.equal(e503.$fault, 'server');

    // With retries, as in AWS: one 500 and one 503, then the call succeeds on its third attempt.
    const retrying = client(p.endpoint, { maxAttempts: 3 });
    p.inject({ kind: 'http-500' });
    p.inject({ kind: 'http-503' });
    const out = await retrying.send(new GetItemCommand({ TableName: table, Key: key('any') }));
    assert.equal(out.$metadata.attempts, 3);
    assert.deepEqual(p.stats().injected, { 'throttle-cancel': 0, 'throughput-cancel': 0, 'http-500': 2, 'http-503': 2, delay: 0 });
  });

  test('applied 5xx: the write takes effect, yet the caller sees the 500', T, async () => {
    const p = await proxyWith();
    const c = client(p.endpoint);
    const k = unique('applied');
    p.inject({ kind: 'http-500', applied: true });
    const err = await rejection(c.send(new TransactWriteItemsCommand({ TransactItems: [put(k)] })));
    assert.equal(err.$metadata.httpStatusCode, 500);
    assert.equal(await exists(c, k), true);
  });

  test('delay: the request takes effect at once, its answer arrives `ms` later; `principal` narrows a fault to one caller', T, async () => {
    const p = await proxyWith();
    const chunkFn = client(p.endpoint, { accessKeyId: 'ChunkFunction' });
    const raiseFn = client(p.endpoint, { accessKeyId: 'RaiseFunction' });
    p.inject({ kind: 'delay', ms: 600, operation: 'PutItem', principal: 'ChunkFunction' });
    await raiseFn.send(new PutItemCommand({ TableName: table, Item: key(unique('other')) }));
    assert.equal(p.stats().injected.delay, 0, 'another principal is not delayed');
    const k = unique('slow');
    const t0 = performance.now();
    let answered = false;
    const slow = chunkFn.send(new PutItemCommand({ TableName: table, Item: key(k) })).finally(() => (answered = true));
    const direct = client(base);
    while (!(await exists(direct, k))) {
      assert.ok(performance.now() - t0 < 5_000, 'the delayed write never landed');
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(answered, false, 'the item is there before its answer');
    await slow;
    assert.ok(performance.now() - t0 >= 600, `answered after ${performance.now() - t0} ms`);
    assert.equal(p.stats().injected.delay, 1);
  });

  test('seeded random faults repeat with the seed', T, async () => {
    const pattern = async () => {
      const p = await proxyWith({ randomFaults: { seed: 42, rates: { 'http-500': 0.5 } } });
      const c = client(p.endpoint);
      const outcome: boolean[] = [];
      for (let i = 0; i < 16; i++) {
        outcome.push(
          await c.send(new GetItemCommand({ TableName: table, Key: key('any') })).then(
            () => true,
            () => false,
          ),
        );
      }
      assert.equal(p.stats().injected['http-500'], outcome.filter((ok) => !ok).length);
      return outcome;
    };
    const first = await pattern();
    assert.ok(first.includes(true) && first.includes(false), `a mix of outcomes: ${first}`);
    assert.deepEqual(await pattern(), first);
  });
});

describe('turned off, the proxy changes nothing', () => {
  for (const [name, o] of [
    ['window 0', { conflictWindowMs: 0 }],
    ['conflicts: false', { conflicts: false, conflictWindowMs: WINDOW_MS }],
  ] as const) {
    test(`${name}: concurrent transactions on one item are both forwarded; what happens is up to what is behind`, T, async () => {
      const p = await proxyWith(o);
      const c = client(p.endpoint);
      const shared = unique('shared');
      // Behind this proxy is the test stack's own endpoint, which may cancel one of them: the outcome is its.
      await Promise.allSettled([
        c.send(new TransactWriteItemsCommand({ TransactItems: [put(unique('a')), update(shared)] })),
        c.send(new TransactWriteItemsCommand({ TransactItems: [put(shared), put(unique('b'))] })),
      ]);
      // And right after a transaction, a write to its item goes through (the window would refuse it).
      await c.send(new TransactWriteItemsCommand({ TransactItems: [update(shared)] }));
      await c.send(new PutItemCommand({ TableName: table, Item: key(shared) }));
      assert.deepEqual(p.stats(), {
        requests: 4,
        forwarded: 4,
        transactionConflicts: 0,
        writeConflicts: 0,
        keySchemaLookups: 0,
        injected: { 'throttle-cancel': 0, 'throughput-cancel': 0, 'http-500': 0, 'http-503': 0, delay: 0 },
      });
    });
  }

  test("answers are DynamoDB Local's bytes, errors included", T, async () => {
    const p = await proxyWith();
    const ask = async (endpoint: string, body: unknown) => {
      const r = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': 'DynamoDB_20120810.TransactWriteItems',
          authorization: 'AWS4-HMAC-SHA256 Credential=raw/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
        },
        body: JSON.stringify(body),
      });
      return { status: r.status, type: r.headers.get('content-type'), body: await r.text() };
    };
    const failing = {
      TransactItems: [
        put(unique('n')),
        { ConditionCheck: { TableName: table, Key: key(unique('absent')), ConditionExpression: 'attribute_exists(pk)' } },
      ],
    };
    const viaProxy = await ask(p.endpoint, failing);
    assert.deepEqual(viaProxy, await ask(base, failing));
    assert.equal(viaProxy.status, 400);
    assert.match(viaProxy.body, /"CancellationReasons":\[\{"Code":"None"\},\{"Code":"ConditionalCheckFailed"/);
  });
});

describe('DynamoDB Local and credentials', () => {
  test("a signature over the proxy's Host (or no valid signature at all) passes: DynamoDB Local does not check SigV4", T, async () => {
    const p = await proxyWith();
    const r = await fetch(p.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'DynamoDB_20120810.DescribeTable',
        'x-amz-date': '20260101T000000Z',
        authorization:
          'AWS4-HMAC-SHA256 Credential=forged/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=deadbeef',
      },
      body: JSON.stringify({ TableName: table }),
    });
    assert.equal(r.status, 200);
    // And the SDK's own signed requests, whose signature covers the proxy's Host, pass as well.
    await client(p.endpoint).send(new DescribeTableCommand({ TableName: table }));
  });

  test('-sharedDb: two access keys in two Regions see the same table and items', T, async () => {
    const a = client(base, { accessKeyId: 'FunctionA', region: 'us-east-1' });
    const b = client(base, { accessKeyId: 'FunctionB', region: 'eu-west-1' });
    const k = unique('shared-db');
    await a.send(new PutItemCommand({ TableName: table, Item: key(k) }));
    const seen = await b.send(new DescribeTableCommand({ TableName: table }));
    assert.equal(seen.Table?.TableName, table);
    assert.equal(await exists(b, k), true);
  });
});

describe('recorded calls (lib/local/call-log.ts)', () => {
  test(
    'every request is recorded with its principal, operation, table, index, partition key and transaction items, also when the proxy answers',
    T,
    async () => {
      const calls: AwsCall[] = [];
      const p = await proxyWith({ conflictWindowMs: WINDOW_MS, onCall: (call) => calls.push(call) });
      const c = client(p.endpoint, { accessKeyId: 'BillingFunction' });
      const k = unique('rec');
      await c.send(new PutItemCommand({ TableName: table, Item: { ...key(k), v: { S: 'x' } } }));
      await c.send(
        new QueryCommand({ TableName: table, IndexName: 'by-v', KeyConditionExpression: 'v = :v', ExpressionAttributeValues: { ':v': { S: 'x' } } }),
      );
      const tx = c.send(new TransactWriteItemsCommand({ TransactItems: [put(k, '2'), check(k)] }));
      await forwarded(p, 3);
      await rejection(
        client(p.endpoint, { accessKeyId: 'SweeperFunction' }).send(
          new UpdateItemCommand({ TableName: table, Key: key(k), UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'y' } } }),
        ),
      );
      await tx;
      p.inject({ kind: 'http-500' });
      await rejection(c.send(new DeleteItemCommand({ TableName: table, Key: key(k) })));
      await fetch(p.endpoint, {
        method: 'POST',
        headers: { 'x-amz-target': 'DynamoDB_20120810.ListTables', 'content-type': 'application/x-amz-json-1.0' },
        body: '{}',
      });

      assert.deepEqual(calls, [
        { principal: 'BillingFunction', service: 'dynamodb', operation: 'PutItem', table, partitionKey: k },
        // On an index, the index's partition key (v), as IAM's dynamodb:LeadingKeys has it.
        { principal: 'BillingFunction', service: 'dynamodb', operation: 'Query', table, index: 'by-v', partitionKey: 'x' },
        {
          principal: 'BillingFunction',
          service: 'dynamodb',
          operation: 'TransactWriteItems',
          items: [
            { operation: 'Put', table, partitionKey: k },
            { operation: 'ConditionCheck', table, partitionKey: k },
          ],
        },
        { principal: 'SweeperFunction', service: 'dynamodb', operation: 'UpdateItem', table, partitionKey: k }, // refused by the proxy
        { principal: 'BillingFunction', service: 'dynamodb', operation: 'DeleteItem', table, partitionKey: k }, // answered 500 by the proxy
        { principal: 'anonymous', service: 'dynamodb', operation: 'ListTables' },
      ]);
    },
  );
});

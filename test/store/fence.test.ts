/** The fence on the job row, on real DynamoDB Local (Parts 4, 5, 6); chunk fences: test/store/chunk-fences.test.ts. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TransactWriteItemsCommand, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { heldFence } from '../../lib/core/aws/fence';
import { writeBatch } from '../../lib/core/batch';
import { systemClock } from '../../lib/core/clock';
import { localClients } from '../../lib/core/aws/clients';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { AlreadyDoneError, FenceNotRaisedError, FencedOutError } from '../../lib/core/errors';
import { writeInvoices, type InvoiceWriteDeps } from '../../apps/billing/night';
import * as fence from '../../lib/core/fence';
import { fenceOn } from '../../lib/core/fence';
import { chunkBatches, type NightPlan } from '../../apps/billing/invoices';
import { Attr, JOB_TABLE } from '../../lib/core/schema';
import { claimShard } from '../../lib/core/job-keys';
import { Keys } from '../../apps/billing/keys';
import { namespace, type Namespace } from '../support/stack';
import { DynamoFenceStore, DynamoJobStore } from '../../lib/core/aws/job-store';

const DATE = '2026-09-28';
const JOB = Keys.job(DATE);
const plan: NightPlan = { date: DATE, invoices: 1_000, chunkSize: 500, putsPerTransaction: 99 };

function fenceDeps(ns: Namespace): InvoiceWriteDeps {
  return { jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
}

async function invoiceTokens(ns: Namespace): Promise<Map<string, number>> {
  const out = await ns.clients.ddb.send(new ScanCommand({ TableName: ns.tables.invoices, ConsistentRead: true }));
  return new Map((out.Items ?? []).map((i) => [String(i[Attr.pk]), Number(i[Attr.token])]));
}

async function indexedRows(ns: Namespace): Promise<string[]> {
  const out = await ns.clients.ddb.send(
    new QueryCommand({
      TableName: ns.tables.jobs,
      IndexName: JOB_TABLE.sparseIndex!.name,
      KeyConditionExpression: `${Attr.claimShard} = :s`,
      ExpressionAttributeValues: { ':s': claimShard(Keys.keys.name) },
    }),
  );
  return (out.Items ?? []).map((r) => String(r[Attr.pk]));
}

test('equal token accepted (the holder writes many times); lower token rejected with nothing written; higher token moves the fence', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  const [b0, b1, b2, b3] = [...chunkBatches(plan, 0)];
  await fence.raise(d, JOB, 7, 'A', 2);
  assert.equal((await writeInvoices(d, JOB, 7, b0)).recorded, 99);
  assert.equal((await writeInvoices(d, JOB, 7, b1)).recorded, 99, 'equal token: the current holder, accepted again');

  const old = await fence.raise(d, JOB, 12, 'B', 2);
  assert.equal(old.job?.fence, 7, 'the raise returns the old row');
  assert.equal((await fence.readJob(d, JOB))?.fence, 12, 'a higher token moves the fence');

  await assert.rejects(writeInvoices(d, JOB, 7, b2), (err) => err instanceof FencedOutError && err.fence === 12 && err.token === 7);
  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 198, 'the refused transaction wrote nothing');
  assert.ok(b2.every((inv) => !tokens.has(inv.pk)));

  assert.equal((await writeInvoices(d, JOB, 12, b3)).recorded, 99);
  await assert.rejects(fence.raise(d, JOB, 11, 'Z', 2), FencedOutError, 'a lower raise is refused');
});

test('a takeover that redoes a chunk whose first batches an earlier holder committed records each invoice once', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  const batches = [...chunkBatches(plan, 0)];
  await fence.raise(d, JOB, 1, 'A', 2);
  await writeInvoices(d, JOB, 1, batches[0]);
  await writeInvoices(d, JOB, 1, batches[1]);
  // A stops mid-chunk; B takes over and redoes the whole chunk.
  await fence.raise(d, JOB, 2, 'B', 2);
  let recorded = 0;
  let already = 0;
  for (const b of batches) {
    const r = await writeInvoices(d, JOB, 2, b);
    recorded += r.recorded;
    already += r.alreadyRecorded;
  }
  assert.equal(already, 198, 'the puts A had landed were refused by attribute_not_exists, not written again');
  assert.equal(recorded, 500 - 198);
  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 500, 'each invoice of the chunk exactly once');
  assert.equal([...tokens.values()].filter((t) => t === 1).length, 198, "A's invoices kept A's token");
});

test('the claim marker is findable: the raise puts the row in the sparse index, complete takes it out', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  await fence.raise(d, JOB, 3, 'A', 1);
  assert.deepEqual(await indexedRows(ns), [JOB]);
  await fence.markChunkDone(d, JOB, 3, 0);
  assert.deepEqual(
    (await fence.readChunkFences(d, JOB, 1)).map((c) => c?.done_by),
    [3],
    "progress is on the chunk's own fence item",
  );
  assert.deepEqual(await indexedRows(ns), [JOB], 'the chunk fence item is not in the index');
  await fence.complete(d, JOB, 3);
  assert.deepEqual(await indexedRows(ns), [], 'DONE leaves the index');
  const row = await fence.readJob(d, JOB);
  assert.equal(row?.state, 'DONE');
  assert.equal(row?.claim_shard, undefined);
  await assert.rejects(fence.raise(d, JOB, 4, 'B', 1), AlreadyDoneError, 'a DONE job is not reopened, even by a higher token');
});

test('complete and progress need the fence to still be ours', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  await fence.raise(d, JOB, 1, 'A', 1);
  await fence.raise(d, JOB, 2, 'B', 1);
  await assert.rejects(fence.markChunkDone(d, JOB, 1, 0), FencedOutError);
  await assert.rejects(fence.complete(d, JOB, 1), FencedOutError);
  assert.equal((await fence.readJob(d, JOB))?.state, 'RUNNING');
});

/** The JSON body of a serialized DynamoDB request (a string or bytes, depending on the SDK version). */
function wireBody(request: unknown): { ClientRequestToken?: string; TransactItems?: unknown[] } {
  const body = (request as { body?: unknown }).body;
  return JSON.parse(typeof body === 'string' ? body : Buffer.from(body as Uint8Array).toString('utf8'));
}

/** The ClientRequestToken of every TransactWriteItems this client puts on the wire (read from the signed body). */
function tokensOnTheWire(client: ReturnType<typeof localClients>): string[] {
  const seen: string[] = [];
  client.raw.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'TransactWriteItemsCommand') seen.push(String(wireBody(args.request).ClientRequestToken));
      return next(args);
    },
    { step: 'finalizeRequest', name: 'testTokensOnTheWire', priority: 'low' },
  );
  return seen;
}

test('a transaction cancelled for TransactionConflict on the fence check is retried with the same ClientRequestToken, and the night is correct', async () => {
  const ns = await namespace();
  const client = localClients(ns.endpoints);
  after(() => client.destroy());
  const sent = tokensOnTheWire(client);
  // The first attempt meets an ongoing transaction on the job row it ConditionChecks: answered as the SDK parses
  // AWS's 400 (TransactionCanceledException, reasons in item order), before it reaches DynamoDB Local.
  let injected = 0;
  client.raw.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'TransactWriteItemsCommand' || injected++ > 0) return next(args);
      const items = wireBody(args.request).TransactItems?.length ?? 0;
      const codes = ['TransactionConflict', ...Array.from({ length: items - 1 }, () => 'None')];
      const message = `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`;
      throw new TransactionCanceledException({
        $metadata: { httpStatusCode: 400, requestId: 'injected' },
        message,
        Message: message,
        CancellationReasons: codes.map((Code) => (Code === 'None' ? { Code } : { Code, Message: 'Transaction is ongoing for the item' })),
      });
    },
    { step: 'finalizeRequest', name: 'testInjectConflict', priority: 'low' },
  );
  const slept: number[] = [];
  const d: InvoiceWriteDeps = {
    jobs: new DynamoJobStore(client.ddb, ns.tables.jobs),
    invoices: ns.tables.invoices,
    random: () => 0.5,
    clock: {
      ...systemClock,
      sleep: (ms) => {
        slept.push(ms);
        return systemClock.sleep(ms);
      },
    },
  };
  const [b0, b1] = [...chunkBatches(plan, 0)];
  await fence.raise(d, JOB, 5, 'A', 2);
  const r = await writeInvoices(d, JOB, 5, b0);
  assert.deepEqual(r, { recorded: 99, alreadyRecorded: 0, transactions: 2 }, 'retried once, everything recorded by us');
  assert.equal(injected, 2);
  assert.equal(sent.length, 2);
  assert.equal(sent[1], sent[0], 'the same ClientRequestToken on the wire');
  assert.deepEqual(slept, [12.5], 'one full-jitter backoff (random 0.5 of 25 ms)');
  assert.equal((await writeInvoices(d, JOB, 5, b1)).recorded, 99);
  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 198, 'each invoice once');
  assert.ok(
    [...tokens.values()].every((t) => t === 5),
    "all with the holder's token",
  );
});

test('two batches of one holder ConditionCheck the job row at once: through the conflict proxy one is cancelled (TransactionConflict) and retried', async () => {
  const ns = await namespace();
  const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, conflictWindowMs: 300 });
  const client = localClients({ dynamodb: proxy.endpoint, s3: ns.endpoints.s3 });
  after(async () => {
    client.destroy();
    await proxy.stop();
  });
  const sent = tokensOnTheWire(client);
  const d: InvoiceWriteDeps = {
    jobs: new DynamoJobStore(client.ddb, ns.tables.jobs),
    invoices: ns.tables.invoices,
    clock: systemClock,
    random: () => 0.5,
  };
  const [b0, b1] = [...chunkBatches(plan, 0)];
  await fence.raise(d, JOB, 9, 'A', 2);
  const [r0, r1] = await Promise.all([writeInvoices(d, JOB, 9, b0), writeInvoices(d, JOB, 9, b1)]);
  const conflicts = proxy.stats().transactionConflicts;
  assert.ok(conflicts >= 1, `the proxy cancelled at least one (${conflicts})`);
  assert.equal(r0.recorded + r1.recorded, 198);
  assert.equal(r0.alreadyRecorded + r1.alreadyRecorded, 0, 'a conflict is not "already recorded"');
  assert.equal(sent.length, 2 + conflicts, 'every cancellation sent again');
  assert.equal(new Set(sent).size, 2, "each retry with its own request's ClientRequestToken");
  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 198);
  assert.ok([...tokens.values()].every((t) => t === 9));
});

test('a fence of your own, on any item: raise returns the old item; equal accepted, higher moves it, lower refused by name', async () => {
  const ns = await namespace();
  const f = fenceOn({
    fences: new DynamoFenceStore(ns.clients.ddb),
    table: ns.tables.jobs,
    key: { pk: 'orders#7' },
    clock: systemClock,
    resource: 'orders',
  });
  assert.equal(await f.raise(3, { owner: 'A' }), undefined, 'the first raise creates the fence item');
  assert.deepEqual(await f.raise(3), { pk: 'orders#7', fence: 3, owner: 'A' }, 'equal: accepted, returning what it replaced');
  assert.equal((await f.raise(5, { owner: 'B' }))?.fence, 3);
  await assert.rejects(
    f.raise(4, { owner: 'Z' }),
    (err) => err instanceof FencedOutError && err.resource === 'orders' && err.fence === 5 && err.token === 4,
  );
  assert.deepEqual(await f.read(), { pk: 'orders#7', fence: 5, owner: 'B' }, 'the refused raise changed nothing');
});

test("guard(token) in the caller's own TransactWriteItems with an Update: lands while the fence accepts the token, refused (typed) once a higher one raised it", async () => {
  const ns = await namespace();
  const ddb = ns.clients.ddb;
  const f = fenceOn({ fences: new DynamoFenceStore(ddb), table: ns.tables.jobs, key: { pk: 'accounts#fence' }, clock: systemClock });
  await ddb.send(new PutCommand({ TableName: ns.tables.invoices, Item: { pk: 'acct#1', balance: 100 } }));
  const credit = (token: number) =>
    ddb.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          f.guard(token),
          {
            Update: {
              TableName: ns.tables.invoices,
              Key: { pk: { S: 'acct#1' } },
              UpdateExpression: 'SET balance = balance + :ten, last_token = :t',
              ExpressionAttributeValues: { ':ten': { N: '10' }, ':t': { N: String(token) } },
            },
          },
        ],
      }),
    );
  const balance = async () => (await ddb.send(new GetCommand({ TableName: ns.tables.invoices, Key: { pk: 'acct#1' }, ConsistentRead: true }))).Item;

  const unraised = await credit(1).catch((err: unknown) => err);
  assert.ok(f.fencedOut(unraised, 1) instanceof FenceNotRaisedError, 'an unraised fence lets nothing through, and says it was never raised');
  await f.raise(1);
  await credit(1);
  await credit(1);
  assert.deepEqual(await balance(), { pk: 'acct#1', balance: 120, last_token: 1 }, 'equal token: the holder writes many times');
  await f.raise(2);
  const late = await credit(1).catch((err: unknown) => err);
  const typed = f.fencedOut(late, 1);
  assert.ok(
    typed instanceof FencedOutError && typed.fence === 2 && typed.resource === 'fence',
    'the cancellation read as fenced out, with the fence met',
  );
  assert.equal(f.fencedOut(new Error('boom'), 1), undefined, 'anything else is not');
  assert.deepEqual(await balance(), { pk: 'acct#1', balance: 120, last_token: 1 }, 'the late Update wrote nothing');
  await credit(2);
  assert.equal((await balance())?.balance, 130);
});

test('the generic fenced batch on DynamoDB Local: any items, in two tables; a redo lists what was already recorded; a lower token writes nothing', async () => {
  const ns = await namespace();
  const f = fenceOn({
    fences: new DynamoFenceStore(ns.clients.ddb),
    table: ns.tables.jobs,
    key: { pk: 'ledger#fence' },
    clock: systemClock,
    resource: 'ledger',
  });
  const put = (table: string, id: string, token: number) => ({ table, item: { pk: { S: id }, token: { N: String(token) } } });
  await f.raise(1);
  const first = await writeBatch(heldFence(f, 1), [put(ns.tables.invoices, 'e#1', 1), put(ns.tables.jobs, 'e#2', 1)]);
  assert.equal(first.recorded.length, 2);
  await f.raise(2);
  await assert.rejects(writeBatch(heldFence(f, 1), [put(ns.tables.invoices, 'e#3', 1)]), (err) => err instanceof FencedOutError && err.fence === 2);
  const redo = [put(ns.tables.invoices, 'e#1', 2), put(ns.tables.jobs, 'e#2', 2), put(ns.tables.invoices, 'e#3', 2)];
  const second = await writeBatch(heldFence(f, 2), redo);
  assert.deepEqual(second.alreadyRecorded, redo.slice(0, 2), 'the items holder 1 recorded are listed, not written again');
  assert.deepEqual(second.recorded, [redo[2]]);
  const tokenOf = async (table: string, id: string) =>
    (await ns.clients.ddb.send(new GetCommand({ TableName: table, Key: { pk: id }, ConsistentRead: true }))).Item?.token;
  assert.deepEqual(
    [await tokenOf(ns.tables.invoices, 'e#1'), await tokenOf(ns.tables.jobs, 'e#2'), await tokenOf(ns.tables.invoices, 'e#3')],
    [1, 1, 2],
  );
});

test('the fence comparison is written once, in lib/core/aws/job-store.ts (FENCE_CLAUSE), and used by raise and guard', () => {
  const code = (file: string) =>
    readFileSync(path.join(__dirname, '..', '..', 'lib', 'core', file), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '');
  const comparisons = (text: string) => text.match(/<=\s*:t\b/g)?.length ?? 0;
  assert.equal(comparisons(code('aws/job-store.ts')), 1, 'one `fence <= :t` in the job store on DynamoDB');
  for (const other of ['fence.ts', 'aws/fence.ts', 'batch.ts', 'job.ts', 'lease.ts', 'manifest.ts'])
    assert.equal(comparisons(code(other)), 0, `none in ${other}`);
  assert.equal(fence.FENCE_CLAUSE, 'fence <= :t');
});

/**
 * Each invoice is counted recorded once (issue 18, defect 7). DynamoDB answers a TransactWriteItems repeated with the
 * same ClientRequestToken within 10 minutes with a success and writes nothing (DynamoDB Local does the same; checked
 * first below). A chunk that wrote its invoices and was then retried (its done mark failed past its retries, so the
 * workflow's Retry ran it again) re-sent the same transactions, got those successes, and counted every invoice again in
 * `InvoicesRecorded` and in the run's report. The counts must say what was written: every item once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { billingApp } from '../../apps/billing/app';
import { Keys } from '../../apps/billing/keys';
import { chunkBatches, chunkRange } from '../../apps/billing/invoices';
import { DEFAULTS } from '../../apps/billing/settings';
import { heldFence } from '../../lib/core/aws/fence';
import { systemClock } from '../../lib/core/clock';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import { writeBatch, type FencedPut } from '../../lib/core/batch';
import { jobFence, raiseChunkFences } from '../../lib/core/fence';
import type { FencepostEvent } from '../../lib/core/events';
import { chunkFenceKey } from '../../lib/core/job-keys';
import { BillingMetric } from '../../apps/billing/schema';
import { Attr } from '../../lib/core/schema';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import type * as Runtime from '../../lib/lambda/runtime';
import { runWorkflowLocally } from '../../lib/local/workflow';
import { namespace } from '../support/stack';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const T = { timeout: 180_000 };
const DATE = '2026-09-28';
const SETTINGS = { invoices: 400, chunkSize: 200 };

/** An error the SDK and the core both take as transient (a 500), as the store answers it. */
const serverError = () =>
  Object.assign(new Error('injected: service failing'), { name: 'InternalServerError', $fault: 'server', $metadata: { httpStatusCode: 500 } });

async function scanCount(clients: Clients, table: string): Promise<number> {
  let n = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await clients.ddb.send(new ScanCommand({ TableName: table, Select: 'COUNT', ExclusiveStartKey: start }));
    n += page.Count ?? 0;
    start = page.LastEvaluatedKey;
  } while (start);
  return n;
}

test(
  'the premise: DynamoDB Local answers a transaction repeated with its ClientRequestToken with a success, and writes nothing again',
  T,
  async () => {
    const ns = await namespace();
    const pk = `replay-${randomBytes(4).toString('hex')}`;
    const request = {
      ClientRequestToken: randomBytes(16).toString('hex'),
      TransactItems: [{ Put: { TableName: ns.tables.invoices, Item: { pk: { S: pk } }, ConditionExpression: 'attribute_not_exists(pk)' } }],
    };
    await ns.clients.raw.send(new TransactWriteItemsCommand(request));
    await ns.clients.raw.send(new TransactWriteItemsCommand(request)); // would be cancelled (ConditionalCheckFailed) if applied again
    await assert.rejects(
      ns.clients.raw.send(new TransactWriteItemsCommand({ ...request, ClientRequestToken: randomBytes(16).toString('hex') })),
      (e: Error) => e.name === 'TransactionCanceledException',
      'another token: the condition is evaluated, and the item exists',
    );
  },
);

test('a fenced batch sent again by another call (a retried chunk) counts its items as already recorded, not recorded again', T, async () => {
  const ns = await namespace();
  const deps = { jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock };
  const jobId = `count#${randomBytes(4).toString('hex')}`;
  await raiseChunkFences(deps, jobId, 1, [0]);
  const fence = jobFence(deps, chunkFenceKey(jobId, 0));
  const puts: FencedPut[] = Array.from({ length: 5 }, (_, i) => ({ table: ns.tables.invoices, item: { pk: { S: `${jobId}#inv#${i}` } } }));
  const first = await writeBatch(heldFence(fence, 1), puts);
  const again = await writeBatch(heldFence(fence, 1), puts); // the same holder, token and items, within 10 minutes
  assert.equal(first.recorded.length + again.recorded.length, puts.length, 'recorded, over both calls: what was written');
  assert.equal(again.alreadyRecorded.length, puts.length, 'the second call wrote nothing: all already recorded');
});

test(
  'a night whose chunks were retried after writing, with a lost answer inside one, counts every invoice recorded once: metric and report',
  T,
  async (t) => {
    const ns = await namespace();
    const clients = localClients(ns.endpoints);
    t.after(() => clients.destroy());
    const fenceOf = (chunk: number) => JSON.stringify(chunkFenceKey(Keys.job(DATE), chunk));
    const faults = { lostAnswers: 0, doneMarkFailures: 0, chunk1Sends: 0, chunk1Failures: 0 };
    // Inside the SDK's retries (deserialize): the first transaction is applied, and its answer lost. The SDK sends the
    // same request again, with the same ClientRequestToken.
    clients.raw.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (context.commandName === 'TransactWriteItemsCommand' && faults.lostAnswers === 0) {
          faults.lostAnswers++;
          throw Object.assign(new Error('injected: answer lost'), { name: 'TimeoutError', $metadata: {} });
        }
        return result;
      },
      { step: 'deserialize', name: 'lostAnswer', priority: 'high' },
    );
    // Once per send (initialize, outside the SDK's retries), each past the core's retries, so the invocation ends in
    // TransientStoreError and the workflow's Retry runs the chunk again:
    //  - chunk 0's done mark, once all its invoices are written (the invocation counted them all);
    //  - chunk 1's second transaction, after its first was written (the invocation failed with one batch written).
    clients.raw.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { UpdateExpression?: string; Key?: unknown; TransactItems?: { ConditionCheck?: { Key?: unknown } }[] };
        const isDoneMark = input.UpdateExpression?.includes(Attr.doneBy) && JSON.stringify(input.Key).includes(fenceOf(0));
        if (isDoneMark && faults.doneMarkFailures <= DEFAULT_BACKOFF.retries) {
          faults.doneMarkFailures++;
          throw serverError();
        }
        const isChunk1 =
          context.commandName === 'TransactWriteItemsCommand' && JSON.stringify(input.TransactItems?.[0]?.ConditionCheck?.Key).includes(fenceOf(1));
        if (isChunk1 && ++faults.chunk1Sends > 1 && faults.chunk1Failures <= DEFAULT_BACKOFF.retries) {
          faults.chunk1Failures++;
          throw serverError();
        }
        return next(args);
      },
      { step: 'initialize', name: 'chunkFaults', priority: 'high' },
    );
    // As source mode sets them (lib/local/workflow.ts), before the handlers' modules load: no EMF or logs on stdout here.
    Object.assign(process.env, {
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_TRACE_ENABLED: 'false',
      POWERTOOLS_LOG_LEVEL: process.env.FENCEPOST_LAMBDA_LOG_LEVEL ?? 'SILENT',
    });
    const { metrics } = createRequire(__filename)('../../lib/lambda/runtime') as typeof Runtime;
    const added = t.mock.method(metrics, 'addMetric');
    const events: FencepostEvent[] = [];
    const r = await runWorkflowLocally({
      app: billingApp,
      clients,
      endpoints: ns.endpoints,
      onCall: ns.onCall,
      tables: ns.tables,
      bucket: ns.bucket,
      name: 'retried-chunk',
      input: { jobDate: DATE },
      settings: SETTINGS,
      lambdaCode: 'source',
      onEvent: (e) => events.push(e),
    });

    // The premise: the answer was lost once, both chunks were retried, the night completed.
    assert.equal(faults.lostAnswers, 1);
    assert.equal(faults.doneMarkFailures, DEFAULT_BACKOFF.retries + 1);
    assert.equal(faults.chunk1Failures, DEFAULT_BACKOFF.retries + 1);
    assert.equal(r.history.filter((h) => h.type === 'StateRetried' && h.state === 'BillChunk').length, 2, 'each chunk task was retried once');
    assert.equal(r.endState, 'Completed', JSON.stringify(r.history));

    const written = await scanCount(clients, ns.tables.invoices);
    assert.equal(written, SETTINGS.invoices, 'every invoice written once');
    const metricSum = (name: string) => added.mock.calls.filter((c) => c.arguments[0] === name).reduce((n, c) => n + Number(c.arguments[2]), 0);
    const plan = { date: DATE, ...SETTINGS, putsPerTransaction: DEFAULTS.putsPerTransaction };
    const chunk0 = chunkRange(plan, 0);
    const chunk1FirstBatch = chunkBatches(plan, 1).next().value!.length;
    assert.equal(metricSum(BillingMetric.invoicesRecorded), written, 'InvoicesRecorded: each written invoice once');
    assert.equal(
      metricSum(BillingMetric.invoicesAlreadyRecorded),
      chunk0.end - chunk0.first + chunk1FirstBatch,
      "InvoicesAlreadyRecorded: what the retries found written (all of chunk 0, chunk 1's first batch)",
    );
    const report = events.filter((e) => e.event === 'batch-committed').reduce((n, e) => n + Number((e as { recorded?: number }).recorded), 0);
    assert.equal(report, written, "the run's report (the batches' events): each written invoice once");
  },
);

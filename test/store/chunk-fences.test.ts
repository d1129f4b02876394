/**
 * Chunk fences (docs/DESIGN.md § Chunk fences), on real DynamoDB Local: each chunk checks its own fence item beside
 * the job row, so concurrent chunks of one holder share no item, while every write is still checked against the
 * newest token. The conflict proxy (lib/local/dynamodb-proxy.ts) applies AWS's transaction-conflict rules.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { audit, auditDeps } from '../../apps/billing/audit';
import { billChunk, type BillingDeps, billingDeps, completeNight, type InvoiceWriteDeps, raiseNight, writeInvoices } from '../../apps/billing/night';
import { systemClock } from '../../lib/core/clock';
import { DEFAULT_BACKOFF, classifyCancellation } from '../../lib/core/conditions';
import { DEFAULTS, type BillingConfig } from '../../apps/billing/settings';
import { FencedOutError, RunIncompleteError } from '../../lib/core/errors';
import { Events } from '../../lib/core/events';
import * as fence from '../../lib/core/fence';
import { chunkBatches, chunkRange, renderChunkLines, type NightPlan } from '../../apps/billing/invoices';
import { claim } from '../../lib/core/lease';
import { ManifestWriter } from '../../lib/core/manifest';
import { Attr, JOB_TABLE } from '../../lib/core/schema';
import { claimShard } from '../../lib/core/job-keys';
import { Keys } from '../../apps/billing/keys';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import { sightClaimed } from '../../lib/core/sweeper';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { namespace, type Namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';

const DATE = '2026-09-28';
const JOB = Keys.job(DATE);
const chunkFence = (c: number) => Keys.chunkFence(JOB, c);

function fenceDeps(ns: Namespace, clients: Clients = ns.clients): InvoiceWriteDeps {
  return { jobs: new DynamoJobStore(clients.ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
}

function nightDeps(ns: Namespace, worker: string, clients: Clients = ns.clients): BillingDeps {
  return billingDeps(clients, ns.tables, ns.bucket, systemClock, new Events(worker, systemClock));
}

async function takeLease(ns: Namespace, worker: string, config: BillingConfig, clients: Clients = ns.clients) {
  return claim(
    { locks: new DynamoLockStore(clients.ddb, ns.tables.locks), clock: systemClock, events: new Events(worker, systemClock) },
    Keys.lock(DATE),
    worker,
    config,
  );
}

async function invoiceTokens(ns: Namespace): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let start: Record<string, unknown> | undefined;
  do {
    const page = await ns.clients.ddb.send(new ScanCommand({ TableName: ns.tables.invoices, ConsistentRead: true, ExclusiveStartKey: start }));
    for (const i of page.Items ?? []) out.set(String(i[Attr.pk]), Number(i[Attr.token]));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
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

const fencesOf = async (d: fence.FenceDeps, n: number) => (await fence.readChunkFences(d, JOB, n)).map((c) => c?.fence);

test('the raise creates every chunk fence at the first token, raises them all for the next, and learns the progress from them; chunk items stay out of the sparse index', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  const first = await fence.raise(d, JOB, 3, 'A', 4);
  assert.equal(first.job, undefined, 'a new night: no old row');
  assert.deepEqual([...first.chunksDone], []);
  const items = await fence.readChunkFences(d, JOB, 4);
  assert.deepEqual(
    items.map((c) => [c?.pk, c?.chunk, c?.fence, c?.done_by]),
    [0, 1, 2, 3].map((c) => [chunkFence(c), c, 3, undefined]),
  );
  assert.deepEqual(await indexedRows(ns), [JOB], 'only the job row is claimed: chunk fence items carry no claim_shard');
  const { sightings } = await sightClaimed(
    {
      job: Keys.keys.name,
      jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs),
      locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks),
      clock: systemClock,
    },
    { leaseMs: 1000 },
  );
  assert.deepEqual(
    sightings.map((s) => s.jobId),
    [JOB],
    'the sweeper sees the job row only',
  );

  await fence.markChunkDone(d, JOB, 3, 1);
  await fence.markChunkDone(d, JOB, 3, 2);
  const second = await fence.raise(d, JOB, 5, 'B', 4);
  assert.equal(second.job?.fence, 3);
  assert.deepEqual([...second.chunksDone].sort(), [1, 2], 'the progress comes back with the old chunk items (ALL_OLD), no second read');
  assert.deepEqual(await fencesOf(d, 4), [5, 5, 5, 5]);
  assert.deepEqual(
    (await fence.readChunkFences(d, JOB, 4)).map((c) => c?.done_by),
    [undefined, 3, 3, undefined],
    'a raise keeps the done marks',
  );

  await assert.rejects(fence.raise(d, JOB, 4, 'Z', 4), FencedOutError, 'a lower raise is refused at the job row ...');
  assert.deepEqual(await fencesOf(d, 4), [5, 5, 5, 5], '... before it touches any chunk fence');
});

test('a zombie with an older token is refused on a chunk whose fence was raised, with nothing written; its progress and complete are refused too', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  const plan: NightPlan = { date: DATE, invoices: 396, chunkSize: 198, putsPerTransaction: 99 };
  const [c0, c1] = [[...chunkBatches(plan, 0)], [...chunkBatches(plan, 1)]];
  await fence.raise(d, JOB, 7, 'A', 2);
  assert.equal((await writeInvoices(d, chunkFence(0), 7, c0[0])).recorded, 99);
  await fence.raise(d, JOB, 12, 'B', 2);

  await assert.rejects(writeInvoices(d, chunkFence(0), 7, c0[1]), (err) => err instanceof FencedOutError && err.token === 7 && err.fence === 12);
  await assert.rejects(writeInvoices(d, chunkFence(1), 7, c1[0]), (err) => err instanceof FencedOutError && err.fence === 12);
  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 99, 'the refused transactions wrote nothing');
  await assert.rejects(fence.markChunkDone(d, JOB, 7, 0), FencedOutError);
  await assert.rejects(fence.complete(d, JOB, 7), FencedOutError);

  assert.equal((await writeInvoices(d, chunkFence(0), 12, c0[0])).alreadyRecorded, 99, 'B redoes the batch: already recorded, not twice');
  assert.equal((await writeInvoices(d, chunkFence(0), 12, c0[1])).recorded, 99);
  assert.deepEqual(
    (await fence.readChunkFences(d, JOB, 2)).map((c) => c?.done_by),
    [undefined, undefined],
    'the zombie marked nothing done',
  );
});

test('complete needs every chunk fence item to say done: DONE never stands over a missing chunk', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  await fence.raise(d, JOB, 1, 'A', 2);
  await fence.markChunkDone(d, JOB, 1, 0);
  await assert.rejects(fence.complete(d, JOB, 1), (err) => err instanceof RunIncompleteError && err.chunksNotDone.join() === '1');
  assert.equal((await fence.readJob(d, JOB))?.state, 'RUNNING');
  await fence.markChunkDone(d, JOB, 1, 1);
  await fence.complete(d, JOB, 1);
  assert.equal((await fence.readJob(d, JOB))?.state, 'DONE');
  assert.deepEqual(await indexedRows(ns), []);
});

test('an interrupted raise (job row + chunk 0 raised, chunks 1 and 2 not yet): the zombie is refused on the job row and on chunk 0, may still finish chunk 1 before B writes anything, and the night is right', async () => {
  const ns = await namespace();
  const d = fenceDeps(ns);
  const config: BillingConfig = { ...DEFAULTS, invoices: 594, chunkSize: 198 };
  const plan: NightPlan = { date: DATE, invoices: 594, chunkSize: 198, putsPerTransaction: 99 };
  const batches = (c: number) => [...chunkBatches(plan, c)];

  // A (token 1) raised everything, wrote chunk 0's first batch and chunk 1's first batch, then froze.
  const a = await takeLease(ns, 'A', config);
  await fence.raise(d, JOB, a.token, 'A', 3);
  const aManifest = (
    await ManifestWriter.raiseAt(
      { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock },
      Keys.manifestPlace(DATE),
      JOB,
      a.token,
    )
  ).writer;
  await writeInvoices(d, chunkFence(0), a.token, batches(0)[0]);
  await writeInvoices(d, chunkFence(1), a.token, batches(1)[0]);
  await a.release(); // (stands for "A's lease ran out": B may claim at once)

  // B (token 2) raises the job row FIRST, then chunk 0's fence, and is interrupted there.
  const b = await takeLease(ns, 'B', config);
  assert.equal(b.token, 2);
  await fence.raiseJobRow(d, JOB, b.token, 'B', 3);
  await fence.raiseChunkFences(d, JOB, b.token, [0]);
  assert.deepEqual(await fencesOf(d, 3), [2, 1, 1], 'half raised');

  // Zombie A wakes. Every act on the job row is refused; so is chunk 0.
  await assert.rejects(fence.complete(d, JOB, a.token), FencedOutError, 'complete: the job row was raised first');
  await assert.rejects(writeInvoices(d, chunkFence(0), a.token, batches(0)[1]), FencedOutError);
  // Chunk 1's fence is still A's: A's write lands there, BEFORE any write of B (B writes nothing until every fence
  // is raised). That is the same history as A writing it before B's claim: correct invoices, each once.
  assert.equal((await writeInvoices(d, chunkFence(1), a.token, batches(1)[1])).recorded, 99);
  const object = await aManifest.putChunkObject(1, [...renderChunkLines(plan, 1, a.token)].join(''));
  await aManifest.commitChunk(1, { key: object.key, etag: object.etag, records: 198 });
  await fence.markChunkDone(d, JOB, a.token, 1); // a whole chunk, committed: A may record it done

  // B resumes its raise: it learns chunk 1 is done from the old chunk item, and from now on A is refused everywhere.
  const rest = await fence.raiseChunkFences(d, JOB, b.token, [1, 2]);
  assert.equal(rest.get(1)?.done_by, a.token);
  assert.equal(rest.get(2)?.done_by, undefined);
  await assert.rejects(writeInvoices(d, chunkFence(2), a.token, batches(2)[0]), FencedOutError);
  await assert.rejects(fence.markChunkDone(d, JOB, a.token, 2), FencedOutError);

  // B finishes the night on the billing path: manifest raise, the chunks left (0 and 2), complete.
  const deps = nightDeps(ns, 'B');
  const bManifest = (
    await ManifestWriter.raiseAt(
      { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock },
      Keys.manifestPlace(DATE),
      JOB,
      b.token,
    )
  ).writer;
  const r0 = await billChunk(deps, b, bManifest, DATE, config, 0);
  assert.deepEqual([r0.recorded, r0.alreadyRecorded], [99, 99], "chunk 0: A's first batch already recorded");
  const r2 = await billChunk(deps, b, bManifest, DATE, config, 2);
  assert.deepEqual([r2.recorded, r2.alreadyRecorded], [198, 0]);
  await completeNight(deps, b, bManifest, DATE);
  await b.release();

  const tokens = await invoiceTokens(ns);
  assert.equal(tokens.size, 594);
  assert.equal([...tokens.values()].filter((t) => t === 1).length, 99 + 198, "A's token on chunk 0's first batch and all of chunk 1");
  const report = await audit(auditDeps(ns.clients, ns.tables, ns.bucket), DATE, 594);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
  assert.equal(report.state, 'DONE');
});

/**
 * One holder bills `chunks` chunks at once through the conflict proxy. `shared`: every transaction checks the job row
 * (the single-row fence); otherwise each checks its chunk's fence item (the billing path, billChunk).
 */
async function concurrentNight(shared: boolean) {
  const ns = await namespace();
  const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, conflictWindowMs: 100 });
  const clients = localClients({ dynamodb: proxy.endpoint, s3: ns.endpoints.s3 });
  after(async () => {
    clients.destroy();
    await proxy.stop();
  });
  const config: BillingConfig = { ...DEFAULTS, invoices: 4 * 297, chunkSize: 297 }; // 4 chunks of 3 transactions
  const plan: NightPlan = { date: DATE, invoices: config.invoices, chunkSize: config.chunkSize, putsPerTransaction: 99 };
  const deps = nightDeps(ns, 'H', clients);
  const lease = await takeLease(ns, 'H', config, clients);
  lease.startHeartbeat();
  const night = await raiseNight(deps, lease, DATE, config);
  assert.deepEqual(night.chunksToDo, [0, 1, 2, 3]);
  const t0 = performance.now();
  const results = await Promise.all(
    night.chunksToDo.map(async (c) => {
      if (!shared) return { ...(await billChunk(deps, lease, night.manifest, DATE, config, c)), gaveUp: false };
      let transactions = 0;
      try {
        for (const batch of chunkBatches(plan, c))
          transactions += (await writeInvoices(fenceDeps(ns, clients), JOB, lease.token, batch)).transactions;
        return { recorded: chunkRange(plan, c).end - chunkRange(plan, c).first, alreadyRecorded: 0, transactions, gaveUp: false };
      } catch (err) {
        // The retries ran out on conflicts alone: one fence item serializes the night.
        assert.ok(err instanceof TransactionCanceledException && classifyCancellation(err.CancellationReasons).kind === 'transient', String(err));
        return { recorded: 0, alreadyRecorded: 0, transactions, gaveUp: true };
      }
    }),
  );
  const ms = performance.now() - t0;
  await lease.stopHeartbeat();
  const transactions = results.reduce((n, r) => n + r.transactions, 0);
  return { ns, proxy, ms, transactions, results, lease, deps, night };
}

test('concurrent chunks of one holder through the conflict proxy: with chunk fences no conflict at all; with the single job-row fence they conflict', async (t) => {
  const own = await concurrentNight(false);
  const ownStats = own.proxy.stats();
  assert.equal(ownStats.transactionConflicts, 0, 'chunks share no item: no transaction is cancelled');
  assert.equal(ownStats.writeConflicts, 0, 'and no single-item write (raise, progress) meets a transaction');
  assert.equal(own.transactions, 4 * 3, 'exactly 3 transactions per chunk, none sent twice');
  assert.ok(own.results.every((r) => r.recorded === 297 && r.alreadyRecorded === 0));
  await completeNight(own.deps, own.lease, own.night.manifest, DATE);
  await own.lease.release();
  const report = await audit(auditDeps(own.ns.clients, own.ns.tables, own.ns.bucket), DATE, 4 * 297);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
  assert.equal(report.state, 'DONE');

  const row = await concurrentNight(true);
  const rowStats = row.proxy.stats();
  assert.ok(
    rowStats.transactionConflicts >= 1,
    `one fence item for the night: concurrent chunks cancel each other (${rowStats.transactionConflicts})`,
  );
  const gaveUp = row.results.filter((r) => r.gaveUp).length;
  const tokens = await invoiceTokens(row.ns);
  assert.ok(
    [...tokens.values()].every((tk) => tk === row.lease.token),
    "whatever landed is the holder's, each once (a Map has no duplicates)",
  );
  if (gaveUp === 0) assert.equal(tokens.size, 4 * 297, 'still correct, only serialized');
  t.diagnostic(
    `4 chunks x 3 transactions at once, 100 ms conflict window: chunk fences ${own.transactions} transactions, 0 conflicts, ${own.ms.toFixed(0)} ms; ` +
      `job-row fence ${rowStats.transactionConflicts} conflicts, ${gaveUp} of 4 chunks gave up after ${DEFAULT_BACKOFF.retries} retries, ${row.ms.toFixed(0)} ms`,
  );
});

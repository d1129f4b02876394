/**
 * The nightly billing job, composed from the lease, the fence and the manifest (reference Parts 2, 4 and 5).
 *
 *   1. claim the lease, clock-free (lease.ts): the token is the claim's epoch;
 *   2. raise the fences FIRST: the job row, then every chunk fence, learning the progress from the old chunk items
 *      (fence.ts; docs/DESIGN.md § Chunk fences);
 *   3. raise the manifest's token (manifest.ts);
 *   4. renew from this process while working;
 *   5. for each chunk still to do: fenced batches of 1 check on THE CHUNK'S fence item + ≤ 99 puts, then the chunk
 *      object, then the manifest commit (If-Match), then the chunk is marked done on its fence item;
 *   6. manifest DONE, then job row DONE (it leaves the sparse index), then release.
 * Before every action the holder checks its stop time; that keeps overlap rare. What keeps the data correct is the
 * fence: a write carrying a lower token is refused by the store, whatever the holder believes.
 */
import type { TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { fencedTransaction, writeBatch } from '../../core/batch';
import type { Clock } from '../../core/clock';
import type { BillingConfig } from '../../core/config';
import { AlreadyDoneError, FencedOutError, LeaseLostError, StopTimePassedError } from '../../core/errors';
import type { Events } from '../../core/events';
import * as fence from '../../core/fence';
import { chunkBatches, chunkCount, chunkRange, invoicePut, renderChunkLines, type Invoice, type NightPlan } from './invoices';
import { claim, type Lease } from '../../core/lease';
import { ManifestWriter } from '../../core/manifest';
import { Keys, type TableNames } from '../../core/schema';
import { releaseQuietly } from '../../core/with-lease';

export interface BillingDeps {
  readonly ddb: DynamoDBDocumentClient;
  readonly s3: S3Client;
  readonly tables: TableNames;
  readonly bucket: string;
  readonly clock: Clock;
  readonly events: Events;
}

/** Where a holder has just passed its stop-time check and is about to act: the gap a pause can land in (Part 4). */
export interface CheckPoint {
  readonly step: 'batch' | 'chunk-commit' | 'complete';
  readonly chunk?: number;
  readonly batch?: number;
}

export interface BillingHooks {
  /** Called right after a passed check, before the act. Fault injection uses it to stop the process there. */
  afterCheck?(point: CheckPoint): void | Promise<void>;
}

export interface BillingRun {
  readonly date: string;
  readonly worker: string;
  readonly config: BillingConfig;
  readonly hooks?: BillingHooks;
}

export type Outcome = 'completed' | 'already-done' | 'lost-lease' | 'fenced-out';

export interface BillingSummary {
  jobId: string;
  worker: string;
  token: number | undefined;
  outcome: Outcome;
  invoicesRecorded: number;
  invoicesAlreadyRecorded: number;
  transactions: number;
  fencedRejections: number;
  chunksCommitted: number;
  seconds: number;
  /** Why the run stopped, when it did not complete. */
  reason?: string;
}

/** What the raise learned: the chunks still to do (from the old row's progress) and the manifest writer. */
export interface RaisedNight {
  readonly chunksToDo: number[];
  readonly manifest: ManifestWriter;
  readonly previousFence: number | undefined;
}

export interface ChunkResult {
  readonly recorded: number;
  readonly alreadyRecorded: number;
  readonly transactions: number;
}

function planOf(date: string, config: BillingConfig): NightPlan {
  return { date, invoices: config.invoices, chunkSize: config.chunkSize, putsPerTransaction: config.putsPerTransaction };
}

function fenceDepsOf(deps: BillingDeps): InvoiceWriteDeps {
  return { ddb: deps.ddb, jobs: deps.tables.jobs, invoices: deps.tables.invoices, clock: deps.clock };
}

/** What writing invoices under a job's fence needs: the job's fences, and the invoice table. */
export interface InvoiceWriteDeps extends fence.FenceDeps {
  readonly invoices: string;
}

/** What a batch of invoices did, as counts (the summary's and the events' unit). */
export interface InvoiceBatchResult {
  readonly recorded: number;
  readonly alreadyRecorded: number;
  readonly transactions: number;
}

/**
 * A batch of invoices (at most 99) written under the fence item `fenceKey` (the chunk's, or a job row for a night
 * fenced on its row alone): the generic fenced write (batch.ts), each invoice recorded once with our token.
 */
export async function writeInvoices(deps: InvoiceWriteDeps, fenceKey: string, token: number, batch: readonly Invoice[]): Promise<InvoiceBatchResult> {
  const r = await writeBatch(
    fence.jobFence(deps, fenceKey),
    token,
    batch.map((inv) => invoicePut(deps.invoices, inv, token)),
  );
  return { recorded: r.recorded.length, alreadyRecorded: r.alreadyRecorded.length, transactions: r.transactions };
}

/** The one transaction writeInvoices sends first for this batch (bench/waste.ts and bench/aws-model.ts measure it). */
export function invoiceTransaction(
  deps: InvoiceWriteDeps,
  fenceKey: string,
  token: number,
  batch: readonly Invoice[],
): TransactWriteItemsCommandInput {
  return fencedTransaction(
    fence.jobFence(deps, fenceKey),
    token,
    batch.map((inv) => invoicePut(deps.invoices, inv, token)),
  );
}

function manifestDepsOf(deps: BillingDeps) {
  return { s3: deps.s3, bucket: deps.bucket, clock: deps.clock };
}

/**
 * Raise the fence first (Part 4): the job row, then every chunk fence, then the manifest, before reading or writing
 * anything else. `fence-raised` means every fence item is raised: no write of an older token lands after it.
 * Throws AlreadyDoneError for a DONE night and FencedOutError if a higher token got there first.
 */
export async function raiseNight(deps: BillingDeps, lease: Lease, date: string, config: BillingConfig): Promise<RaisedNight> {
  const plan = planOf(date, config);
  lease.check();
  const { job: old, chunksDone } = await fence.raise(fenceDepsOf(deps), Keys.job(date), lease.token, lease.holder, chunkCount(plan));
  deps.events.emit('fence-raised', { token: lease.token, previousFence: old?.fence, previousState: old?.state, chunkFences: chunkCount(plan) });
  lease.check();
  const { writer } = await ManifestWriter.raise(manifestDepsOf(deps), Keys.manifestPlace(date), Keys.job(date), lease.token);
  deps.events.emit('manifest-raised', { token: lease.token });
  const chunksToDo = Array.from({ length: chunkCount(plan) }, (_, c) => c).filter((c) => !chunksDone.has(c));
  return { chunksToDo, manifest: writer, previousFence: old?.fence };
}

/** A writer for the manifest a holder raised in another process (the workflow's chunk Lambdas). */
export function resumeManifest(deps: BillingDeps, date: string, token: number): ManifestWriter {
  return ManifestWriter.resume(manifestDepsOf(deps), Keys.manifestPlace(date), Keys.job(date), token);
}

/**
 * One chunk: fenced batches (check before each) on the chunk's own fence item, the chunk object under our token's
 * key, the manifest commit (If-Match), then the chunk is marked done on its fence item. Touches no item another
 * chunk touches, so chunks run concurrently without conflicts (docs/DESIGN.md § Chunk fences). Safe to redo: recorded invoices are refused by
 * attribute_not_exists and counted as already recorded; the object and the manifest entry are rewritten.
 */
export async function billChunk(
  deps: BillingDeps,
  lease: Lease,
  manifest: ManifestWriter,
  date: string,
  config: BillingConfig,
  chunk: number,
  hooks?: BillingHooks,
): Promise<ChunkResult> {
  const plan = planOf(date, config);
  const jobId = Keys.job(date);
  const chunkFence = Keys.chunkFence(jobId, chunk);
  const fenceDeps = fenceDepsOf(deps);
  let recorded = 0;
  let alreadyRecorded = 0;
  let transactions = 0;
  let batchNo = 0;
  for (const batch of chunkBatches(plan, chunk)) {
    lease.check();
    await hooks?.afterCheck?.({ step: 'batch', chunk, batch: batchNo });
    const r = await writeInvoices(fenceDeps, chunkFence, lease.token, batch).catch((err) => {
      if (err instanceof FencedOutError) deps.events.emit('batch-rejected', { token: lease.token, chunk, batch: batchNo, fence: err.fence });
      throw err;
    });
    recorded += r.recorded;
    alreadyRecorded += r.alreadyRecorded;
    transactions += r.transactions;
    deps.events.emit('batch-committed', {
      token: lease.token,
      chunk,
      batch: batchNo,
      recorded: r.recorded,
      alreadyRecorded: r.alreadyRecorded,
      transactions: r.transactions,
      first: batch[0].index,
    });
    batchNo++;
  }
  lease.check();
  const object = await manifest.putChunkObject(chunk, [...renderChunkLines(plan, chunk, lease.token)].join(''));
  lease.check();
  await hooks?.afterCheck?.({ step: 'chunk-commit', chunk });
  const { first, end } = chunkRange(plan, chunk);
  await manifest.commitChunk(chunk, { key: object.key, etag: object.etag, token: lease.token, records: end - first }).catch((err) => {
    if (err instanceof FencedOutError) deps.events.emit('commit-rejected', { token: lease.token, chunk, fence: err.fence });
    throw err;
  });
  await fence.markChunkDone(fenceDeps, jobId, lease.token, chunk);
  deps.events.emit('chunk-committed', { token: lease.token, chunk, key: object.key, recorded, alreadyRecorded });
  return { recorded, alreadyRecorded, transactions };
}

/**
 * Complete: the manifest first, then the job row, which is the authority for DONE (it leaves the sparse index), once
 * every chunk fence item says done.
 */
export async function completeNight(deps: BillingDeps, lease: Lease, manifest: ManifestWriter, date: string, hooks?: BillingHooks): Promise<void> {
  lease.check();
  await hooks?.afterCheck?.({ step: 'complete' });
  await manifest.markDone();
  await fence.complete(fenceDepsOf(deps), Keys.job(date), lease.token);
  deps.events.emit('completed', { token: lease.token, jobId: Keys.job(date) });
}

/** The outcome a holder reports for an error that means "stop, someone else owns the job"; undefined otherwise. */
export function outcomeOf(err: unknown): Exclude<Outcome, 'completed'> | undefined {
  if (err instanceof AlreadyDoneError) return 'already-done';
  if (err instanceof FencedOutError) return 'fenced-out';
  if (err instanceof LeaseLostError || err instanceof StopTimePassedError) return 'lost-lease';
  return undefined;
}

/** The direct engine: the whole night in this process. The cloud workflow runs the same steps as Lambdas. */
export async function runBilling(deps: BillingDeps, run: BillingRun): Promise<BillingSummary> {
  const started = deps.clock.monotonicMs();
  const jobId = Keys.job(run.date);
  const summary: BillingSummary = {
    jobId,
    worker: run.worker,
    token: undefined,
    outcome: 'completed',
    invoicesRecorded: 0,
    invoicesAlreadyRecorded: 0,
    transactions: 0,
    fencedRejections: 0,
    chunksCommitted: 0,
    seconds: 0,
  };
  const finish = (outcome: Outcome, reason?: string) => {
    summary.outcome = outcome;
    if (reason) summary.reason = reason;
    summary.seconds = Math.round(deps.clock.monotonicMs() - started) / 1000;
    return summary;
  };

  // 0. A DONE night needs no lease: say so at once (a duplicate trigger after the run finished).
  const before = await fence.readJob(fenceDepsOf(deps), jobId);
  if (before?.state === 'DONE') {
    deps.events.emit('already-done', { jobId, fence: before.fence });
    return finish('already-done');
  }

  // 1. claim the lease, clock-free; 4. renew from this process while working
  const lease = await claim(
    { ddb: deps.ddb, table: deps.tables.locks, clock: deps.clock, events: deps.events },
    Keys.lock(run.date),
    run.worker,
    run.config,
  );
  summary.token = lease.token;
  lease.startHeartbeat();
  try {
    // 2. + 3. raise the fence first, then the manifest
    const night = await raiseNight(deps, lease, run.date, run.config);
    // 5. the chunks still to do
    for (const chunk of night.chunksToDo) {
      const r = await billChunk(deps, lease, night.manifest, run.date, run.config, chunk, run.hooks);
      summary.invoicesRecorded += r.recorded;
      summary.invoicesAlreadyRecorded += r.alreadyRecorded;
      summary.transactions += r.transactions;
      summary.chunksCommitted++;
    }
    // 6. complete, then release
    await completeNight(deps, lease, night.manifest, run.date, run.hooks);
    await lease.release();
    return finish('completed');
  } catch (err) {
    const outcome = outcomeOf(err);
    if (outcome === 'fenced-out') summary.fencedRejections++;
    if (outcome === 'already-done') deps.events.emit('already-done', { jobId, fence: (err as AlreadyDoneError).fence });
    // Lost, fenced or done: stop and discard local state (Part 4). Anything else: fail loudly. Either way give the
    // lease back conditionally, so the next holder need not wait it out; it changes nothing if it moved on.
    await releaseQuietly(lease, deps.events);
    if (outcome) return finish(outcome, outcome === 'already-done' ? undefined : (err as Error).message);
    throw err;
  }
}

/**
 * The nightly billing job: core's fenced run (lib/core/job.ts: claim, raise every fence first, the chunks, complete)
 * with billing's chunk work (reference Parts 2, 4 and 5):
 *
 *   for each chunk still to do: fenced batches of 1 check on THE CHUNK'S fence item + ≤ 99 puts, then the chunk
 *   object, then the manifest commit (If-Match); core then marks the chunk done on its fence item.
 *
 * Before every action the holder checks its stop time; that keeps overlap rare. What keeps the data correct is the
 * fence: a write carrying a lower token is refused by the store, whatever the holder believes.
 */
import type { TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import {
  awsStores,
  FencedOutError,
  completeRun,
  fencedTransaction,
  heldFence,
  jobFence,
  raiseRun,
  runChunk,
  runJob,
  writeBatch,
  type ChunkWork,
  type Clients,
  type Clock,
  type Events,
  type HeldFence,
  type FenceDeps,
  type JobRun,
  type Lease,
  type ManifestStore,
  type ManifestWriter,
  type Outcome,
  type RunDeps,
  type RunHooks,
} from '../../lib/core/internal';
import type { BillingTables } from './schema';
import { chunkBatches, chunkCount, chunkRange, invoicePut, renderChunkLines, type Invoice, type NightPlan } from './invoices';
import { Keys } from './keys';
import type { BillingConfig } from './settings';

export type { Outcome };

/** What a billing night needs: core's run deps (its stores, the clock, the events), the manifest, the invoice table. */
export interface BillingDeps extends RunDeps {
  /** The night's manifest bucket's store: billing always keeps a manifest. */
  readonly manifests: ManifestStore;
  /** The invoice table's name: the fenced batches put the invoices there. */
  readonly invoices: string;
}

/** Billing's deps on DynamoDB and S3: the stores built once from the clients and the tables' and bucket's names. */
export function billingDeps(clients: Pick<Clients, 'ddb' | 's3'>, tables: BillingTables, bucket: string, clock: Clock, events: Events): BillingDeps {
  return { ...awsStores(clients, { locks: tables.locks, jobs: tables.jobs, bucket }), invoices: tables.invoices, clock, events };
}

export interface BillingRun {
  readonly date: string;
  readonly worker: string;
  readonly config: BillingConfig;
  readonly hooks?: RunHooks;
}

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

/** What the raise learned: the chunks still to do (from the old chunk items' progress) and the manifest writer. */
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

/** The night as core's run: billing's keys, the date, the night's chunks. */
function nightRun(date: string, config: BillingConfig): JobRun {
  return { keys: Keys.keys, date, chunks: chunkCount(planOf(date, config)) };
}

/** What writing invoices under a job's fence needs: the job's fences, and the invoice table. */
export interface InvoiceWriteDeps extends FenceDeps {
  readonly invoices: string;
}

/** What a batch of invoices did, as counts (the summary's and the events' unit). */
export interface InvoiceBatchResult {
  readonly recorded: number;
  readonly alreadyRecorded: number;
  readonly transactions: number;
}

async function writeThrough(fence: HeldFence, invoices: string, batch: readonly Invoice[]): Promise<InvoiceBatchResult> {
  const r = await writeBatch(
    fence,
    batch.map((inv) => invoicePut(invoices, inv, fence.token)),
  );
  return { recorded: r.recorded.length, alreadyRecorded: r.alreadyRecorded.length, transactions: r.transactions };
}

/**
 * A batch of invoices (at most 99) written under the fence item `fenceKey` (the chunk's, or a job row for a night
 * fenced on its row alone): the generic fenced write (core's writeBatch), each invoice recorded once with our token.
 */
export function writeInvoices(deps: InvoiceWriteDeps, fenceKey: string, token: number, batch: readonly Invoice[]): Promise<InvoiceBatchResult> {
  return writeThrough(heldAt(deps, fenceKey, token), deps.invoices, batch);
}

/** The fence item `fenceKey` held with `token`: for the writes and benchmarks here that name a token, not a lease. */
const heldAt = (deps: InvoiceWriteDeps, fenceKey: string, token: number) => heldFence(jobFence(deps, fenceKey), token);

/** The one transaction writeInvoices sends first for this batch (bench/waste.ts and bench/aws-model.ts measure it). */
export function invoiceTransaction(
  deps: InvoiceWriteDeps,
  fenceKey: string,
  token: number,
  batch: readonly Invoice[],
): TransactWriteItemsCommandInput {
  return fencedTransaction(
    heldAt(deps, fenceKey, token),
    batch.map((inv) => invoicePut(deps.invoices, inv, token)),
  );
}

/**
 * Raise the fence first, so a stale holder's later writes are refused: core's raiseRun (the job row, then every chunk fence, then the manifest).
 * Throws AlreadyDoneError for a DONE night and FencedOutError if a higher token got there first.
 */
export async function raiseNight(deps: BillingDeps, lease: Lease, date: string, config: BillingConfig): Promise<RaisedNight> {
  const raised = await raiseRun(deps, nightRun(date, config), lease);
  return { chunksToDo: [...raised.chunksToDo], manifest: raised.manifest!, previousFence: raised.previous?.fence };
}

/**
 * Billing's work on one chunk (core's runChunk marks it done after): fenced batches (check before each) on the
 * chunk's own fence item, the chunk object under our token's key, the manifest commit (If-Match). Touches no item
 * another chunk touches, so chunks run concurrently without conflicts (docs/DESIGN.md § Chunk fences). Safe to
 * redo: recorded invoices are refused by attribute_not_exists and counted as already recorded; the object and the
 * manifest entry are rewritten.
 * @param invoices - the invoice table
 * @param tally - counts each batch as it commits, so a chunk that fails later still says what it wrote @default none
 */
export function billWork(
  events: Events,
  invoices: string,
  date: string,
  config: BillingConfig,
  tally?: { -readonly [K in keyof ChunkResult]: number },
): ChunkWork<ChunkResult> {
  const plan = planOf(date, config);
  return async ({ lease, fence, manifest, chunk, hooks }) => {
    if (!manifest) throw new Error('billing writes each chunk to the manifest: its run must have one');
    let recorded = 0;
    let alreadyRecorded = 0;
    let transactions = 0;
    let batchNo = 0;
    for (const batch of chunkBatches(plan, chunk)) {
      lease.check();
      await hooks?.afterCheck?.({ step: 'batch', chunk, batch: batchNo });
      const r = await writeThrough(fence, invoices, batch).catch((err) => {
        if (err instanceof FencedOutError) events.emit('batch-rejected', { token: lease.token, chunk, batch: batchNo, fence: err.fence });
        throw err;
      });
      recorded += r.recorded;
      alreadyRecorded += r.alreadyRecorded;
      transactions += r.transactions;
      if (tally) {
        tally.recorded += r.recorded;
        tally.alreadyRecorded += r.alreadyRecorded;
        tally.transactions += r.transactions;
      }
      events.emit('batch-committed', {
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
    await manifest.commitChunk(chunk, { key: object.key, etag: object.etag, records: end - first }).catch((err) => {
      if (err instanceof FencedOutError) events.emit('commit-rejected', { token: lease.token, chunk, fence: err.fence });
      throw err;
    });
    events.emit('chunk-committed', { token: lease.token, chunk, key: object.key, recorded, alreadyRecorded });
    return { recorded, alreadyRecorded, transactions };
  };
}

/** One chunk of the night under a held lease: billing's work, then the done mark (core's runChunk). */
export function billChunk(
  deps: BillingDeps,
  lease: Lease,
  manifest: ManifestWriter,
  date: string,
  config: BillingConfig,
  chunk: number,
  hooks?: RunHooks,
): Promise<ChunkResult> {
  const work = billWork(deps.events, deps.invoices, date, config);
  return runChunk(deps, { keys: Keys.keys, date }, { lease, manifest, chunk, hooks }, work);
}

/** Complete (core's completeRun): once every chunk fence item says done, the manifest DONE, then the job row. */
export function completeNight(deps: BillingDeps, lease: Lease, manifest: ManifestWriter, date: string, hooks?: RunHooks): Promise<void> {
  return completeRun(deps, { keys: Keys.keys, date }, lease, { manifest, hooks });
}

/** The direct engine: the whole night in this process (core's runJob with billing's work). */
export async function runBilling(deps: BillingDeps, run: BillingRun): Promise<BillingSummary> {
  const night = { ...nightRun(run.date, run.config), holder: run.worker, config: run.config, hooks: run.hooks };
  const s = await runJob(deps, night, billWork(deps.events, deps.invoices, run.date, run.config));
  const sum = (f: (r: ChunkResult) => number) => s.results.reduce((n, r) => n + f(r), 0);
  return {
    jobId: s.jobId,
    worker: run.worker,
    token: s.token,
    outcome: s.outcome,
    invoicesRecorded: sum((r) => r.recorded),
    invoicesAlreadyRecorded: sum((r) => r.alreadyRecorded),
    transactions: sum((r) => r.transactions),
    fencedRejections: s.outcome === 'fenced-out' ? 1 : 0,
    chunksCommitted: s.results.length,
    seconds: s.seconds,
    ...(s.reason ? { reason: s.reason } : {}),
  };
}

/**
 * The nightly billing job, composed from the lease, the fence and the manifest (reference Parts 2, 4 and 5).
 *
 *   1. claim the lease, clock-free (lease.ts): the token is the claim's epoch;
 *   2. raise the fence on the job row FIRST, learning the progress from the old row (fence.ts);
 *   3. raise the manifest's token (manifest.ts);
 *   4. renew from this process while working;
 *   5. for each chunk still to do: fenced batches of 1 check + ≤ 99 puts, then the chunk object, then the
 *      manifest commit (If-Match), then the chunk is marked done on the job row;
 *   6. manifest DONE, then job row DONE (it leaves the sparse index), then release.
 * Before every action the holder checks its stop time; that keeps overlap rare. What keeps the data correct is the
 * fence: a write carrying a lower token is refused by the store, whatever the holder believes.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Clock } from './clock';
import type { BillingConfig } from './config';
import { AlreadyDoneError, FencedOutError, LeaseLostError, StopTimePassedError } from './errors';
import type { Events } from './events';
import * as fence from './fence';
import { chunkBatches, chunkCount, chunkRange, renderChunkLines, type NightPlan } from './invoices';
import { claim, type Lease } from './lease';
import { ManifestWriter } from './manifest';
import { Keys, type TableNames } from './schema';

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

export async function runBilling(deps: BillingDeps, run: BillingRun): Promise<BillingSummary> {
  const started = deps.clock.monotonicMs();
  const jobId = Keys.job(run.date);
  const plan: NightPlan = { date: run.date, invoices: run.config.invoices, chunkSize: run.config.chunkSize, putsPerTransaction: run.config.putsPerTransaction };
  const fenceDeps = { ddb: deps.ddb, jobs: deps.tables.jobs, invoices: deps.tables.invoices, clock: deps.clock };
  const summary: BillingSummary = {
    jobId, worker: run.worker, token: undefined, outcome: 'completed',
    invoicesRecorded: 0, invoicesAlreadyRecorded: 0, transactions: 0, fencedRejections: 0, chunksCommitted: 0, seconds: 0,
  };
  const finish = (outcome: Outcome, reason?: string) => {
    summary.outcome = outcome;
    if (reason) summary.reason = reason;
    summary.seconds = Math.round(deps.clock.monotonicMs() - started) / 1000;
    return summary;
  };
  const afterCheck = async (point: CheckPoint) => run.hooks?.afterCheck?.(point);

  // 0. A DONE night needs no lease: say so at once (a duplicate trigger after the run finished).
  const before = await fence.readJob(fenceDeps, jobId);
  if (before?.state === 'DONE') {
    deps.events.emit('already-done', { jobId, fence: before.fence });
    return finish('already-done');
  }

  // 1. claim the lease, clock-free
  const lease: Lease = await claim({ ddb: deps.ddb, table: deps.tables.locks, clock: deps.clock, events: deps.events }, Keys.lock(run.date), run.worker, run.config);
  summary.token = lease.token;
  lease.startHeartbeat();
  try {
    // 2. raise the fence first: before reading or writing anything else (Part 4)
    const old = await fence.raise(fenceDeps, jobId, lease.token, run.worker, chunkCount(plan));
    deps.events.emit('fence-raised', { token: lease.token, previousFence: old?.fence, previousState: old?.state });

    // 3. the same on S3
    const { writer: manifest } = await ManifestWriter.raise({ s3: deps.s3, bucket: deps.bucket, clock: deps.clock }, run.date, jobId, lease.token);
    deps.events.emit('manifest-raised', { token: lease.token });

    // 5. the chunks still to do
    const done = old?.chunks_done ?? new Set<number>();
    for (let chunk = 0; chunk < chunkCount(plan); chunk++) {
      if (done.has(chunk)) continue;
      let batchNo = 0;
      for (const batch of chunkBatches(plan, chunk)) {
        lease.check();
        await afterCheck({ step: 'batch', chunk, batch: batchNo });
        const r = await fence.writeBatch(fenceDeps, jobId, lease.token, batch).catch((err) => {
          if (err instanceof FencedOutError) deps.events.emit('batch-rejected', { token: lease.token, chunk, batch: batchNo, fence: err.fence });
          throw err;
        });
        summary.invoicesRecorded += r.recorded;
        summary.invoicesAlreadyRecorded += r.alreadyRecorded;
        summary.transactions += r.transactions;
        deps.events.emit('batch-committed', { token: lease.token, chunk, batch: batchNo, recorded: r.recorded, alreadyRecorded: r.alreadyRecorded, first: batch[0].index });
        batchNo++;
      }
      lease.check();
      const object = await manifest.putChunkObject(chunk, [...renderChunkLines(plan, chunk, lease.token)].join(''));
      lease.check();
      await afterCheck({ step: 'chunk-commit', chunk });
      const { first, end } = chunkRange(plan, chunk);
      await manifest.commitChunk(chunk, { key: object.key, etag: object.etag, token: lease.token, invoices: end - first }).catch((err) => {
        if (err instanceof FencedOutError) deps.events.emit('commit-rejected', { token: lease.token, chunk, fence: err.fence });
        throw err;
      });
      await fence.markChunkDone(fenceDeps, jobId, lease.token, chunk);
      summary.chunksCommitted++;
      deps.events.emit('chunk-committed', { token: lease.token, chunk, key: object.key });
    }

    // 6. complete: the manifest first, then the job row, which is the authority for DONE
    lease.check();
    await afterCheck({ step: 'complete' });
    await manifest.markDone();
    await fence.complete(fenceDeps, jobId, lease.token);
    deps.events.emit('completed', { token: lease.token, jobId });
    await lease.release();
    return finish('completed');
  } catch (err) {
    await lease.stopHeartbeat();
    if (err instanceof AlreadyDoneError) {
      await lease.release();
      deps.events.emit('already-done', { jobId, fence: err.fence });
      return finish('already-done');
    }
    if (err instanceof FencedOutError) {
      // Lost the lock: stop and discard local state (Part 4). Releasing would fail anyway if the lease moved on.
      summary.fencedRejections++;
      await lease.release().catch(() => false);
      return finish('fenced-out', err.message);
    }
    if (err instanceof LeaseLostError || err instanceof StopTimePassedError) {
      await lease.release().catch(() => false);
      return finish('lost-lease', err.message);
    }
    // Anything else: give the lease back conditionally so the next run need not wait it out, and fail loudly.
    await lease.release().catch(() => false);
    throw err;
  }
}

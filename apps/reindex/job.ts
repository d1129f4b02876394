/**
 * The nightly reindex, built on Fencepost's public API only: for each product of the source table, one fenced
 * single-item UPDATE of its search-index entry. Chunk c covers products [c * chunkSize, (c + 1) * chunkSize).
 *
 * Each update is its own TransactWriteItems of exactly two items: the held chunk fence's `guard()` (a ConditionCheck
 * `fence <= token`) and the Update. Both land or neither, so an update lands only while the chunk's fence still
 * accepts the holder's token (docs/DESIGN.md § Chunk fences).
 *
 * Run directly in one process (`runNight`: the library's runJob claims, raises the job row and every chunk fence,
 * runs `reindexChunk` on each chunk still to do, marks it done, completes) or as a FencedJob (its workflow claims,
 * raises and completes; the chunk function `lambda/chunk.ts` runs `reindexChunk` under fencedChunkHandler).
 *
 * What it guarantees: once a newer holder has raised the fences, no update of an older holder lands, whatever that
 * holder believes (FencedOutError, nothing written); every product of a completed night has an entry written that
 * night. What it does not: that a product is indexed by one holder only. A holder that stopped mid-chunk leaves the
 * entries it wrote; the next holder rewrites that chunk (an update is idempotent), and keeps the chunks recorded done.
 */
import { TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  Attr,
  retryTransient,
  runJob,
  type Clock,
  type Events,
  type HeldFence,
  type Lease,
  type LeaseConfig,
  type RunDeps,
  type RunSummary,
  type Stores,
} from '../../lib/core/internal';
import { productKey, runKeys, type ReindexTables } from './schema';

/** One night's work: which night, how many products, how many per chunk. */
export interface ReindexPlan {
  /** The night, YYYY-MM-DD. */
  readonly date: string;
  /** Products in the source table: `prod#00000` … */
  readonly items: number;
  /** Products per chunk. */
  readonly chunkSize: number;
}

/** Chunks in a night: the last one may be short. */
export function chunkCount(plan: Pick<ReindexPlan, 'items' | 'chunkSize'>): number {
  return Math.ceil(plan.items / plan.chunkSize);
}

/** What the job reports as it goes, beside the library's events (claims, raises, completion): one JSON line each. */
type Progress = { readonly event: 'updated'; readonly token: number; readonly chunk: number; readonly item: string };

/**
 * What the job's own work needs, injected: its own two tables and their client (it writes them in its own
 * transactions, each with the chunk fence's guard), the clock; where to report. The lease and the fences are the
 * library's, on the stores runNight is given.
 */
export interface ReindexDeps {
  readonly ddb: DynamoDBDocumentClient;
  readonly tables: Pick<ReindexTables, 'source' | 'index'>;
  /** Times the lease, the stop time and the retry backoff. */
  readonly clock: Clock;
  /** The library's events: sightings, claims, renewals, raises, losses, completion. */
  readonly events: Events;
  /** The job's own progress. @default none */
  readonly progress?: (p: Progress) => void;
}

/** A product's search terms: the words of its name, lowercased, once each, sorted. */
function termsOf(name: string): string[] {
  const words = name.toLowerCase().split(/[^\p{L}\p{N}]+/u);
  return [...new Set(words.filter((w) => w.length > 0))].sort();
}

/**
 * Index one product: read it, then one TransactWriteItems of [the fence's guard, the Update], sent only after the
 * stop-time check. A missing product is skipped (nothing to index).
 * @returns whether an entry was written
 * @throws FencedOutError when the fence has seen a higher token (nothing written); StopTimePassedError or
 * LeaseLostError instead of sending
 */
async function indexProduct(deps: ReindexDeps, lease: Lease, fence: HeldFence, date: string, key: string): Promise<boolean> {
  const read = await deps.ddb.send(new GetCommand({ TableName: deps.tables.source, Key: { [Attr.pk]: key }, ConsistentRead: true }));
  const product = read.Item as { name?: string; price?: number } | undefined;
  if (!product) return false;
  const token = fence.token;
  const update: TransactWriteItem = {
    Update: {
      TableName: deps.tables.index,
      Key: { [Attr.pk]: { S: key } },
      UpdateExpression: 'SET terms = :terms, price = :price, indexed_by = :token, night = :night',
      ExpressionAttributeValues: {
        ':terms': { L: termsOf(String(product.name ?? '')).map((S) => ({ S })) },
        ':price': { N: String(product.price ?? 0) },
        ':token': { N: String(token) },
        ':night': { S: date },
      },
    },
  };
  // Only a transient reason is worth sending again (docs/DESIGN.md "Retry classification"): the Update is idempotent,
  // so a retry of one that landed without its answer writes the same entry again.
  await retryTransient({ sleep: (ms) => deps.clock.sleep(ms) }, async () => {
    try {
      // The stop-time check before the act keeps overlap rare; the guard beside the Update is what makes it safe.
      await lease.act(() => deps.ddb.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(), update] })));
    } catch (err) {
      throw fence.fencedOut(err) ?? err; // the guard sits at position 0
    }
  });
  return true;
}

/** What one chunk did. */
export interface ChunkResult {
  readonly chunk: number;
  /** Entries written. */
  readonly updated: number;
  /** Products not in the source table (skipped). */
  readonly missing: number;
}

/**
 * One chunk's work, under a held lease whose token the chunk's fence already carries (raised by the library's
 * raiseRun, in `runNight` or in FencedJob's RaiseFence step): index every product of the chunk through the chunk's
 * fence. The library records the chunk done on its fence item after. Safe to run again: the updates are idempotent.
 * @throws FencedOutError, StopTimePassedError, LeaseLostError: another holder owns the night; stop
 */
export async function reindexChunk(deps: ReindexDeps, lease: Lease, fence: HeldFence, plan: ReindexPlan, chunk: number): Promise<ChunkResult> {
  let updated = 0;
  let missing = 0;
  const end = Math.min(plan.items, (chunk + 1) * plan.chunkSize);
  for (let i = chunk * plan.chunkSize; i < end; i++) {
    const item = productKey(i);
    if (await indexProduct(deps, lease, fence, plan.date, item)) {
      updated++;
      deps.progress?.({ event: 'updated', token: lease.token, chunk, item });
    } else {
      missing++;
    }
  }
  return { chunk, updated, missing };
}

/** What `runNight` did: one JSON line of the worker. */
export interface NightSummary {
  readonly holder: string;
  readonly date: string;
  readonly outcome: RunSummary<ChunkResult>['outcome'];
  /** The fencing token this holder worked with (absent if it never claimed). */
  readonly token?: number;
  /** Entries this holder wrote. */
  readonly updated: number;
  readonly missing: number;
  /** Chunks this holder ran to done. */
  readonly chunksRun: number;
  /** Chunks an earlier holder had recorded done, skipped. */
  readonly chunksSkipped: number;
  /** Why the night ended early (fenced out, lost). */
  readonly reason?: string;
}

/**
 * Run one night in this process (the library's runJob): claim the lease (clock-free), raise the job row and then
 * every chunk fence before writing anything, run the chunks not recorded done, mark the job row DONE, release.
 * @param stores - the lock and job tables' stores: the lease and the fences
 * @param config - lease timing (validateLeaseConfig)
 * @returns the summary; a lost lease, a fenced-out write or a live holder of a RUNNING night is an outcome, not an error
 * @throws ClaimBudgetExhaustedError (a live holder of a night not RUNNING under it), or a store failure
 */
export async function runNight(
  stores: Pick<Stores, 'locks' | 'jobs'>,
  deps: ReindexDeps,
  holder: string,
  plan: ReindexPlan,
  config: LeaseConfig,
): Promise<NightSummary> {
  const runDeps: RunDeps = { locks: stores.locks, jobs: stores.jobs, clock: deps.clock, events: deps.events }; // no manifest: DynamoDB only
  const run = { keys: runKeys, date: plan.date, chunks: chunkCount(plan), holder, config };
  const s = await runJob(runDeps, run, ({ lease, fence, chunk }) => reindexChunk(deps, lease, fence, plan, chunk));
  return {
    holder,
    date: plan.date,
    outcome: s.outcome,
    token: s.token,
    updated: s.results.reduce((n, r) => n + r.updated, 0),
    missing: s.results.reduce((n, r) => n + r.missing, 0),
    chunksRun: s.results.length,
    chunksSkipped: s.chunksSkipped,
    ...(s.reason ? { reason: s.reason } : {}),
  };
}

/**
 * The nightly reindex, built on Fencepost's public API only: for each product of the source table, one fenced
 * single-item UPDATE of its search-index entry. Chunk c covers products [c * chunkSize, (c + 1) * chunkSize).
 *
 * Each update is its own TransactWriteItems of exactly two items: the chunk fence's `guard(token)` (a ConditionCheck
 * `fence <= token`) and the Update. Both land or neither, so an update lands only while the chunk's fence still
 * accepts the holder's token (reference Part 4; docs/DESIGN.md § Chunk fences).
 *
 * Run directly in one process (`runNight`: withLease, raise every fence, the chunks, complete) or as a FencedJob
 * (its workflow claims and raises; the chunk function `lambda/chunk.ts` runs `reindexChunk` under `resume`).
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
  FencedOutError,
  LeaseLostError,
  StopTimePassedError,
  fenceOn,
  isTransient,
  withLease,
  type Clock,
  type Events,
  type Fence,
  type Lease,
  type LeaseConfig,
} from '../../core/index';
import { chunkFenceKey, productKey, runKeys, type ReindexTables } from './schema';

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

/** What the job reports as it goes: the worker prints each as one JSON line, the test reads them. */
type Progress =
  | { readonly event: 'fence-raised'; readonly token: number; readonly chunks: number; readonly chunksDone: readonly number[] }
  | { readonly event: 'updated'; readonly token: number; readonly chunk: number; readonly item: string }
  | { readonly event: 'chunk-done'; readonly token: number; readonly chunk: number; readonly updated: number; readonly missing: number }
  | { readonly event: 'completed'; readonly token: number }
  | { readonly event: 'already-done'; readonly token: number };

/** What the job needs, injected: the store, its tables, the clock; where to report. */
export interface ReindexDeps {
  readonly ddb: DynamoDBDocumentClient;
  readonly tables: ReindexTables;
  /** Times the lease, the stop time and the retry backoff. */
  readonly clock: Clock;
  /** The library's events: sightings, claims, renewals, losses. @default none */
  readonly events?: Events;
  /** The job's own progress. @default none */
  readonly progress?: (p: Progress) => void;
}

/** A chunk's fence: its own item beside the night's job row, so chunks never check a common item. */
function chunkFence(deps: Pick<ReindexDeps, 'ddb' | 'tables' | 'clock'>, date: string, chunk: number): Fence {
  return fenceOn({
    ddb: deps.ddb,
    table: deps.tables.jobs,
    key: { [Attr.pk]: chunkFenceKey(date, chunk) },
    clock: deps.clock,
    resource: 'chunk-fence',
  });
}

/** The night's job row, fenced like a chunk: raised first, and marked DONE last. */
function jobRow(deps: Pick<ReindexDeps, 'ddb' | 'tables' | 'clock'>, date: string): Fence {
  return fenceOn({ ddb: deps.ddb, table: deps.tables.jobs, key: { [Attr.pk]: runKeys.job(date) }, clock: deps.clock, resource: 'job-row' });
}

/** A product's search terms: the words of its name, lowercased, once each, sorted. */
function termsOf(name: string): string[] {
  const words = name.toLowerCase().split(/[^\p{L}\p{N}]+/u);
  return [...new Set(words.filter((w) => w.length > 0))].sort();
}

/** Transient failures (throttling, a transaction conflict on the fence item) are sent again at most this often. */
const RETRIES = 5;

/**
 * Index one product: read it, then one TransactWriteItems of [the fence's guard, the Update], sent only after the
 * stop-time check. A missing product is skipped (nothing to index).
 * @returns whether an entry was written
 * @throws FencedOutError when the fence has seen a higher token (nothing written); StopTimePassedError or
 * LeaseLostError instead of sending
 */
async function indexProduct(deps: ReindexDeps, lease: Lease, fence: Fence, date: string, key: string): Promise<boolean> {
  const read = await deps.ddb.send(new GetCommand({ TableName: deps.tables.source, Key: { [Attr.pk]: key }, ConsistentRead: true }));
  const product = read.Item as { name?: string; price?: number } | undefined;
  if (!product) return false;
  const token = lease.token;
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
  for (let retry = 0; ; retry++) {
    try {
      // The check before the act (Part 2) keeps overlap rare; the guard beside the Update is what makes it safe.
      await lease.act(() => deps.ddb.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(token), update] })));
      return true;
    } catch (err) {
      const fencedOut = fence.fencedOut(err, token); // the guard sits at position 0
      if (fencedOut) throw fencedOut;
      // Only a transient reason is worth sending again (docs/DESIGN.md "Retry classification"): the Update is
      // idempotent, so a retry of one that landed without its answer writes the same entry again.
      if (!isTransient(err) || retry >= RETRIES) throw err;
      await deps.clock.sleep(Math.random() * Math.min(1000, 25 * 2 ** retry)); // full jitter
    }
  }
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
 * One chunk, under a held lease whose token the chunk's fence already carries (raised by `runNight` or by
 * FencedJob's RaiseFence step): index every product of the chunk, then record the chunk done on its own fence
 * item. Safe to run again: the updates are idempotent, and the done mark is the same write.
 * @throws FencedOutError, StopTimePassedError, LeaseLostError: another holder owns the night; stop
 */
export async function reindexChunk(deps: ReindexDeps, lease: Lease, plan: ReindexPlan, chunk: number): Promise<ChunkResult> {
  const fence = chunkFence(deps, plan.date, chunk);
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
  // Done is recorded on the chunk's own fence item, in a write that the fence itself conditions: a raise to our own
  // token (equal is accepted) that also sets done_by. A newer holder's raise makes it FencedOutError.
  await lease.act(() => fence.raise(lease.token, { [Attr.doneBy]: lease.token }));
  deps.progress?.({ event: 'chunk-done', token: lease.token, chunk, updated, missing });
  return { chunk, updated, missing };
}

/** How a night ended for this holder. */
type Outcome = 'completed' | 'already-done' | 'fenced-out' | 'lost-lease';

/** What `runNight` did: one JSON line of the worker. */
export interface NightSummary {
  readonly holder: string;
  readonly date: string;
  readonly outcome: Outcome;
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
 * Run one night in this process: claim the lease (clock-free), raise the job row and then every chunk fence before
 * writing anything, run the chunks not recorded done, mark the job row DONE, release the lease.
 * @param config - lease timing; absent fields take the library's defaults
 * @returns the summary; a lost lease or a fenced-out write is an outcome, not an error
 * @throws ConfigError for bad lease settings (nothing written), ClaimBudgetExhaustedError, or a store failure
 */
export async function runNight(deps: ReindexDeps, holder: string, plan: ReindexPlan, config: Partial<LeaseConfig>): Promise<NightSummary> {
  const chunks = chunkCount(plan);
  let token: number | undefined;
  let updated = 0;
  let missing = 0;
  let chunksRun = 0;
  let chunksSkipped = 0;
  const summary = (outcome: Outcome, reason?: string): NightSummary => ({
    holder,
    date: plan.date,
    outcome,
    token,
    updated,
    missing,
    chunksRun,
    chunksSkipped,
    ...(reason ? { reason } : {}),
  });
  const leaseDeps = { ddb: deps.ddb, table: deps.tables.locks, clock: deps.clock, events: deps.events };
  try {
    return await withLease(leaseDeps, runKeys.lock(plan.date), holder, config, async (lease) => {
      token = lease.token;
      const row = jobRow(deps, plan.date);
      // 0. A DONE night stays done. The raise below does not refuse DONE, so read first; a holder that completes
      //    between this read and our raise leaves every chunk done, so we skip them all and complete again.
      if ((await row.read())?.[Attr.state] === 'DONE') {
        deps.progress?.({ event: 'already-done', token: lease.token });
        return summary('already-done');
      }
      // 1. Raise the fence first (Part 4): the job row, then every chunk fence, before any update. Each raise
      //    returns the item it replaced: a done_by there is an earlier holder's finished chunk.
      await lease.act(() => row.raise(lease.token, { [Attr.owner]: holder, [Attr.chunkCount]: chunks }));
      const done: number[] = [];
      for (let c = 0; c < chunks; c++) {
        const old = await lease.act(() => chunkFence(deps, plan.date, c).raise(lease.token, { [Attr.chunk]: c }));
        if (old?.[Attr.doneBy] !== undefined) done.push(c);
      }
      deps.progress?.({ event: 'fence-raised', token: lease.token, chunks, chunksDone: done });
      // 2. The chunks still to do, each checked against its own fence.
      for (let c = 0; c < chunks; c++) {
        if (done.includes(c)) {
          chunksSkipped++;
          continue;
        }
        const r = await reindexChunk(deps, lease, plan, c);
        updated += r.updated;
        missing += r.missing;
        chunksRun++;
      }
      // 3. Complete: DONE on the job row, through its fence, so a holder fenced out meanwhile cannot mark it.
      await lease.act(() => row.raise(lease.token, { [Attr.state]: 'DONE' }));
      deps.progress?.({ event: 'completed', token: lease.token });
      return summary('completed');
    });
  } catch (err) {
    // Fenced out or lost: another holder owns the night. Stop and discard local state (Part 4); withLease has
    // already given the lease back, conditionally.
    if (err instanceof FencedOutError) return summary('fenced-out', err.message);
    if (err instanceof LeaseLostError || err instanceof StopTimePassedError) return summary('lost-lease', err.message);
    throw err;
  }
}

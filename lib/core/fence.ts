/**
 * A job's fences (docs/DESIGN.md § Chunk fences): the job row and, beside it, one chunk
 * fence item per chunk (`<jobId>#chunk#07`), so concurrent chunks never touch a common item. Every write here is one
 * operation of the job store (lib/core/store/jobs.ts), whose DynamoDB implementation (lib/core/aws/job-store.ts) holds the
 * conditions; this file holds the order and what each refusal means.
 *
 *   raise          the job row (fence = token, state = RUNNING, the sparse-index attributes, returning the old row),
 *                  THEN every chunk fence (Fence.raise each, returning the chunk's progress). Nothing is written into
 *                  any chunk until every chunk fence answered.
 *   markChunkDone  progress, on the chunk's own fence item, conditional on that fence still being ours.
 *   complete       DONE, leaving the sparse index, conditional on still being the job row's owner, once every chunk
 *                  fence item says done.
 *
 * The generic fence (`Fence`, `fenceOn`, `FENCE_CLAUSE`: any item, and its guard for the caller's own transactions)
 * is DynamoDB's and lives in lib/core/aws/fence.ts; it is re-exported here and from lib/core/index.ts under the same names.
 * What a fence guarantees: once it is raised to N, no write guarded with a token below N lands, whatever its holder
 * believes. A rejection by a fence means: you have lost the lock; stop and discard local state.
 */
import { Fence } from './aws/fence';
import { type Clock, wallIso } from './clock';
import { backoffOf, retryTransient } from './conditions';
import { AlreadyDoneError, FencedOutError, RunIncompleteError } from './errors';
import { chunkFenceKey, claimShard, jobNameOf } from './job-keys';
import { Attr } from './schema';
import type { ChunkFence, JobRow, JobStore } from './store/jobs';

export { FENCE_CLAUSE } from './aws/job-store';
export { Fence, fenceOn, type FenceTarget, type HeldFence } from './aws/fence';
export type { ChunkFence, JobRow } from './store/jobs';

// ─── A job's fences: the job row and its chunk fence items (docs/DESIGN.md § Chunk fences) ───────────────────────

/** What a raise learnt: the old job row, and the chunks an earlier holder recorded done (from the old chunk items). */
export interface Raised {
  readonly job: JobRow | undefined;
  readonly chunksDone: ReadonlySet<number>;
}

/** At most this many single-item requests of one raise or read in flight at once. */
const FENCE_ITEMS_IN_FLIGHT = 10;

/** What a job's fences need: the job table's store (job rows and chunk fence items), the clock for backoffs. */
export interface FenceDeps {
  /** The job table's store. */
  readonly jobs: JobStore;
  /** Times the retry backoff. */
  readonly clock: Clock;
  /** Jitter source for the retry backoff (docs/DESIGN.md "Retry classification"). @default Math.random */
  readonly random?: () => number;
}

/**
 * The fence item `fenceKey` in the job table, as a Fence: a chunk's fence item (`<jobId>#chunk#07`) or a job row
 * for a job fenced on its row alone. Its FencedOutError names which.
 */
export function jobFence(deps: FenceDeps, fenceKey: string): Fence {
  const resource = fenceKey.includes('#chunk#') ? 'chunk-fence' : 'job-row';
  return new Fence({
    fences: deps.jobs,
    table: deps.jobs.table,
    key: { [Attr.pk]: fenceKey },
    clock: deps.clock,
    random: deps.random,
    resource,
  });
}

/** The job row, read strongly consistent (undefined: never raised). */
export function readJob(deps: Pick<FenceDeps, 'jobs'>, jobId: string): Promise<JobRow | undefined> {
  return deps.jobs.readJob(jobId);
}

/**
 * Raise every fence of the run to `token` (docs/DESIGN.md § Chunk fences): the job row FIRST, then every
 * chunk fence. Only when this returns may the holder write into any chunk. Returns the old job row and the chunks
 * an earlier holder recorded done (learnt from the old chunk items, so no second read).
 * @param check - called before each write (the holder's `lease.check`): a raise of many chunks outlasts a stop time
 * unless it is renewed meanwhile, and one that is not stops there rather than writing on
 */
export async function raise(deps: FenceDeps, jobId: string, token: number, owner: string, chunkCount: number, check?: () => void): Promise<Raised> {
  const job = await raiseJobRow(deps, jobId, token, owner, chunkCount, check);
  const old = await raiseChunkFences(
    deps,
    jobId,
    token,
    Array.from({ length: chunkCount }, (_, c) => c),
    check,
  );
  const chunksDone = new Set([...old].flatMap(([c, item]) => (item?.done_by !== undefined ? [c] : [])));
  return { job, chunksDone };
}

/**
 * Step 1 of the raise: the job row. In the same write the row enters the sparse index (claim_shard +
 * claimed_since), so no claim can exist without being findable by the sweeper. Returns the old row.
 */
export async function raiseJobRow(
  deps: FenceDeps,
  jobId: string,
  token: number,
  owner: string,
  chunkCount: number,
  check: () => void = () => undefined,
): Promise<JobRow | undefined> {
  const store = deps.jobs;
  // A transient failure (TransactionConflictException: a transaction held the row) is sent again: the condition
  // still holds if the first try landed, because equal is accepted. Each send checks the stop time first.
  const out = await retryTransient(backoffOf(deps), () => {
    check();
    return store.raiseJob(jobId, { token, owner, chunkCount, claimedSince: wallIso(deps.clock), shard: claimShard(jobNameOf(jobId)) });
  });
  if (out.ok) return out.old;
  if (out.current?.state === 'DONE') throw new AlreadyDoneError(jobId, out.current.fence);
  throw new FencedOutError('job-row', token, out.current?.fence);
}

/**
 * Step 2 of the raise, after the job row: these chunks' fence items, one conditional write each (created at the
 * first raise), fence <= token, returning each old item. No count limit: single-item writes, a bounded number in
 * flight. Only the chunk item is touched (never claim_shard or state), so chunk items stay out of the sparse index.
 * `check` is called before each write (see raise); the first that throws stops the raise, the writes in flight land.
 */
export async function raiseChunkFences(
  deps: FenceDeps,
  jobId: string,
  token: number,
  chunks: readonly number[],
  check?: () => void,
): Promise<Map<number, ChunkFence | undefined>> {
  const old = new Map<number, ChunkFence | undefined>();
  // Safe to send again (a zombie's transaction on this chunk may hold the item): equal is accepted, and a landed try
  // left done_by as it was, so the old item still tells the progress.
  await eachBounded(chunks, async (chunk) => {
    check?.();
    const before = await jobFence(deps, chunkFenceKey(jobId, chunk)).raise(token, { [Attr.chunk]: chunk }, check);
    old.set(chunk, before as ChunkFence | undefined);
  });
  return old;
}

/** The run's chunk fence items, read strongly consistent (undefined: never raised). */
export async function readChunkFences(deps: Pick<FenceDeps, 'jobs'>, jobId: string, chunkCount: number): Promise<(ChunkFence | undefined)[]> {
  const store = deps.jobs;
  const items = new Array<ChunkFence | undefined>(chunkCount);
  await eachBounded(
    Array.from({ length: chunkCount }, (_, c) => c),
    async (c) => {
      items[c] = (await store.readFence({ table: store.table, key: { [Attr.pk]: chunkFenceKey(jobId, c) } })) as ChunkFence | undefined;
    },
  );
  return items;
}

async function eachBounded<T>(items: readonly T[], act: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await act(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(FENCE_ITEMS_IN_FLIGHT, items.length) }, worker));
}

/**
 * Record a chunk done ON ITS OWN fence item (docs/DESIGN.md § Chunk fences), after its manifest commit: one
 * conditional write, fence = token (the chunk's fence is still ours). Chunks never write the job row.
 */
export async function markChunkDone(
  deps: FenceDeps,
  jobId: string,
  token: number,
  chunk: number,
  check: () => void = () => undefined,
): Promise<void> {
  const store = deps.jobs;
  // Safe to send again: SET done_by = our token leaves the item as one landed try would. Each send checks first.
  const out = await retryTransient(backoffOf(deps), () => {
    check();
    return store.markChunkDone(chunkFenceKey(jobId, chunk), token);
  });
  if (!out.ok) throw new FencedOutError('chunk-fence', token, out.current?.fence);
}

/**
 * Complete (design §4): state DONE, and the row leaves the sparse index in the same write, conditional on still
 * owning the job row. First every chunk fence item must say done (done marks are never removed, so a read that
 * finds them all stays true): DONE never stands over a missing chunk, whatever ran the chunks.
 * @param beforeDone - what must be DONE before the row (the manifest): run once every chunk is found done
 */
export async function complete(
  deps: FenceDeps,
  jobId: string,
  token: number,
  beforeDone?: () => Promise<void>,
  check: () => void = () => undefined,
): Promise<void> {
  const store = deps.jobs;
  const row = await store.readJob(jobId);
  if (row?.fence !== token || row.owner_token !== token) throw new FencedOutError('job-row', token, row?.fence);
  const chunks = await readChunkFences(deps, jobId, row.chunk_count ?? 0);
  const notDone = chunks.flatMap((item, c) => (item?.done_by === undefined ? [c] : []));
  if (notDone.length > 0) throw new RunIncompleteError(jobId, notDone);
  await beforeDone?.();
  // Safe to send again: SET DONE leaves the row as one landed try would. Each send checks the stop time first.
  const out = await retryTransient(backoffOf(deps), () => {
    check();
    return store.complete(jobId, token);
  });
  if (!out.ok) throw new FencedOutError('job-row', token, out.current?.fence);
}

/**
 * Every row of one job's shard of the sparse index of claimed job rows (claimShard), page by page. A row is in the index exactly while its job is
 * RUNNING (the raise adds it, completion takes it out, in the same writes; a re-queue leaves it in), so this reads
 * the claimed rows and nothing else, however many runs the table holds (docs/DESIGN.md "The sweeper"). Shared by the sweeper
 * and the auditor. A GSI has no consistent read: a row can appear a moment after its raise.
 */
export async function* claimedRows(store: JobStore, shard: string): AsyncGenerator<JobRow & Record<string, unknown>> {
  let start: string | undefined;
  do {
    const page = await store.claimedPage(shard, start);
    yield* page.items as (JobRow & Record<string, unknown>)[];
    start = page.next;
  } while (start !== undefined);
}

/** Every item of the job table (job rows and chunk fence items), strongly consistent, page by page: the auditor's. */
export async function* jobTableItems(store: JobStore): AsyncGenerator<Record<string, unknown>> {
  let start: string | undefined;
  do {
    const page = await store.scanPage(start);
    yield* page.items;
    start = page.next;
  } while (start !== undefined);
}

/**
 * The fences in the job table: the one place where an old holder is actually stopped (reference Parts 4 and 5).
 * A night has two kinds of fence item (docs/DESIGN.md § Chunk fences): the job row, and beside it one chunk fence
 * item per chunk (`<jobId>#chunk#07`), so concurrent chunks never touch a common item.
 *
 *   raise     the new holder's FIRST act, before it reads or writes anything else: the job row (one conditional
 *             UpdateItem: fence = token, state = RUNNING, the sparse-index attributes, returning the old row), THEN
 *             every chunk fence (one conditional UpdateItem each, returning the old item: the chunk's progress).
 *             Nothing is written into any chunk until every chunk fence answered (Part 4, "Raise the fence first").
 *   fencedTransaction  the fenced write, in one place (Part 5): 1 ConditionCheck on ONE fence item, fence <= token
 *             (equal accepted: the current holder writes many times with the same token, Part 4 "Why equal is
 *             accepted"), + up to 99 Puts, in one TransactWriteItems; writeBatch sends it and reads the outcome. The
 *             fence item is the chunk's; a night fenced on its job row alone is the same call with the job row's key.
 *   markChunkDone  progress, on the chunk's own fence item, conditional on that fence still being ours.
 *   complete  DONE, leaving the sparse index, conditional on still being the job row's owner, once every chunk
 *             fence item says done.
 *
 * A rejection by a fence means: you have lost the lock; stop and discard local state.
 */
import { createHash } from 'node:crypto';
import { TransactWriteItemsCommand, type TransactWriteItem, type TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type Clock, wallIso } from './clock';
import {
  DEFAULT_BACKOFF,
  cancellationReasons,
  classifyCancellation,
  failedItem,
  fullJitterMs,
  isConditionalCheckFailed,
  isTransient,
  retryTransient,
  type Backoff,
} from './conditions';
import { AlreadyDoneError, FencedOutError, NightIncompleteError } from './errors';
import type { Invoice } from './invoices';
import { Attr, CLAIM_SHARD, Keys, type JobState } from './schema';

export interface JobRow {
  readonly pk: string;
  readonly fence?: number;
  readonly state?: JobState;
  readonly owner_token?: number;
  readonly owner?: string;
  readonly chunk_count?: number;
  readonly claim_shard?: string;
  readonly claimed_since?: string;
}

/** A chunk's fence item (docs/DESIGN.md § Chunk fences). Never carries claim_shard or state: never in the sparse index. */
export interface ChunkFence {
  readonly pk: string;
  readonly chunk: number;
  readonly fence: number;
  /** The token of the holder that recorded this chunk done (after its manifest commit); absent until then. */
  readonly done_by?: number;
}

/** What a raise learnt: the old job row, and the chunks an earlier holder recorded done (from the old chunk items). */
export interface Raised {
  readonly job: JobRow | undefined;
  readonly chunksDone: ReadonlySet<number>;
}

/** The night cannot be DONE: these chunks' fence items do not say done (docs/DESIGN.md § Chunk fences). */

/** Which fence refused us, for the error: a chunk's fence item or the job row (the fence of one chunk at a time). */
const fenceResource = (key: string) => (key.includes('#chunk#') ? ('chunk-fence' as const) : ('job-row' as const));

/** At most this many single-item requests of one raise or read in flight at once. */
const FENCE_ITEMS_IN_FLIGHT = 10;

export interface FenceDeps {
  readonly ddb: DynamoDBDocumentClient;
  readonly jobs: string;
  readonly invoices: string;
  readonly clock: Clock;
  /** Jitter source for the retry backoff (docs/DESIGN.md "Retry classification"). Default Math.random. */
  readonly random?: () => number;
}

const backoffOf = (deps: FenceDeps): Backoff => ({ sleep: (ms) => deps.clock.sleep(ms), random: deps.random });

// Named condition clauses, each with its reason.
/** Our token is not lower than any token the row has accepted: reject lower, accept equal (Part 4). */
const notLower = `(attribute_not_exists(${Attr.fence}) OR ${Attr.fence} <= :t)`;
/** A DONE job stays DONE: a late or duplicate run must not reopen it. */
const notDone = `(attribute_not_exists(#state) OR #state <> :done)`;
/** We are still the fence's owner: nobody raised it since, and the row is ours (complete / progress). */
const stillOwner = `${Attr.fence} = :t AND ${Attr.ownerToken} = :t`;
/** An invoice is recorded once: the put lands only if no holder recorded it before. */
const invoiceAbsent = `attribute_not_exists(${Attr.pk})`;

export async function readJob(deps: Pick<FenceDeps, 'ddb' | 'jobs'>, jobId: string): Promise<JobRow | undefined> {
  const out = await deps.ddb.send(new GetCommand({ TableName: deps.jobs, Key: { [Attr.pk]: jobId }, ConsistentRead: true }));
  return out.Item as JobRow | undefined;
}

/**
 * Raise every fence of the night to `token` (Part 4; docs/DESIGN.md § Chunk fences): the job row FIRST, then every
 * chunk fence. Only when this returns may the holder write into any chunk. Returns the old job row and the chunks
 * an earlier holder recorded done (learnt from the old chunk items, so no second read).
 */
export async function raise(deps: FenceDeps, jobId: string, token: number, owner: string, chunkCount: number): Promise<Raised> {
  const job = await raiseJobRow(deps, jobId, token, owner, chunkCount);
  const old = await raiseChunkFences(
    deps,
    jobId,
    token,
    Array.from({ length: chunkCount }, (_, c) => c),
  );
  const chunksDone = new Set([...old].flatMap(([c, item]) => (item?.done_by !== undefined ? [c] : [])));
  return { job, chunksDone };
}

/**
 * Step 1 of the raise: the job row (Part 4). In the same write the row enters the sparse index (claim_shard +
 * claimed_since), so no claim can exist without being findable by the sweeper (Part 6). Returns the old row.
 */
export async function raiseJobRow(deps: FenceDeps, jobId: string, token: number, owner: string, chunkCount: number): Promise<JobRow | undefined> {
  try {
    // A transient failure (TransactionConflictException: a transaction held the row) is sent again: the condition
    // still holds if the first try landed, because equal is accepted.
    const out = await retryTransient(backoffOf(deps), () =>
      deps.ddb.send(
        new UpdateCommand({
          TableName: deps.jobs,
          Key: { [Attr.pk]: jobId },
          ConditionExpression: `${notLower} AND ${notDone}`,
          UpdateExpression:
            `SET ${Attr.fence} = :t, #state = :running, ${Attr.ownerToken} = :t, #owner = :me, ` +
            `${Attr.chunkCount} = :chunks, ${Attr.claimShard} = :shard, ${Attr.claimedSince} = :since`,
          ExpressionAttributeNames: { '#state': Attr.state, '#owner': Attr.owner },
          ExpressionAttributeValues: {
            ':t': token,
            ':done': 'DONE',
            ':running': 'RUNNING',
            ':me': owner,
            ':chunks': chunkCount,
            ':shard': CLAIM_SHARD,
            ':since': wallIso(deps.clock), // informational: the sweeper never compares it
          },
          ReturnValues: 'ALL_OLD',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    return out.Attributes as JobRow | undefined;
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    const row = failedItem(err) as JobRow | undefined;
    if (row?.state === 'DONE') throw new AlreadyDoneError(jobId, row.fence);
    throw new FencedOutError('job-row', token, row?.fence, { cause: err });
  }
}

/**
 * Step 2 of the raise, after the job row: these chunks' fence items, one conditional UpdateItem each (created at the
 * first raise), fence <= token, returning each old item. No count limit: single-item writes, a bounded number in
 * flight. Only the chunk item is touched (never claim_shard or state), so chunk items stay out of the sparse index.
 */
export async function raiseChunkFences(
  deps: FenceDeps,
  jobId: string,
  token: number,
  chunks: readonly number[],
): Promise<Map<number, ChunkFence | undefined>> {
  const old = new Map<number, ChunkFence | undefined>();
  await eachBounded(chunks, async (chunk) => {
    try {
      // Safe to send again (a zombie's transaction on this chunk may hold the item: TransactionConflictException):
      // equal is accepted, and a landed try left done_by as it was, so the old item still tells the progress.
      const out = await retryTransient(backoffOf(deps), () =>
        deps.ddb.send(
          new UpdateCommand({
            TableName: deps.jobs,
            Key: { [Attr.pk]: Keys.chunkFence(jobId, chunk) },
            ConditionExpression: notLower,
            UpdateExpression: `SET ${Attr.fence} = :t, #chunk = :c`,
            ExpressionAttributeNames: { '#chunk': Attr.chunk },
            ExpressionAttributeValues: { ':t': token, ':c': chunk },
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      old.set(chunk, out.Attributes as ChunkFence | undefined);
    } catch (err) {
      if (!isConditionalCheckFailed(err)) throw err;
      const item = failedItem(err);
      throw new FencedOutError('chunk-fence', token, item ? Number(item[Attr.fence]) : undefined, { cause: err });
    }
  });
  return old;
}

/** The night's chunk fence items, read strongly consistent (undefined: never raised). */
export async function readChunkFences(deps: Pick<FenceDeps, 'ddb' | 'jobs'>, jobId: string, chunkCount: number): Promise<(ChunkFence | undefined)[]> {
  const items = new Array<ChunkFence | undefined>(chunkCount);
  await eachBounded(
    Array.from({ length: chunkCount }, (_, c) => c),
    async (c) => {
      const out = await deps.ddb.send(new GetCommand({ TableName: deps.jobs, Key: { [Attr.pk]: Keys.chunkFence(jobId, c) }, ConsistentRead: true }));
      items[c] = out.Item as ChunkFence | undefined;
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
 * The fenced transaction (Part 5): 1 ConditionCheck on ONE fence item, `fenceKey` (the chunk's fence item, or the
 * job row for a night fenced on its row alone; fence <= token: reject lower, accept equal) + one Put per invoice
 * (recorded once: attribute_not_exists). Built as AttributeValues directly rather than
 * through the document client's generic marshalling: this runs 510 times a night and that cut the client CPU per
 * transaction by a third (bench/waste.ts measures both). The ClientRequestToken makes a retry idempotent.
 */
export function fencedTransaction(
  tables: { readonly jobs: string; readonly invoices: string },
  fenceKey: string,
  token: number,
  batch: readonly Invoice[],
): TransactWriteItemsCommandInput {
  const t = { N: String(token) };
  const check: TransactWriteItem = {
    ConditionCheck: {
      TableName: tables.jobs,
      Key: { [Attr.pk]: { S: fenceKey } },
      ConditionExpression: `${Attr.fence} <= :t`,
      ExpressionAttributeValues: { ':t': t },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    },
  };
  const puts = batch.map((inv): TransactWriteItem => ({
    Put: {
      TableName: tables.invoices,
      Item: { [Attr.pk]: { S: inv.pk }, [Attr.customer]: { S: inv.customer }, [Attr.amount]: { N: String(inv.amount) }, [Attr.token]: t },
      ConditionExpression: invoiceAbsent,
    },
  }));
  return { ClientRequestToken: requestToken(tables, fenceKey, token, batch), TransactItems: [check, ...puts] };
}

export interface BatchResult {
  /** Invoices this call recorded. */
  readonly recorded: number;
  /** Invoices an earlier holder had already recorded (their puts were refused by attribute_not_exists). */
  readonly alreadyRecorded: number;
  /** TransactWriteItems calls made, including retries without the already-recorded puts. */
  readonly transactions: number;
}

/**
 * The fenced write (Part 5): one TransactWriteItems of 1 ConditionCheck on the fence item `fenceKey` (the chunk's:
 * concurrent chunks then share no item, docs/DESIGN.md § Chunk fences) + up to 99 Puts. A
 * cancellation is decided by its reasons (conditions.classifyCancellation; docs/DESIGN.md "Retry classification"):
 *   - ConditionalCheckFailed on the check (position 0): we have lost the lock → FencedOutError, nothing was written;
 *   - ConditionalCheckFailed on a Put: that invoice was already recorded by an earlier holder; drop it and send the
 *     rest (a new request, so a new ClientRequestToken), so each invoice is recorded exactly once. A conflict
 *     reported beside it changes nothing: the condition decides;
 *   - only transient reasons (TransactionConflict: another transaction or write touched one of our items, the job
 *     fence item we only ConditionCheck included; throttling), or any other transient error: send the SAME request again
 *     after a full-jitter backoff. Same request, same ClientRequestToken, so a retry of a transaction that was
 *     applied but whose response was lost succeeds without writing again (DynamoDB keeps it idempotent for 10 min).
 */
export async function writeBatch(deps: FenceDeps, fenceKey: string, token: number, batch: readonly Invoice[]): Promise<BatchResult> {
  let pending = batch;
  let alreadyRecorded = 0;
  let transactions = 0;
  let transientRetries = 0;
  while (pending.length > 0) {
    transactions++;
    try {
      await deps.ddb.send(new TransactWriteItemsCommand(fencedTransaction(deps, fenceKey, token, pending)));
      return { recorded: pending.length, alreadyRecorded, transactions };
    } catch (err) {
      const reasons = cancellationReasons(err);
      const cancellation = reasons === undefined ? undefined : classifyCancellation(reasons);
      if (reasons !== undefined && cancellation?.kind === 'condition') {
        if (cancellation.failed.includes(0)) {
          const row = reasons[0].Item ? failedItem(reasons[0]) : undefined;
          throw new FencedOutError(fenceResource(fenceKey), token, row ? Number(row[Attr.fence]) : undefined, { cause: err });
        }
        const refused = new Set(cancellation.failed.map((i) => i - 1)); // position i is pending[i - 1]
        alreadyRecorded += refused.size;
        pending = pending.filter((_, i) => !refused.has(i));
        continue;
      }
      if (isTransient(err) && transientRetries < DEFAULT_BACKOFF.retries) {
        await deps.clock.sleep(fullJitterMs(transientRetries++, deps.random ?? Math.random));
        continue;
      }
      throw err;
    }
  }
  return { recorded: 0, alreadyRecorded, transactions };
}

/**
 * Same request, same ClientRequestToken; any other request, another one. DynamoDB scopes the token to the account,
 * not the table, and rejects a reused token with other parameters, so the tables are part of it.
 */
function requestToken(
  tables: { readonly jobs: string; readonly invoices: string },
  fenceKey: string,
  token: number,
  batch: readonly Invoice[],
): string {
  const h = createHash('sha256').update(`${tables.jobs}|${tables.invoices}|${fenceKey}|${token}`);
  for (const inv of batch) h.update(`|${inv.pk}`);
  return h.digest('hex').slice(0, 36);
}

/**
 * Record a chunk done ON ITS OWN fence item (docs/DESIGN.md § Chunk fences), after its manifest commit: one
 * conditional UpdateItem, fence = token (the chunk's fence is still ours). Chunks never write the job row.
 */
export async function markChunkDone(deps: FenceDeps, jobId: string, token: number, chunk: number): Promise<void> {
  try {
    // Safe to send again: SET done_by = our token leaves the item as one landed try would.
    await retryTransient(backoffOf(deps), () =>
      deps.ddb.send(
        new UpdateCommand({
          TableName: deps.jobs,
          Key: { [Attr.pk]: Keys.chunkFence(jobId, chunk) },
          ConditionExpression: `${Attr.fence} = :t`,
          UpdateExpression: `SET ${Attr.doneBy} = :t`,
          ExpressionAttributeValues: { ':t': token },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    const item = failedItem(err);
    throw new FencedOutError('chunk-fence', token, item ? Number(item[Attr.fence]) : undefined, { cause: err });
  }
}

/**
 * Complete (design §4): state DONE, and the row leaves the sparse index in the same write, conditional on still
 * owning the job row. First every chunk fence item must say done (done marks are never removed, so a read that
 * finds them all stays true): DONE never stands over a missing chunk, whatever ran the chunks.
 */
export async function complete(deps: FenceDeps, jobId: string, token: number): Promise<void> {
  const row = await readJob(deps, jobId);
  if (row?.fence !== token || row.owner_token !== token) throw new FencedOutError('job-row', token, row?.fence);
  const chunks = await readChunkFences(deps, jobId, row.chunk_count ?? 0);
  const notDone = chunks.flatMap((item, c) => (item?.done_by === undefined ? [c] : []));
  if (notDone.length > 0) throw new NightIncompleteError(jobId, notDone);
  await ownerUpdate(
    deps,
    jobId,
    token,
    `SET #state = :done REMOVE ${Attr.claimShard}, ${Attr.claimedSince}`,
    { ':done': 'DONE' },
    { '#state': Attr.state },
  );
}

async function ownerUpdate(
  deps: FenceDeps,
  jobId: string,
  token: number,
  update: string,
  values: Record<string, unknown>,
  names?: Record<string, string>,
): Promise<void> {
  try {
    // Safe to send again: SET DONE leaves the row as one landed try would.
    await retryTransient(backoffOf(deps), () =>
      deps.ddb.send(
        new UpdateCommand({
          TableName: deps.jobs,
          Key: { [Attr.pk]: jobId },
          ConditionExpression: stillOwner,
          UpdateExpression: update,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ':t': token, ...values },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    const row = failedItem(err);
    throw new FencedOutError('job-row', token, row ? Number(row[Attr.fence]) : undefined, { cause: err });
  }
}

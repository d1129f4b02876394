/**
 * Fences: the one place where an old holder is actually stopped (reference Parts 4 and 5).
 *
 * A fence is an item carrying `fence`, the highest token it has accepted. ONE clause compares a token with it
 * (FENCE_CLAUSE: `fence <= :t`, reject lower, accept equal: the current holder writes many times with the same
 * token, Part 4 "Why equal is accepted"), and everything here is built on it:
 *
 *   Fence.raise  the new holder's FIRST act, before it reads or writes anything else: one conditional UpdateItem
 *                (never raised, or not above our token) that sets fence = token and returns the old item;
 *   Fence.guard  the fence as something to write with (etcd's `Cmp`): a ConditionCheck the caller puts in any
 *                TransactWriteItems it builds, so its own writes land only while the fence still accepts the token
 *                (batch.ts builds the usual one: 1 guard + up to 99 puts).
 *
 * A job (docs/DESIGN.md § Chunk fences) has a job row and, beside it, one chunk fence item per chunk
 * (`<jobId>#chunk#07`), so concurrent chunks never touch a common item:
 *
 *   raise          the job row (fence = token, state = RUNNING, the sparse-index attributes, returning the old row),
 *                  THEN every chunk fence (Fence.raise each, returning the chunk's progress). Nothing is written into
 *                  any chunk until every chunk fence answered (Part 4, "Raise the fence first").
 *   markChunkDone  progress, on the chunk's own fence item, conditional on that fence still being ours.
 *   complete       DONE, leaving the sparse index, conditional on still being the job row's owner, once every chunk
 *                  fence item says done.
 *
 * What a fence guarantees: once it is raised to N, no write guarded with a token below N lands, whatever its holder
 * believes. What it does not: it knows nothing of leases, so two writers with the SAME token both pass (hand a token
 * to one holder only: the lease's epoch does), and it guards only the writes that carry it.
 * A rejection by a fence means: you have lost the lock; stop and discard local state.
 */
import type { AttributeValue, TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { marshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { type Clock, wallIso } from './clock';
import { cancellationReasons, failedItem, isConditionalCheckFailed, retryTransient, type Backoff } from './conditions';
import { AlreadyDoneError, FencedOutError, NightIncompleteError } from './errors';
import { chunkFenceKey } from './job-keys';
import { Attr, CLAIM_SHARD, type JobState } from './schema';

// Named condition clauses, each with its reason.
/**
 * THE fence comparison, written once (Part 4): our token `:t` is not lower than the highest the fence has accepted.
 * Reject lower, accept equal. A missing fence attribute makes it false: an unraised fence guards nothing through.
 */
export const FENCE_CLAUSE = `${Attr.fence} <= :t`;
/** The raise's condition: never raised, or not above our token (the clause). */
const unraisedOrNotLower = `(attribute_not_exists(${Attr.fence}) OR ${FENCE_CLAUSE})`;
/** A DONE job stays DONE: a late or duplicate run must not reopen it. */
const notDone = `(attribute_not_exists(#state) OR #state <> :done)`;
/** We are still the fence's owner: nobody raised it since, and the row is ours (complete). */
const stillOwner = `${Attr.fence} = :t AND ${Attr.ownerToken} = :t`;
/** The chunk's fence is still at our token: nobody raised it since (progress). */
const stillOurs = `${Attr.fence} = :t`;

const backoffOf = (deps: { readonly clock: Clock; readonly random?: () => number }): Backoff => ({
  sleep: (ms) => deps.clock.sleep(ms),
  random: deps.random,
});

/** Where a fence item lives, and what its raises and guards need. */
export interface FenceTarget {
  /** The document client; the fenced batch sends its low-level TransactWriteItems through it too. */
  readonly ddb: DynamoDBDocumentClient;
  /** The table holding the fence item (any table: the item only needs its key and a `fence` number). */
  readonly table: string;
  /** The fence item's primary key: its partition key (and sort key, if the table has one), e.g. `{ pk: 'orders#7' }`. */
  readonly key: Readonly<Record<string, string | number>>;
  /** Times the retry backoff (docs/DESIGN.md "Retry classification"). */
  readonly clock: Clock;
  /** Jitter source for the retry backoff. @default Math.random */
  readonly random?: () => number;
  /** The name FencedOutError reports for this fence. @default 'fence' */
  readonly resource?: string;
}

/**
 * One fence item, bound to its table and key: raise it, guard writes with it.
 *
 * Guarantees: `raise(t)` lands only if no token above `t` was raised before, and returns what it replaced; a write
 * carrying `guard(t)` lands only if the fence is still at most `t` when the transaction commits. Does not guarantee
 * anything about writes that do not carry the guard.
 */
export class Fence {
  /** What FencedOutError reports for this fence. */
  readonly resource: string;
  /** The key in AttributeValue form, marshalled once: guard() runs once per transaction. */
  private readonly wireKey: Record<string, AttributeValue>;

  constructor(
    /** Where the fence item lives. */
    readonly target: FenceTarget,
  ) {
    this.resource = target.resource ?? 'fence';
    this.wireKey = marshall(target.key);
  }

  /**
   * Raise the fence to `token`: the new holder's first act (Part 4, "Raise the fence first"). One conditional
   * UpdateItem, never raised or not above `token`; equal is accepted, so a retry after a lost answer is harmless.
   * @param token - the holder's fencing token (its lease's epoch)
   * @param set - other attributes to write in the same update (e.g. the holder's name)
   * @returns the item as it was before the raise (undefined if it did not exist)
   * @throws FencedOutError carrying the fence met, when a higher token was raised first
   */
  async raise(token: number, set: Readonly<Record<string, NativeAttributeValue>> = {}): Promise<Record<string, unknown> | undefined> {
    const names: Record<string, string> = {};
    const values: Record<string, NativeAttributeValue> = { ':t': token };
    const assignments = [`${Attr.fence} = :t`];
    Object.entries(set).forEach(([name, value], i) => {
      names[`#s${i}`] = name;
      values[`:s${i}`] = value;
      assignments.push(`#s${i} = :s${i}`);
    });
    try {
      // Safe to send again (a transaction holding the item answers TransactionConflictException): equal is accepted.
      const out = await retryTransient(backoffOf(this.target), () =>
        this.target.ddb.send(
          new UpdateCommand({
            TableName: this.target.table,
            Key: this.target.key,
            ConditionExpression: unraisedOrNotLower,
            UpdateExpression: `SET ${assignments.join(', ')}`,
            ...(assignments.length > 1 ? { ExpressionAttributeNames: names } : {}),
            ExpressionAttributeValues: values,
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
      return out.Attributes;
    } catch (err) {
      if (!isConditionalCheckFailed(err)) throw err;
      throw new FencedOutError(this.resource, token, fenceOf(failedItem(err)), { cause: err });
    }
  }

  /**
   * The fence as something to write with (etcd's `IsOwner()` Cmp): a ConditionCheck, in the low-level AttributeValue
   * form, for the caller to put in its own TransactWriteItems. The transaction then commits only while the fence is
   * not above `token`; when it is, DynamoDB cancels the whole transaction with reason ConditionalCheckFailed at this
   * item's position and, with ReturnValuesOnConditionCheckFailure ALL_OLD, the fence item that won.
   * @param token - the holder's fencing token
   */
  guard(token: number): TransactWriteItem {
    return {
      ConditionCheck: {
        TableName: this.target.table,
        Key: this.wireKey,
        ConditionExpression: FENCE_CLAUSE,
        ExpressionAttributeValues: { ':t': { N: String(token) } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    };
  }

  /**
   * What a failed TransactWriteItems that carried `guard(token)` at `position` means for the fence: a FencedOutError
   * (with the fence item that won) when the guard's condition failed, undefined when the error is anything else.
   * `throw fence.fencedOut(err, token) ?? err` keeps a caller's own transaction as typed as writeBatch.
   * @param position - where the guard sits in the transaction's TransactItems @default 0
   */
  fencedOut(err: unknown, token: number, position = 0): FencedOutError | undefined {
    const reason = cancellationReasons(err)?.[position];
    if (reason?.Code !== 'ConditionalCheckFailed') return undefined;
    return new FencedOutError(this.resource, token, reason.Item ? fenceOf(failedItem(reason)) : undefined, { cause: err });
  }

  /** The fence item, read strongly consistent (undefined: never raised). */
  async read(): Promise<Record<string, unknown> | undefined> {
    const out = await this.target.ddb.send(new GetCommand({ TableName: this.target.table, Key: this.target.key, ConsistentRead: true }));
    return out.Item;
  }
}

/** A fence bound to one item: `fenceOn({ ddb, table, key, clock }).raise(token)`, `.guard(token)`. */
export function fenceOn(target: FenceTarget): Fence {
  return new Fence(target);
}

/** The `fence` attribute of an item returned with a failed condition, if it has one. */
function fenceOf(item: Record<string, unknown> | undefined): number | undefined {
  return item?.[Attr.fence] === undefined ? undefined : Number(item[Attr.fence]);
}

// ─── A job's fences: the job row and its chunk fence items (docs/DESIGN.md § Chunk fences) ───────────────────────

/** A job row as stored: its fence, its state, its owner, and (only while RUNNING) the sparse-index attributes. */
export interface JobRow {
  readonly pk: string;
  readonly fence?: number;
  readonly state?: JobState;
  readonly owner_token?: number;
  readonly owner?: string;
  readonly chunk_count?: number;
  readonly claim_shard?: string;
  readonly claimed_since?: string;
  /** Re-queues the sweeper recorded on the night (core/sweeper.ts `requeue`); absent until the first. */
  readonly requeues?: number;
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

/** At most this many single-item requests of one raise or read in flight at once. */
const FENCE_ITEMS_IN_FLIGHT = 10;

/** What a job's fences need: the job table (job rows and chunk fence items), the store, the clock for backoffs. */
export interface FenceDeps {
  /** The document client. */
  readonly ddb: DynamoDBDocumentClient;
  /** The job table. */
  readonly jobs: string;
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
  return new Fence({ ddb: deps.ddb, table: deps.jobs, key: { [Attr.pk]: fenceKey }, clock: deps.clock, random: deps.random, resource });
}

/** The job row, read strongly consistent (undefined: never raised). */
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
          ConditionExpression: `${unraisedOrNotLower} AND ${notDone}`,
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
  // Safe to send again (a zombie's transaction on this chunk may hold the item): equal is accepted, and a landed try
  // left done_by as it was, so the old item still tells the progress.
  await eachBounded(chunks, async (chunk) => {
    const before = await jobFence(deps, chunkFenceKey(jobId, chunk)).raise(token, { [Attr.chunk]: chunk });
    old.set(chunk, before as ChunkFence | undefined);
  });
  return old;
}

/** The night's chunk fence items, read strongly consistent (undefined: never raised). */
export async function readChunkFences(deps: Pick<FenceDeps, 'ddb' | 'jobs'>, jobId: string, chunkCount: number): Promise<(ChunkFence | undefined)[]> {
  const items = new Array<ChunkFence | undefined>(chunkCount);
  await eachBounded(
    Array.from({ length: chunkCount }, (_, c) => c),
    async (c) => {
      const out = await deps.ddb.send(new GetCommand({ TableName: deps.jobs, Key: { [Attr.pk]: chunkFenceKey(jobId, c) }, ConsistentRead: true }));
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
          Key: { [Attr.pk]: chunkFenceKey(jobId, chunk) },
          ConditionExpression: stillOurs,
          UpdateExpression: `SET ${Attr.doneBy} = :t`,
          ExpressionAttributeValues: { ':t': token },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    throw new FencedOutError('chunk-fence', token, fenceOf(failedItem(err)), { cause: err });
  }
}

/**
 * Complete (design §4): state DONE, and the row leaves the sparse index in the same write, conditional on still
 * owning the job row. First every chunk fence item must say done (done marks are never removed, so a read that
 * finds them all stays true): DONE never stands over a missing chunk, whatever ran the chunks.
 * @param beforeDone - what must be DONE before the row (the manifest): run once every chunk is found done
 */
export async function complete(deps: FenceDeps, jobId: string, token: number, beforeDone?: () => Promise<void>): Promise<void> {
  const row = await readJob(deps, jobId);
  if (row?.fence !== token || row.owner_token !== token) throw new FencedOutError('job-row', token, row?.fence);
  const chunks = await readChunkFences(deps, jobId, row.chunk_count ?? 0);
  const notDone = chunks.flatMap((item, c) => (item?.done_by === undefined ? [c] : []));
  if (notDone.length > 0) throw new NightIncompleteError(jobId, notDone);
  await beforeDone?.();
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
    throw new FencedOutError('job-row', token, fenceOf(failedItem(err)), { cause: err });
  }
}

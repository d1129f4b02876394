/**
 * The fence on the job row: the one place where an old holder is actually stopped (reference Parts 4 and 5).
 *
 *   raise     the new holder's FIRST act, before it reads or writes anything else: one conditional UpdateItem that
 *             sets fence = token, state = RUNNING, and the sparse-index attributes, returning the old row (ALL_OLD)
 *             so the holder learns the progress without a second read (Part 4, "Raise the fence first"; Part 6).
 *   fencedTransaction  the fenced write, in one place (Part 5): 1 ConditionCheck on the job row, fence <= token
 *             (equal accepted: the current holder writes many times with the same token, Part 4 "Why equal is
 *             accepted"), + up to 99 Puts, in one TransactWriteItems; writeBatch sends it and reads the outcome.
 *   complete  DONE, leaving the sparse index, conditional on still being the fence's owner.
 *
 * A rejection by the fence means: you have lost the lock; stop and discard local state.
 */
import { createHash } from 'node:crypto';
import { TransactWriteItemsCommand, type TransactWriteItem, type TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type Clock, wallIso } from './clock';
import {
  DEFAULT_BACKOFF, cancellationReasons, classifyCancellation, failedItem, fullJitterMs, isConditionalCheckFailed, isTransient, retryTransient,
  type Backoff,
} from './conditions';
import { AlreadyDoneError, FencedOutError } from './errors';
import type { Invoice } from './invoices';
import { Attr, CLAIM_SHARD, type JobState } from './schema';

export interface JobRow {
  readonly pk: string;
  readonly fence?: number;
  readonly state?: JobState;
  readonly owner_token?: number;
  readonly owner?: string;
  readonly chunks_done?: Set<number>;
  readonly chunk_count?: number;
  readonly claim_shard?: string;
  readonly claimed_since?: string;
}

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
 * Raise the fence to `token` (Part 4). In the same write the row enters the sparse index (claim_shard +
 * claimed_since), so no claim can exist without being findable by the sweeper (Part 6). Returns the old row.
 */
export async function raise(deps: FenceDeps, jobId: string, token: number, owner: string, chunkCount: number): Promise<JobRow | undefined> {
  try {
    // A transient failure (TransactionConflictException: a transaction held the row) is sent again: the condition
    // still holds if the first try landed, because equal is accepted.
    const out = await retryTransient(backoffOf(deps), () => deps.ddb.send(
      new UpdateCommand({
        TableName: deps.jobs,
        Key: { [Attr.pk]: jobId },
        ConditionExpression: `${notLower} AND ${notDone}`,
        UpdateExpression:
          `SET ${Attr.fence} = :t, #state = :running, ${Attr.ownerToken} = :t, #owner = :me, ` +
          `${Attr.chunkCount} = :chunks, ${Attr.claimShard} = :shard, ${Attr.claimedSince} = :since`,
        ExpressionAttributeNames: { '#state': Attr.state, '#owner': Attr.owner },
        ExpressionAttributeValues: {
          ':t': token, ':done': 'DONE', ':running': 'RUNNING', ':me': owner, ':chunks': chunkCount,
          ':shard': CLAIM_SHARD, ':since': wallIso(deps.clock), // informational: the sweeper never compares it
        },
        ReturnValues: 'ALL_OLD',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    ));
    return out.Attributes as JobRow | undefined;
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    const row = failedItem(err) as JobRow | undefined;
    if (row?.state === 'DONE') throw new AlreadyDoneError(jobId, row.fence);
    throw new FencedOutError('job-row', token, row?.fence, { cause: err });
  }
}

/**
 * The fenced transaction (Part 5): 1 ConditionCheck on the job row (fence <= token: reject lower, accept equal)
 * + one Put per invoice (recorded once: attribute_not_exists). Built as AttributeValues directly rather than
 * through the document client's generic marshalling: this runs 510 times a night and that cut the client CPU per
 * transaction by a third (bench/waste.ts measures both). The ClientRequestToken makes a retry idempotent.
 */
export function fencedTransaction(tables: { readonly jobs: string; readonly invoices: string }, jobId: string, token: number, batch: readonly Invoice[]): TransactWriteItemsCommandInput {
  const t = { N: String(token) };
  const check: TransactWriteItem = {
    ConditionCheck: {
      TableName: tables.jobs,
      Key: { [Attr.pk]: { S: jobId } },
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
  return { ClientRequestToken: requestToken(tables, jobId, token, batch), TransactItems: [check, ...puts] };
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
 * The fenced write (Part 5): one TransactWriteItems of 1 ConditionCheck on the job row + up to 99 Puts. A
 * cancellation is decided by its reasons (conditions.classifyCancellation; docs/DESIGN.md "Retry classification"):
 *   - ConditionalCheckFailed on the check (position 0): we have lost the lock → FencedOutError, nothing was written;
 *   - ConditionalCheckFailed on a Put: that invoice was already recorded by an earlier holder; drop it and send the
 *     rest (a new request, so a new ClientRequestToken), so each invoice is recorded exactly once. A conflict
 *     reported beside it changes nothing: the condition decides;
 *   - only transient reasons (TransactionConflict: another transaction or write touched one of our items, the job
 *     row we only ConditionCheck included; throttling), or any other transient error: send the SAME request again
 *     after a full-jitter backoff. Same request, same ClientRequestToken, so a retry of a transaction that was
 *     applied but whose response was lost succeeds without writing again (DynamoDB keeps it idempotent for 10 min).
 */
export async function writeBatch(deps: FenceDeps, jobId: string, token: number, batch: readonly Invoice[]): Promise<BatchResult> {
  let pending = batch;
  let alreadyRecorded = 0;
  let transactions = 0;
  let transientRetries = 0;
  while (pending.length > 0) {
    transactions++;
    try {
      await deps.ddb.send(new TransactWriteItemsCommand(fencedTransaction(deps, jobId, token, pending)));
      return { recorded: pending.length, alreadyRecorded, transactions };
    } catch (err) {
      const reasons = cancellationReasons(err);
      const cancellation = reasons === undefined ? undefined : classifyCancellation(reasons);
      if (reasons !== undefined && cancellation?.kind === 'condition') {
        if (cancellation.failed.includes(0)) {
          const row = reasons[0].Item ? failedItem(reasons[0]) : undefined;
          throw new FencedOutError('job-row', token, row ? Number(row[Attr.fence]) : undefined, { cause: err });
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
function requestToken(tables: { readonly jobs: string; readonly invoices: string }, jobId: string, token: number, batch: readonly Invoice[]): string {
  const h = createHash('sha256').update(`${tables.jobs}|${tables.invoices}|${jobId}|${token}`);
  for (const inv of batch) h.update(`|${inv.pk}`);
  return h.digest('hex').slice(0, 36);
}

/** Record a chunk as done on the job row, conditional on still owning the fence. */
export async function markChunkDone(deps: FenceDeps, jobId: string, token: number, chunk: number): Promise<void> {
  await ownerUpdate(deps, jobId, token, `ADD ${Attr.chunksDone} :c`, { ':c': new Set([chunk]) });
}

/** Complete (design §4): state DONE, and the row leaves the sparse index in the same write. */
export async function complete(deps: FenceDeps, jobId: string, token: number): Promise<void> {
  await ownerUpdate(deps, jobId, token, `SET #state = :done REMOVE ${Attr.claimShard}, ${Attr.claimedSince}`, { ':done': 'DONE' }, { '#state': Attr.state });
}

async function ownerUpdate(
  deps: FenceDeps, jobId: string, token: number, update: string,
  values: Record<string, unknown>, names?: Record<string, string>,
): Promise<void> {
  try {
    // Safe to send again: ADD of a set member and SET DONE leave the row as one landed try would.
    await retryTransient(backoffOf(deps), () => deps.ddb.send(
      new UpdateCommand({
        TableName: deps.jobs,
        Key: { [Attr.pk]: jobId },
        ConditionExpression: stillOwner,
        UpdateExpression: update,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: { ':t': token, ...values },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    ));
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    const row = failedItem(err);
    throw new FencedOutError('job-row', token, row ? Number(row[Attr.fence]) : undefined, { cause: err });
  }
}

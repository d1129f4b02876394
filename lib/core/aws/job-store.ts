/**
 * The job store on DynamoDB (lib/core/store/jobs.ts): the ONLY place with the job row's and the chunk fences' condition
 * expressions, the fenced batch's transaction, the sweeper's re-queue and the sparse index's query, and where their
 * conditional failures and cancellation reasons become typed outcomes (ALL_OLD: the item that won, no second read).
 * Each method is one request; transient errors are thrown as the SDK gives them (conditions.isTransient decides).
 */
import type { AttributeValue, TransactWriteItem, TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, QueryCommand, ScanCommand, type DynamoDBDocumentClient, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { cancellationReasons, classifyCancellation } from '../conditions';
import { conditionalUpdate, failedItem } from './conditions';
import { checkTableOnce } from './table-check';
import { Attr, JOB_TABLE } from '../schema';
import type {
  BatchOutcome,
  BatchPut,
  ChunkFence,
  Conditional,
  EffectRecord,
  FenceItem,
  FenceStore,
  JobRow,
  JobStore,
  Page,
  RequeueSighting,
  RowRaise,
} from '../store/jobs';

import type { DocumentClient } from './document-client';

export type { DocumentClient };

// Named condition clauses, each with its reason.
/**
 * THE fence comparison, written once: our token `:t` is not lower than the highest the fence has accepted.
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
/** Still RUNNING, by the owner, at the fence and count the sweeper saw: anything else means someone moved it on. */
const asSighted = `#state = :running AND ${Attr.ownerToken} = :owner AND ${Attr.fence} = :fence`;
/** The count seen: a missing count is 0, the first re-queue finds no attribute. */
const sameCount = (requeues: number) => (requeues === 0 ? `attribute_not_exists(${Attr.requeues})` : `${Attr.requeues} = :seen`);
/** Recorded once: a put lands only if no holder recorded this key before. */
const keyAbsent = 'attribute_not_exists(#key)';

/**
 * The fence as a ConditionCheck, in the low-level AttributeValue form, for any TransactWriteItems: the transaction
 * commits only while the fence is not above `token`; else it is cancelled with ConditionalCheckFailed at this
 * position and (ALL_OLD) the fence item that won.
 * @param wireKey - the fence item's key, marshalled (once, by the caller)
 */
export function fenceCheck(table: string, wireKey: Record<string, AttributeValue>, token: number): TransactWriteItem {
  return {
    ConditionCheck: {
      TableName: table,
      Key: wireKey,
      ConditionExpression: FENCE_CLAUSE,
      ExpressionAttributeValues: { ':t': { N: String(token) } },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    },
  };
}

/** Fence keys in AttributeValue form, marshalled once per fence item (a Fence passes the same one every batch). */
const wireKeys = new WeakMap<FenceItem, Record<string, AttributeValue>>();
function wireKeyOf(fence: FenceItem): Record<string, AttributeValue> {
  let key = wireKeys.get(fence);
  if (!key) wireKeys.set(fence, (key = marshall(fence.key)));
  return key;
}

/** One conditional UpdateItem, its ALL_OLD answer as a Conditional (a failed condition is an outcome, not a throw). */
async function conditional<T>(ddb: DynamoDBDocumentClient, input: UpdateCommandInput): Promise<Conditional<T>> {
  const out = await conditionalUpdate(ddb, { ...input, ReturnValues: 'ALL_OLD' });
  return out.ok ? { ok: true, old: out.attributes as T | undefined } : { ok: false, current: out.current as T | undefined };
}

/** The generic fence's operations on DynamoDB: any table, any key. */
export class DynamoFenceStore implements FenceStore {
  constructor(readonly ddb: DynamoDBDocumentClient) {}

  raiseFence(item: FenceItem, token: number, set: Readonly<Record<string, unknown>> = {}): Promise<Conditional<Record<string, unknown>>> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = { ':t': token };
    const assignments = [`${Attr.fence} = :t`];
    Object.entries(set).forEach(([name, value], i) => {
      names[`#s${i}`] = name;
      values[`:s${i}`] = value;
      assignments.push(`#s${i} = :s${i}`);
    });
    return conditional(this.ddb, {
      TableName: item.table,
      Key: item.key,
      ConditionExpression: unraisedOrNotLower,
      UpdateExpression: `SET ${assignments.join(', ')}`,
      ...(assignments.length > 1 ? { ExpressionAttributeNames: names } : {}),
      ExpressionAttributeValues: values,
    });
  }

  async readFence(item: FenceItem): Promise<Record<string, unknown> | undefined> {
    const out = await this.ddb.send(new GetCommand({ TableName: item.table, Key: item.key, ConsistentRead: true }));
    return out.Item;
  }

  async readEffect(table: string, key: string): Promise<EffectRecord | undefined> {
    const out = await this.ddb.send(new GetCommand({ TableName: table, Key: { [Attr.pk]: key }, ConsistentRead: true }));
    return out.Item as EffectRecord | undefined;
  }

  async markEffectDone(
    table: string,
    key: string,
    done: { readonly token: number; readonly result?: string; readonly wallIso: string },
  ): Promise<boolean> {
    // Only over a recorded intent; a DONE record is set to DONE again, which changes nothing that matters: the first call's
    // answer stays unless this one brings its own.
    const out = await conditionalUpdate(this.ddb, {
      TableName: table,
      Key: { [Attr.pk]: key },
      ConditionExpression: `attribute_exists(${Attr.pk})`,
      UpdateExpression: `SET #state = :done, ${Attr.doneBy} = if_not_exists(${Attr.doneBy}, :t), ${Attr.doneAt} = if_not_exists(${Attr.doneAt}, :at)${done.result === undefined ? '' : ', #result = if_not_exists(#result, :r)'}`,
      // state and result are DynamoDB reserved words: by name placeholder
      ExpressionAttributeNames: { '#state': Attr.state, ...(done.result === undefined ? {} : { '#result': Attr.result }) },
      ExpressionAttributeValues: {
        ':done': 'DONE',
        ':t': done.token,
        ':at': done.wallIso,
        ...(done.result === undefined ? {} : { ':r': done.result }),
      },
    });
    return out.ok;
  }

  /**
   * The fenced transaction: the fence's check at position 0, then one Put per item, each only if its key is absent.
   * @throws the marshaller's error for a document value DynamoDB cannot hold (before anything is sent)
   */
  static transaction(fence: FenceItem, token: number, puts: readonly BatchPut[], requestToken: string): TransactWriteItemsCommandInput {
    const items = puts.map((p): TransactWriteItem => ({
      Put: {
        TableName: p.table,
        // A document is marshalled here, the one place that knows DynamoDB's wire form; a wire item goes as it is.
        Item: p.item ? (p.item as Record<string, AttributeValue>) : marshall(p.document),
        ConditionExpression: keyAbsent,
        ExpressionAttributeNames: { '#key': p.keyAttribute },
      },
    }));
    return { ClientRequestToken: requestToken, TransactItems: [fenceCheck(fence.table, wireKeyOf(fence), token), ...items] };
  }

  async recordBatch(fence: FenceItem, token: number, puts: readonly BatchPut[], requestToken: string): Promise<BatchOutcome> {
    try {
      await this.ddb.send(new TransactWriteItemsCommand(DynamoFenceStore.transaction(fence, token, puts, requestToken)));
      return { kind: 'recorded' };
    } catch (err) {
      // Decided by the reasons, never the exception's name (docs/DESIGN.md "Retry classification"): a conflict
      // reported beside a failed condition changes nothing, the condition decides; only-transient reasons are thrown.
      const reasons = cancellationReasons(err);
      const cancellation = reasons === undefined ? undefined : classifyCancellation(reasons);
      if (reasons === undefined || cancellation?.kind !== 'condition') throw err;
      if (cancellation.failed.includes(0)) {
        const won = reasons[0].Item;
        return { kind: 'fenced-out', current: won ? failedItem(reasons[0]) : undefined, cause: err };
      }
      return { kind: 'already-recorded', positions: cancellation.failed.map((i) => i - 1) }; // position i is puts[i - 1]
    }
  }
}

/** The job table on DynamoDB: job rows, chunk fence items, the sparse index `claimed`. */
export class DynamoJobStore extends DynamoFenceStore implements JobStore {
  constructor(
    ddb: DynamoDBDocumentClient,
    readonly table: string,
    /** Items per page of the sparse index's query and of a scan (DynamoDB's Limit), so a test runs the paging path. @defaultValue DynamoDB's page of 1 MB */
    private readonly pageLimit?: number,
  ) {
    super(ddb);
  }

  async readJob(jobId: string): Promise<JobRow | undefined> {
    const out = await this.ddb.send(new GetCommand({ TableName: this.table, Key: { [Attr.pk]: jobId }, ConsistentRead: true }));
    return out.Item as JobRow | undefined;
  }

  /** The row enters the sparse index (claim_shard + claimed_since) in the same write as the raise. */
  async raiseJob(jobId: string, raise: RowRaise): Promise<Conditional<JobRow>> {
    // Before the process's first raise: a job table with a TTL, the wrong key or no sparse index is refused unwritten.
    await checkTableOnce(this.ddb, this.table, JOB_TABLE);
    return conditional<JobRow>(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: jobId },
      ConditionExpression: `${unraisedOrNotLower} AND ${notDone}`,
      UpdateExpression:
        `SET ${Attr.fence} = :t, #state = :running, ${Attr.ownerToken} = :t, #owner = :me, ` +
        `${Attr.chunkCount} = :chunks, ${Attr.claimShard} = :shard, ${Attr.claimedSince} = :since`,
      ExpressionAttributeNames: { '#state': Attr.state, '#owner': Attr.owner },
      ExpressionAttributeValues: {
        ':t': raise.token,
        ':done': 'DONE',
        ':running': 'RUNNING',
        ':me': raise.owner,
        ':chunks': raise.chunkCount,
        ':shard': raise.shard,
        ':since': raise.claimedSince, // informational: the sweeper never compares it
      },
    });
  }

  markChunkDone(chunkKey: string, token: number): Promise<Conditional<ChunkFence>> {
    return conditional<ChunkFence>(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: chunkKey },
      ConditionExpression: stillOurs,
      UpdateExpression: `SET ${Attr.doneBy} = :t`,
      ExpressionAttributeValues: { ':t': token },
    });
  }

  /** DONE leaves the sparse index in the same write. */
  complete(jobId: string, token: number): Promise<Conditional<JobRow>> {
    return conditional<JobRow>(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: jobId },
      ConditionExpression: stillOwner,
      UpdateExpression: `SET #state = :done REMOVE ${Attr.claimShard}, ${Attr.claimedSince}`,
      ExpressionAttributeNames: { '#state': Attr.state },
      ExpressionAttributeValues: { ':t': token, ':done': 'DONE' },
    });
  }

  /**
   * Only counts the re-queue: the row stays RUNNING, the dead holder's, in the sparse index (invariant 3), until the
   * new run's raise takes it over, so a new run that dies before its raise leaves it for the next sweeps.
   */
  requeue(jobId: string, seen: RequeueSighting): Promise<Conditional<JobRow>> {
    return conditional<JobRow>(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: jobId },
      ConditionExpression: `${asSighted} AND ${sameCount(seen.requeues)}`,
      UpdateExpression: `SET ${Attr.requeues} = :next`,
      ExpressionAttributeNames: { '#state': Attr.state },
      ExpressionAttributeValues: {
        ':running': 'RUNNING',
        ':owner': seen.ownerToken,
        ':fence': seen.fence,
        ':next': seen.requeues + 1,
        ...(seen.requeues === 0 ? {} : { ':seen': seen.requeues }),
      },
    });
  }

  async claimedPage(shard: string, start?: string): Promise<Page<JobRow>> {
    const page = await this.ddb.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: JOB_TABLE.sparseIndex!.name,
        KeyConditionExpression: `${Attr.claimShard} = :shard`,
        ExpressionAttributeValues: { ':shard': shard },
        Limit: this.pageLimit,
        ExclusiveStartKey: start === undefined ? undefined : (JSON.parse(start) as Record<string, unknown>),
      }),
    );
    return pageOf(page.Items as JobRow[] | undefined, page.LastEvaluatedKey);
  }

  async scanPage(start?: string): Promise<Page<Record<string, unknown>>> {
    const out = await this.ddb.send(
      new ScanCommand({
        TableName: this.table,
        ConsistentRead: true,
        Limit: this.pageLimit,
        ExclusiveStartKey: start === undefined ? undefined : (JSON.parse(start) as Record<string, unknown>),
      }),
    );
    return pageOf(out.Items, out.LastEvaluatedKey);
  }
}

function pageOf<T>(items: T[] | undefined, last: Record<string, unknown> | undefined): Page<T> {
  return { items: items ?? [], ...(last ? { next: JSON.stringify(last) } : {}) };
}

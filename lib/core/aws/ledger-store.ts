/**
 * The epoch ledger's store on DynamoDB: the only place the epoch fence's conditions, update expressions and requests
 * are written, and where a failed condition or a cancelled transaction becomes an outcome.
 *
 * The fence item (`pk` = the ledger's key) holds `fence` (the highest epoch that has written or bumped) and `version`
 * (the last version written); each entry is its own item (`pk` = entryKey), beside it in the same table.
 * Sources: UpdateItem (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html),
 * TransactWriteItems (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
 */
import { GetCommand, ScanCommand, TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createHash } from 'node:crypto';
import { cancellationReasons, classifyCancellation } from '../conditions';
import { conditionalUpdate, failedItem } from './conditions';
import { Attr } from '../schema';
import type { ActionReason, AppendOutcome, LedgerEntry, LedgerHead, LedgerStore, RaiseOutcome } from '../store/ledger';

export type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** The fence clause: the store accepts a write whose epoch is at least the highest it has seen (equal is accepted). */
const EPOCH_CLAUSE = `(attribute_not_exists(${Attr.fence}) OR ${Attr.fence} <= :e)`;
/** The first entry: no version written yet, so two first writers cannot both write version 1. */
const FIRST_VERSION = `attribute_not_exists(${Attr.version})`;
/** Any later entry: the head is at the version before it, so no version is skipped or written twice. */
const FOLLOWS_HEAD = `${Attr.version} = :prev`;
/** The entry's own item: written once, never overwritten. */
const ENTRY_ABSENT = `attribute_not_exists(${Attr.pk})`;

/** The fence item as plain numbers; absent attributes read as 0 (a new ledger). */
function headOf(item: Record<string, unknown> | undefined): LedgerHead {
  return { epoch: Number(item?.[Attr.fence] ?? 0), version: Number(item?.[Attr.version] ?? 0) };
}

/** The epoch ledgers of one DynamoDB table (partition key `pk`). */
export class DynamoLedgerStore implements LedgerStore {
  constructor(
    private readonly ddb: DynamoDBDocumentClient,
    /** The consumer's table: the fence items and the entries live side by side in it. */
    readonly table: string,
  ) {}

  async head(key: string): Promise<LedgerHead> {
    const out = await this.ddb.send(new GetCommand({ TableName: this.table, Key: { [Attr.pk]: key }, ConsistentRead: true }));
    return headOf(out.Item);
  }

  async raise(key: string, epoch: number): Promise<RaiseOutcome> {
    const out = await conditionalUpdate(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: key },
      ConditionExpression: EPOCH_CLAUSE,
      UpdateExpression: `SET ${Attr.fence} = :e`,
      ExpressionAttributeValues: { ':e': epoch },
      ReturnValues: 'ALL_NEW', // and, on a failed condition, the fence that refused us, without a second read
    });
    return out.ok ? { ok: true, head: headOf(out.attributes) } : { ok: false, current: headOf(out.current) };
  }

  async append(key: string, entry: LedgerEntry, requestToken: string): Promise<AppendOutcome> {
    const first = entry.version === 1;
    try {
      await this.ddb.send(
        new TransactWriteCommand({
          // The table is part of the token: another table's ledger with the same key and entry is another request.
          ClientRequestToken: createHash('sha256')
            .update(JSON.stringify([this.table, requestToken]))
            .digest('hex')
            .slice(0, 36),
          TransactItems: [
            {
              Update: {
                TableName: this.table,
                Key: { [Attr.pk]: key },
                ConditionExpression: `${EPOCH_CLAUSE} AND ${first ? FIRST_VERSION : FOLLOWS_HEAD}`,
                UpdateExpression: `SET ${Attr.fence} = :e, ${Attr.version} = :v`,
                ExpressionAttributeValues: { ':e': entry.epoch, ':v': entry.version, ...(first ? {} : { ':prev': entry.version - 1 }) },
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD', // the head that refused us, without a second read
              },
            },
            { Put: { TableName: this.table, Item: entry, ConditionExpression: ENTRY_ABSENT } },
          ],
        }),
      );
      return { ok: true };
    } catch (err) {
      const reasons = cancellationReasons(err);
      // Only a failed condition is an answer; a transient cancellation (TransactionConflict, throttling) is thrown.
      if (reasons === undefined || classifyCancellation(reasons).kind !== 'condition') throw err;
      const codeAt = (i: number): ActionReason => (reasons[i]?.Code === 'ConditionalCheckFailed' ? 'ConditionalCheckFailed' : 'None');
      const old = reasons[0]?.Item ? failedItem({ Item: reasons[0].Item }) : undefined;
      return { ok: false, reasons: [codeAt(0), codeAt(1)], current: old && headOf(old) };
    }
  }

  async entries(key: string): Promise<LedgerEntry[]> {
    const found: LedgerEntry[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.ddb.send(
        new ScanCommand({
          TableName: this.table,
          ConsistentRead: true,
          FilterExpression: `begins_with(${Attr.pk}, :prefix)`,
          ExpressionAttributeValues: { ':prefix': `${key}#` },
          ExclusiveStartKey: start,
        }),
      );
      found.push(...((page.Items ?? []) as LedgerEntry[]));
      start = page.LastEvaluatedKey;
    } while (start);
    return found.sort((a, b) => a.version - b.version);
  }
}

/**
 * What a failed DynamoDB condition says, read where the AWS stores turn it into a typed outcome: the exception's
 * name, and the item that won (ReturnValuesOnConditionCheckFailure: ALL_OLD, so a failure needs no second read).
 */
import { UpdateCommand, type DynamoDBDocumentClient, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';

function isConditionalCheckFailed(err: unknown): err is Error & { Item?: Record<string, unknown> } {
  return (err as { name?: string })?.name === 'ConditionalCheckFailedException';
}

/** The item returned with a ConditionalCheckFailedException, as plain JS (the SDK leaves it marshalled). */
export function failedItem(err: { Item?: Record<string, unknown> }): Record<string, unknown> | undefined {
  if (!err.Item) return undefined;
  return unmarshall(err.Item as Parameters<typeof unmarshall>[0]);
}

/** What one conditional UpdateItem came to: the attributes it asked to return, or the item that won. */
export type UpdateOutcome =
  | { readonly ok: true; readonly attributes: Record<string, unknown> | undefined }
  | { readonly ok: false; readonly current: Record<string, unknown> | undefined };

/**
 * One conditional UpdateItem, the one place a failed condition becomes an outcome instead of an exception: the item
 * that won comes back with it (ReturnValuesOnConditionCheckFailure ALL_OLD), so the caller needs no second read.
 * Every other error (throttling, a conflict with a transaction, a timeout) is thrown as it came, for the retry helper.
 */
export async function conditionalUpdate(ddb: DynamoDBDocumentClient, input: UpdateCommandInput): Promise<UpdateOutcome> {
  try {
    const out = await ddb.send(new UpdateCommand({ ...input, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }));
    return { ok: true, attributes: out.Attributes };
  } catch (err) {
    if (!isConditionalCheckFailed(err)) throw err;
    return { ok: false, current: failedItem(err) };
  }
}

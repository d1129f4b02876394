/**
 * What a failed DynamoDB condition says, read where the AWS stores turn it into a typed outcome: the exception's
 * name, and the item that won (ReturnValuesOnConditionCheckFailure: ALL_OLD, so a failure needs no second read).
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';

export function isConditionalCheckFailed(err: unknown): err is Error & { Item?: Record<string, unknown> } {
  return (err as { name?: string })?.name === 'ConditionalCheckFailedException';
}

/** The item returned with a ConditionalCheckFailedException, as plain JS (the SDK leaves it marshalled). */
export function failedItem(err: { Item?: Record<string, unknown> }): Record<string, unknown> | undefined {
  if (!err.Item) return undefined;
  return unmarshall(err.Item as Parameters<typeof unmarshall>[0]);
}

/**
 * Helpers shared by the modules that write with conditions: recognising a failed condition and reading
 * the item that won (ReturnValuesOnConditionCheckFailure: ALL_OLD), so a failure needs no second read.
 */
import { randomUUID } from 'node:crypto';
import { unmarshall } from '@aws-sdk/util-dynamodb';

export function isConditionalCheckFailed(err: unknown): err is Error & { Item?: Record<string, unknown> } {
  return (err as { name?: string })?.name === 'ConditionalCheckFailedException';
}

/** The item returned with a ConditionalCheckFailedException, as plain JS (the SDK leaves it marshalled). */
export function failedItem(err: { Item?: Record<string, unknown> }): Record<string, unknown> | undefined {
  if (!err.Item) return undefined;
  return unmarshall(err.Item as Parameters<typeof unmarshall>[0]);
}

/** A fresh record version number: written by every claim, renewal and release (Part 5). */
export function newRvn(): string {
  return randomUUID();
}

/** Errors worth retrying: throttling, transient service errors, timeouts and dropped connections. */
export function isTransient(err: unknown): boolean {
  const e = err as { name?: string; code?: string; $retryable?: unknown; $metadata?: { httpStatusCode?: number } };
  if (e?.$retryable) return true;
  const name = e?.name ?? '';
  if (/Throttl|ProvisionedThroughputExceeded|RequestLimitExceeded|InternalServerError|ServiceUnavailable|TransactionConflict|TimeoutError|RequestTimeout/.test(name)) return true;
  if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN'].includes(e?.code ?? '')) return true;
  const status = e?.$metadata?.httpStatusCode ?? 0;
  return status >= 500;
}

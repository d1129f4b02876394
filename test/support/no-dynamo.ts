import type { DocumentClient } from '../../lib/core/aws/document-client';
import type { Clock } from '../../lib/core/clock';
import type { LeaseDeps } from '../../lib/core/lease';
import type { LockStore } from '../../lib/core/store/lock';

/**
 * A document client that refuses every call. Deps still name a client beside their `store`; on the memory stores this
 * one makes any call that goes around them fail the test instead of reaching DynamoDB.
 */
export const noDynamo = {
  send: () => Promise.reject(new Error('DynamoDB reached: a call went around the memory stores')),
} as unknown as DocumentClient;

/** Lease deps on `store` and `clock` alone: the client and table the deps still name are never reached. */
export function onLockStore(store: LockStore, clock: Clock, more: Partial<LeaseDeps> = {}): LeaseDeps {
  return { ddb: noDynamo, table: 'unused', store, clock, ...more };
}

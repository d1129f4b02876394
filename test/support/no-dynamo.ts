import type { DocumentClient } from '../../core/aws/document-client';

/**
 * A document client that refuses every call. Deps still name a client beside their `store`; on the memory stores this
 * one makes any call that goes around them fail the test instead of reaching DynamoDB.
 */
export const noDynamo = {
  send: () => Promise.reject(new Error('DynamoDB reached: a call went around the memory stores')),
} as unknown as DocumentClient;

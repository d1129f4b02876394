import type { DocumentClient } from '../../lib/core/aws/document-client';

/**
 * A document client that refuses every call: a runtime given the in-memory stores still takes clients, and with this
 * one any call that goes around the stores fails the test instead of reaching DynamoDB.
 */
export const noDynamo = {
  send: () => Promise.reject(new Error('DynamoDB reached: a call went around the memory stores')),
} as unknown as DocumentClient;

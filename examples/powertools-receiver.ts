// The receiving side of `sendOnce`, when the call is to a Lambda of yours: Powertools' idempotency utility keyed on the
// idempotency key delivers once per key, whoever sent it and however often.
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

interface DigestRequest {
  readonly to: string;
  readonly idempotencyKey: string; // what sendOnce gave the sender
}

async function deliver(request: DigestRequest): Promise<{ messageId: string }> {
  return { messageId: `sent-to-${request.to}` }; // your mail provider's call
}

export const handler = makeIdempotent(deliver, {
  persistenceStore: new DynamoDBPersistenceLayer({ tableName: process.env.IDEMPOTENCY_TABLE ?? 'idempotency' }),
  config: new IdempotencyConfig({ eventKeyJmesPath: 'idempotencyKey' }),
});

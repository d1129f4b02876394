/**
 * The embedded local stack: the real DynamoDB Local (a JVM) and the local S3 endpoint, with the tables and the
 * bucket created from the one schema. The default wherever no endpoints are given.
 */
import { startDynamoDbLocal, type DynamoDbLocal } from './dynamodb-local';
import { startLocalS3, type LocalS3 } from './s3-server';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { localClients, type Endpoints } from '../lib/core/stores';

export interface EmbeddedStackOptions {
  /** Keep DynamoDB Local's data in this folder (default: in memory). */
  readonly dataDir?: string;
  readonly dynamodbPort?: number;
  readonly s3Port?: number;
}

export interface EmbeddedStack {
  readonly endpoints: Endpoints;
  readonly dynamodb: DynamoDbLocal;
  readonly s3: LocalS3;
  stop(): Promise<void>;
}

export async function startEmbeddedStack(options: EmbeddedStackOptions = {}): Promise<EmbeddedStack> {
  const s3 = await startLocalS3({ port: options.s3Port });
  let dynamodb: DynamoDbLocal;
  try {
    dynamodb = await startDynamoDbLocal({ dataDir: options.dataDir, port: options.dynamodbPort });
    await warmUp({ dynamodb: dynamodb.endpoint, s3: s3.endpoint });
  } catch (err) {
    await Promise.allSettled([s3.stop(), dynamodb!?.stop()]);
    throw err;
  }
  return {
    endpoints: { dynamodb: dynamodb.endpoint, s3: s3.endpoint },
    dynamodb,
    s3,
    stop: async () => {
      await Promise.allSettled([dynamodb.stop(), s3.stop()]);
    },
  };
}

/**
 * A fresh DynamoDB Local JVM answers its first transactions slowly (class loading and JIT: ~2 s for the first
 * TransactWriteItems, measured here), which would eat a short test lease on its first batch. Warm it up on a
 * scratch table before anyone holds a lease.
 */
async function warmUp(endpoints: Endpoints): Promise<void> {
  const clients = localClients(endpoints);
  const table = 'fencepost-warmup';
  try {
    await clients.raw.send(new CreateTableCommand({
      TableName: table, BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    })).catch((err) => { if ((err as Error).name !== 'ResourceInUseException') throw err; });
    for (let round = 0; round < 3; round++) {
      await clients.ddb.send(new TransactWriteCommand({
        TransactItems: [
          { ConditionCheck: { TableName: table, Key: { pk: 'fence' }, ConditionExpression: 'attribute_not_exists(pk) OR fence <= :t', ExpressionAttributeValues: { ':t': 1 } } },
          ...Array.from({ length: 99 }, (_, i) => ({ Put: { TableName: table, Item: { pk: `w${round}-${i}`, n: i } } })),
        ],
      }));
      await clients.ddb.send(new UpdateCommand({ TableName: table, Key: { pk: 'lock' }, UpdateExpression: 'SET rvn = :r', ExpressionAttributeValues: { ':r': String(round) } }));
    }
  } finally {
    clients.destroy();
  }
}

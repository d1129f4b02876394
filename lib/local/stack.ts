/**
 * The embedded local stack: the real DynamoDB Local (a JVM) behind the conflict-faithful proxy
 * (lib/local/dynamodb-proxy.ts), and the local S3 endpoint, with the tables and the bucket created from the one schema.
 * The default wherever no endpoints are given. Callers get the proxy's endpoint, never the JVM's.
 */
import { startDynamoDbLocal, type DynamoDbLocal } from './dynamodb-local';
import { startDynamoDbProxy, type DynamoDbProxy } from './dynamodb-proxy';
import { startLocalS3, type LocalS3 } from './s3-server';
import type { CallSink } from './call-log';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { localClients, type Endpoints } from '../core/aws/clients';

/** Long enough that two transactions on one item overlap on two shared cores; short against a 10 s lease. */
const DEFAULT_CONFLICT_WINDOW_MS = 5;

export interface EmbeddedStackOptions {
  /** Keep DynamoDB Local's data in this folder (default: in memory). */
  readonly dataDir?: string;
  /** The port callers use for DynamoDB: the proxy's (DynamoDB Local itself takes a free port). */
  readonly dynamodbPort?: number;
  readonly s3Port?: number;
  /** DynamoDB's transaction conflict window and S3's commit window (default 5 ms each); 0 turns both off. */
  readonly conflictWindowMs?: number;
  /** Told of every AWS call the DynamoDB and S3 endpoints answer, and who made it (lib/local/call-log.ts). */
  readonly onCall?: CallSink;
  /** DynamoDB Local's JVM heap cap (default 256 MB; every item is held in memory, so a run of a million needs more). */
  readonly dynamodbHeapMb?: number;
}

export interface EmbeddedStack {
  readonly endpoints: Endpoints;
  readonly dynamodb: DynamoDbLocal;
  readonly proxy: DynamoDbProxy;
  readonly s3: LocalS3;
  stop(): Promise<void>;
}

export async function startEmbeddedStack(options: EmbeddedStackOptions = {}): Promise<EmbeddedStack> {
  const onCall = options.onCall; // one sink for both endpoints
  const s3 = await startLocalS3({ port: options.s3Port, conflictWindowMs: options.conflictWindowMs, onCall });
  let dynamodb: DynamoDbLocal | undefined;
  let proxy: DynamoDbProxy | undefined;
  try {
    dynamodb = await startDynamoDbLocal({ dataDir: options.dataDir, heapMb: options.dynamodbHeapMb });
    // Straight to the JVM: the warm-up is ours, not a caller's, so it stays out of the call log.
    await warmUp({ dynamodb: dynamodb.endpoint, s3: s3.endpoint });
    proxy = await startDynamoDbProxy({
      target: dynamodb.endpoint,
      port: options.dynamodbPort,
      conflictWindowMs: options.conflictWindowMs ?? DEFAULT_CONFLICT_WINDOW_MS,
      onCall,
    });
  } catch (err) {
    await Promise.allSettled([s3.stop(), proxy?.stop(), dynamodb?.stop()]);
    throw err;
  }
  const [db, px] = [dynamodb, proxy];
  return {
    endpoints: { dynamodb: px.endpoint, s3: s3.endpoint },
    dynamodb: db,
    proxy: px,
    s3,
    stop: async () => {
      await px.stop();
      await Promise.allSettled([db.stop(), s3.stop()]);
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
    await clients.raw
      .send(
        new CreateTableCommand({
          TableName: table,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        }),
      )
      .catch((err) => {
        if ((err as Error).name !== 'ResourceInUseException') throw err;
      });
    for (let round = 0; round < 3; round++) {
      await clients.ddb.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              ConditionCheck: {
                TableName: table,
                Key: { pk: 'fence' },
                ConditionExpression: 'attribute_not_exists(pk) OR fence <= :t',
                ExpressionAttributeValues: { ':t': 1 },
              },
            },
            ...Array.from({ length: 99 }, (_, i) => ({ Put: { TableName: table, Item: { pk: `w${round}-${i}`, n: i } } })),
          ],
        }),
      );
      await clients.ddb.send(
        new UpdateCommand({
          TableName: table,
          Key: { pk: 'lock' },
          UpdateExpression: 'SET rvn = :r',
          ExpressionAttributeValues: { ':r': String(round) },
        }),
      );
    }
  } finally {
    clients.destroy();
  }
}

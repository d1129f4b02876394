/**
 * The embedded local stack: the real DynamoDB Local (a JVM) and the local S3 endpoint, with the tables and the
 * bucket created from the one schema. The default wherever no endpoints are given.
 */
import { startDynamoDbLocal, type DynamoDbLocal } from './dynamodb-local';
import { startLocalS3, type LocalS3 } from './s3-server';
import type { Endpoints } from '../lib/core/stores';

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
  } catch (err) {
    await s3.stop();
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

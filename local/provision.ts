/**
 * Create the tables and the bucket from the one description in core/schema.ts (the CDK stack reads the same).
 * Idempotent: existing tables and buckets are left as they are.
 */
import {
  CreateTableCommand,
  DescribeTableCommand,
  ResourceInUseException,
  type DynamoDBClient,
  type AttributeDefinition,
  type CreateTableCommandInput,
} from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { TABLES, type TableDescription } from '../core/schema';

function createTableInput(prefix: string, t: TableDescription): CreateTableCommandInput {
  const attrs = new Map<string, AttributeDefinition>();
  const add = (k: { name: string; type: 'S' | 'N' }) => attrs.set(k.name, { AttributeName: k.name, AttributeType: k.type });
  add(t.partitionKey);
  const input: CreateTableCommandInput = {
    TableName: prefix + t.suffix,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [{ AttributeName: t.partitionKey.name, KeyType: 'HASH' }],
    AttributeDefinitions: [],
  };
  if (t.sparseIndex) {
    add(t.sparseIndex.partitionKey);
    add(t.sparseIndex.sortKey);
    input.GlobalSecondaryIndexes = [
      {
        IndexName: t.sparseIndex.name,
        KeySchema: [
          { AttributeName: t.sparseIndex.partitionKey.name, KeyType: 'HASH' },
          { AttributeName: t.sparseIndex.sortKey.name, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ];
  }
  input.AttributeDefinitions = [...attrs.values()];
  return input;
}

export async function provision(ddb: DynamoDBClient, s3: S3Client, prefix: string, bucket: string): Promise<void> {
  for (const t of TABLES) {
    const input = createTableInput(prefix, t);
    try {
      await ddb.send(new CreateTableCommand(input));
    } catch (err) {
      if (!(err instanceof ResourceInUseException) && (err as Error).name !== 'ResourceInUseException') throw err;
    }
    // DynamoDB Local creates tables at once; on AWS this waits for ACTIVE.
    for (let i = 0; i < 120; i++) {
      const d = await ddb.send(new DescribeTableCommand({ TableName: input.TableName }));
      if (d.Table?.TableStatus === 'ACTIVE') break;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  }
}

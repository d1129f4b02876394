/**
 * Create the tables and the bucket from the one description in lib/core/schema.ts (the CDK stack reads the same).
 * Idempotent: existing tables and buckets are left as they are.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { createDescribedTables } from '../core/aws/provision';
import { TABLES, type TableDescription } from '../core/schema';

/**
 * The tables (the library's two unless told: an app passes its own list) and the bucket.
 */
export async function provision(
  ddb: DynamoDBClient,
  s3: S3Client,
  prefix: string,
  bucket: string,
  tables: readonly TableDescription[] = TABLES,
): Promise<void> {
  await createDescribedTables(ddb, prefix, tables);
  await ensureBucket(s3, bucket);
}

/** Create the bucket unless it exists. */
export async function ensureBucket(s3: S3Client, bucket: string): Promise<void> {
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  }
}

/** The billing reference app's local stores: the library's tables, its invoice table and the bucket. */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { BILLING_TABLES } from '../apps/billing/schema';
import { provision } from '../lib/local/provision';

/** Create the billing deployment's tables (locks, jobs, invoices) and its bucket, unless they exist. */
export function provisionBilling(ddb: DynamoDBClient, s3: S3Client, prefix: string, bucket: string): Promise<void> {
  return provision(ddb, s3, prefix, bucket, BILLING_TABLES);
}

/**
 * The stores: the lock, job and invoice tables exactly as core/schema.ts describes them, and the manifest
 * bucket. Nothing here decides safety; it provisions the places where the fence is checked (Part 4, Part 5).
 *
 * Every table: PAY_PER_REQUEST, point-in-time recovery, deletion protection, RETAIN, and no TTL attribute.
 * No TTL anywhere, the lock table above all: "TTL is not a deadline, and it resets epochs" (Part 5): a TTL
 * delete of a lock item starts its epoch (the fencing token) again at 1. A point-in-time restore also brings old
 * epochs back, so a restored lock table is bumped before use (Part 8, "Restores"; the `restore bump` command).
 *
 * `Table` (AWS::DynamoDB::Table), not `TableV2` (AWS::DynamoDB::GlobalTable): the lock table must be one
 * linearizable authority in one Region (Part 8, "Across Regions"). With TableV2 an asynchronously replicated
 * replica is one `replicas:` line away; with Table it is a deliberate migration.
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { INVOICE_TABLE, JOB_TABLE, LOCK_TABLE, Keys, type KeyAttribute, type TableDescription } from '../core/schema';

const ATTRIBUTE_TYPE: Record<KeyAttribute['type'], dynamodb.AttributeType> = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
};

/** `billing/`: the top folder of every night's chunks and manifest (schema.ts `Keys`). */
export const NIGHT_OUTPUTS_PREFIX = `${Keys.chunkPrefix('date').split('/')[0]}/`;

function attribute(key: KeyAttribute): dynamodb.Attribute {
  return { name: key.name, type: ATTRIBUTE_TYPE[key.type] };
}

export interface SchemaTableProps {
  /** The table as core/schema.ts describes it (keys and sparse index); never re-typed here. */
  readonly description: TableDescription;
}

/** One table from schema.ts, with the settings every Fencepost table shares. */
export class SchemaTable extends Construct {
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string, props: SchemaTableProps) {
    super(scope, id);
    const d = props.description;
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: attribute(d.partitionKey),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
      // timeToLiveAttribute is deliberately absent (Part 5); the stack test fails if any table gets one.
    });
    if (d.sparseIndex) {
      // Sparse (Part 6): only RUNNING rows carry claim_shard/claimed_since, written in the same UpdateItem that raises
      // the fence and removed in the one that completes or re-queues, so the index holds exactly the claimed rows.
      // ALL: the sweeper's conditional re-queue needs state, owner_token and fence, and there is one row a night.
      this.table.addGlobalSecondaryIndex({
        indexName: d.sparseIndex.name,
        partitionKey: attribute(d.sparseIndex.partitionKey),
        sortKey: attribute(d.sparseIndex.sortKey),
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }
  }
}

export interface ManifestBucketProps {
  /**
   * How long objects under `billing/` (chunk objects and manifests) are kept.
   * @default Duration.days(35)
   */
  readonly outputRetention?: Duration;
  /**
   * How long a replaced version (every manifest rewrite makes one) is kept, for the story of a fault night.
   * @default Duration.days(30)
   */
  readonly noncurrentVersionRetention?: Duration;
  /**
   * How long the server access logs are kept.
   * @default Duration.days(90)
   */
  readonly accessLogRetention?: Duration;
}

/** The manifest bucket (Part 4, "on S3") and the bucket its server access logs go to. */
export class ManifestBucket extends Construct {
  readonly bucket: s3.Bucket;
  readonly accessLogs: s3.Bucket;

  constructor(scope: Construct, id: string, props: ManifestBucketProps = {}) {
    super(scope, id);
    this.accessLogs = new s3.Bucket(this, 'AccessLogs', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED, // the only encryption S3 server access logging delivers to
      enforceSSL: true,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [{ id: 'expire-access-logs', expiration: props.accessLogRetention ?? Duration.days(90) }],
    });
    Validations.of(this.accessLogs).acknowledge({
      id: 'AwsSolutions-S1',
      reason: 'This is the access-log bucket itself; logging it to itself would log its own log deliveries without end.',
    });

    this.bucket = new s3.Bucket(this, 'Bucket', {
      versioned: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      serverAccessLogsBucket: this.accessLogs,
      serverAccessLogsPrefix: 'manifests/',
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        {
          id: 'expire-noncurrent-versions',
          noncurrentVersionExpiration: props.noncurrentVersionRetention ?? Duration.days(30),
          expiredObjectDeleteMarker: true,
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
        {
          // A simple age rule on the whole night: S3 lifecycle filters are prefixes (or tags), with no wildcard, so
          // `billing/*/chunks/` cannot be named; and a tag rule would need every writer to tag, a second write that
          // is not atomic with the chunk. Readers trust only objects the manifest names (Part 4); the unnamed ones
          // (a fenced-out holder's `03.t7.jsonl` next to the committed `03.t12.jsonl`) are garbage from the start, and
          // the named ones are the consumer's to copy to its archive within the retention. After it, the job row
          // (DONE, with its fence) stays in DynamoDB forever and still refuses any late holder.
          id: 'expire-night-outputs',
          prefix: NIGHT_OUTPUTS_PREFIX,
          expiration: props.outputRetention ?? Duration.days(35),
        },
      ],
    });
  }
}

export interface FencepostDataProps {
  /** Retention settings of the manifest bucket. @default - ManifestBucket's defaults */
  readonly manifest?: ManifestBucketProps;
}

/** All of Fencepost's stores, each exposed for grants, metrics and outputs. Names are CloudFormation's. */
export class FencepostData extends Construct {
  readonly locks: dynamodb.Table;
  readonly jobs: dynamodb.Table;
  readonly invoices: dynamodb.Table;
  readonly bucket: s3.Bucket;
  readonly accessLogs: s3.Bucket;

  constructor(scope: Construct, id: string, props: FencepostDataProps = {}) {
    super(scope, id);
    this.locks = new SchemaTable(this, 'Locks', { description: LOCK_TABLE }).table;
    this.jobs = new SchemaTable(this, 'Jobs', { description: JOB_TABLE }).table;
    this.invoices = new SchemaTable(this, 'Invoices', { description: INVOICE_TABLE }).table;
    const manifests = new ManifestBucket(this, 'Manifests', props.manifest);
    this.bucket = manifests.bucket;
    this.accessLogs = manifests.accessLogs;
  }
}

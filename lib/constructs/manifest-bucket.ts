/**
 * The manifest bucket and the bucket its server access logs go to.
 *
 * S3 has no "greater than" condition: the fence on S3 is the manifest, rewritten only with If-Match on the ETag the
 * writer last saw (If-None-Match: * to create), so a writer whose view is stale gets 412 instead of overwriting a
 * newer holder's commit (lib/core/manifest.ts). The library always sends one of the two headers; the bucket policy
 * below makes S3 refuse a manifest write that carries neither, so a process that bypasses the library (a script,
 * a hand-written PutObject, a copy) cannot overwrite a manifest blindly either.
 *
 * The local S3 server (lib/local/s3-server.ts) enforces If-Match / If-None-Match themselves but does NOT evaluate
 * bucket policies: locally an unconditional manifest write is accepted. The policy is proven instead on the
 * synthesized template with a policy evaluator (@cloud-copilot/iam-simulate, test/proofs/iam.test.ts): a PutObject on a
 * manifest key with neither header is denied, with either header allowed by the writer's role.
 */
import { createHash } from 'node:crypto';
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

/** The manifest bucket: the job's prefix, which its policy guards against unconditional manifest writes, and retention. */
export interface ManifestBucketProps {
  /**
   * The folder every object of the job is under (chunk objects and manifests), ending in `/`, e.g. `sales-report/`: the
   * retention rule and the manifest policy apply under it.
   */
  readonly prefix: string;
  /**
   * How long objects under `prefix` (chunk objects and manifests) are kept.
   * @default Duration.days(35)
   */
  readonly outputRetention?: Duration;
  /**
   * How long a replaced version (every manifest rewrite makes one) is kept, for the story of a fault run.
   * @default Duration.days(30)
   */
  readonly noncurrentVersionRetention?: Duration;
  /**
   * How long the server access logs are kept.
   * @default Duration.days(90)
   */
  readonly accessLogRetention?: Duration;
}

/**
 * The condition keys S3 sets from a PutObject's If-Match and If-None-Match headers. `Null: true` on both means the
 * request carries neither (two keys under one operator must all match). AWS's own policy for this, "Enforce
 * conditional writes on Amazon S3 buckets":
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html. The same page says what
 * else it refuses: CopyObject onto a manifest key (copies carry no conditional headers: 403) and the multipart
 * upload calls (CreateMultipartUpload and UploadPart accept no conditional headers); a manifest is one small
 * PutObject, so neither is ever needed.
 */
export const UNCONDITIONAL_WRITE = { Null: { 's3:if-match': 'true', 's3:if-none-match': 'true' } } as const;

/** The manifest bucket: versioned, private, TLS only, access-logged, retained, and refusing unconditional manifest writes. */
export class ManifestBucket extends Construct {
  /** The bucket. Grant by need: only the functions that write the manifest or chunk objects, on `prefix` only. */
  readonly bucket: s3.Bucket;
  /** The bucket the server access logs go to. */
  readonly accessLogs: s3.Bucket;
  /** The folder every object of the job is under, e.g. `sales-report/`. */
  readonly prefix: string;
  /** The object key pattern the manifest policy covers: `<prefix>*manifest.json`. */
  readonly manifestKeys: string;

  constructor(scope: Construct, id: string, props: ManifestBucketProps) {
    super(scope, id);
    this.prefix = props.prefix;
    this.manifestKeys = manifestKeyPattern(props.prefix);
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
          // A simple age rule on the whole prefix: S3 lifecycle filters are prefixes (or tags), with no wildcard, so
          // `<prefix>*/chunks/` cannot be named; and a tag rule would need every writer to tag, a second write that
          // is not atomic with the chunk. Readers trust only objects the manifest names; the unnamed ones
          // (a fenced-out holder's `03.t7.jsonl` next to the committed `03.t12.jsonl`) are garbage from the start, and
          // the named ones are the consumer's to copy to its archive within the retention. After it, the job row
          // (DONE, with its fence) stays in DynamoDB forever and still refuses any late holder.
          id: 'expire-run-outputs',
          prefix: props.prefix,
          expiration: props.outputRetention ?? Duration.days(35),
        },
      ],
    });
    refuseUnconditionalManifestWrites(this.bucket, props.prefix);
  }
}

/**
 * Adds the statement that makes S3 refuse a manifest write under `prefix` that carries neither If-Match nor
 * If-None-Match, for every principal, this account's roles included: an explicit Deny wins over any Allow. On a
 * bucket of this app only: an imported bucket's policy is its owner's (the statement is not added; CDK says so with
 * `statementAdded: false`).
 *
 * @param bucket - the bucket the job's manifests are in
 * @param prefix - the job's folder, e.g. `sales-report/`
 * @returns whether the statement was added (false for an imported bucket)
 */
export function refuseUnconditionalManifestWrites(bucket: s3.IBucket, prefix: string): boolean {
  const { statementAdded } = bucket.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: manifestStatementId(prefix),
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ['s3:PutObject'],
      resources: [bucket.arnForObjects(manifestKeyPattern(prefix))],
      conditions: UNCONDITIONAL_WRITE,
    }),
  );
  return statementAdded;
}

/** The object keys the manifest policy covers: every `manifest.json` under the job's folder. */
function manifestKeyPattern(prefix: string): string {
  return `${prefix}*manifest.json`;
}

/**
 * The statement's id, one per prefix: a Sid is letters and digits only, so the prefix's own letters and digits (to
 * read) and a short hash of the whole prefix (so `a-b/` and `ab/` differ; S3 refuses a policy with a duplicate Sid).
 */
function manifestStatementId(prefix: string): string {
  const hash = createHash('sha256').update(prefix).digest('hex').slice(0, 8);
  return `RefuseUnconditionalManifestWrites${prefix.replace(/[^A-Za-z0-9]/g, '')}${hash}`;
}

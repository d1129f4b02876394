/**
 * The deployable reindex job: one FencedJob named `reindex` (its lock and job tables, manifest bucket, fenced
 * workflow, nightly schedule, orphan sweeper and alarms) whose chunk function is lambda/chunk.ts, and the job's own
 * source and index tables, with the chunk function's grants on them by need. It only composes the constructs.
 */
import path from 'node:path';
import { Stack, Validations, type StackProps } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { ConfigError } from '../../lib/core/internal';
import { FencedChunkFunction, FencedJob, XRAY_ACKNOWLEDGEMENT, schemaTable, type FencedJobProps } from '../../lib/constructs/internal';
import { chunkCount } from './job';
import { INDEX_TABLE, JOB_NAME, MAX_ITEMS, ReindexEnv, SOURCE_TABLE } from './schema';

/** The night's size and the job's settings; FencedJob's defaults for the rest. */
export interface ReindexStackProps extends StackProps {
  /** Products in the source table. @default 200 */
  readonly items?: number;
  /** Products per chunk (one chunk function invocation each). @default 50 */
  readonly chunkSize?: number;
  /** FencedJob's settings (lease timing, schedule, sweeper, alarms). @default FencedJob's defaults */
  readonly job?: Omit<FencedJobProps, 'name' | 'chunkFunction' | 'chunks'>;
}

/** The reindex stack: a FencedJob named `reindex`, its chunk function, and the source and index tables. */
export class ReindexStack extends Stack {
  /** The products to index: the chunk function reads them (GetItem). */
  readonly source: dynamodb.Table;
  /** The search index: the chunk function updates its entries (UpdateItem), each in a fenced transaction. */
  readonly index: dynamodb.Table;
  /** The job's chunk function (lambda/chunk.ts), bundled by esbuild as `cdk deploy` ships it. */
  readonly chunkFunction: FencedChunkFunction;
  /** The fenced job: tables, bucket, workflow, schedules, sweeper, alarms. */
  readonly job: FencedJob;

  constructor(scope: Construct, id: string, props: ReindexStackProps = {}) {
    super(scope, id, props);
    const items = props.items ?? 200;
    const chunkSize = props.chunkSize ?? 50;
    const problems: string[] = [];
    if (!Number.isSafeInteger(items) || items < 1 || items > MAX_ITEMS)
      problems.push(`items must be an integer from 1 to ${MAX_ITEMS}, got ${items}`);
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) problems.push(`chunkSize must be a positive integer, got ${chunkSize}`);
    if (problems.length > 0) throw new ConfigError(problems);

    this.source = schemaTable(this, 'Source', SOURCE_TABLE);
    this.index = schemaTable(this, 'Index', INDEX_TABLE);
    // Bundled as the library's own functions: the SDK inside, error class names kept, the source map read only for a logged error.
    this.chunkFunction = new FencedChunkFunction(this, 'ReindexChunkFunction', {
      entry: path.join(__dirname, 'lambda', 'chunk.ts'),
      environment: {
        [ReindexEnv.sourceTable]: this.source.tableName,
        [ReindexEnv.indexTable]: this.index.tableName,
        [ReindexEnv.items]: String(items),
        [ReindexEnv.chunkSize]: String(chunkSize),
      },
    });
    // By need: read a product, update its index entry (inside the fenced transaction). FencedJob grants the rest:
    // renewing on the lock table, the ConditionCheck and done mark on the job table.
    this.chunkFunction.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [this.source.tableArn] }));
    this.chunkFunction.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [this.index.tableArn] }));
    // Its grants are these and FencedJob's, none on "*" but X-Ray's.
    Validations.of(this.chunkFunction).acknowledge(XRAY_ACKNOWLEDGEMENT);

    this.job = new FencedJob(this, 'Reindex', {
      ...props.job,
      name: JOB_NAME,
      chunkFunction: this.chunkFunction,
      chunks: chunkCount({ items, chunkSize }),
      chunkStepName: props.job?.chunkStepName ?? 'ReindexChunk',
      chunkWritesManifest: false, // its chunks write the index table only: no S3 grant
      fencedTables: { index: this.index, ...props.job?.fencedTables },
    });
  }
}

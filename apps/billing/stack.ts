/**
 * The deployable billing stack: one FencedJob named `billing` (its lock and job tables, manifest bucket, workflow,
 * schedules, sweeper and alarms) whose chunk function bills invoices, and the invoice table that function writes.
 * It only composes. Environment-agnostic: no account or Region lookups, so `cdk synth` needs no credentials.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Annotations, CfnOutput, Duration, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { Metric } from '../../lib/core/internal';
import { BillingEnv, BillingMetric, INVOICE_TABLE } from './schema';
import { FencedChunkFunction, FencedJob, XRAY_ACKNOWLEDGEMENT, appMetric, schemaTable } from '../../lib/constructs/internal';
import { CHUNK_TIMEOUT, ON_DEMAND_TABLE_WRITE_QUOTA, type StackConfig, invoiceWarmThroughput, jobSettings } from './config';
import { BILLING_JOB } from './keys';

export { BILLING_JOB };

/** The chunk function's entry: its TypeScript source here, its compiled JavaScript in a built tree. */
function chunkEntry(): string {
  const source = path.join(__dirname, 'lambda', 'chunk.ts');
  return existsSync(source) ? source : source.replace(/\.ts$/, '.js');
}

export interface FencepostStackProps extends StackProps {
  /** The validated configuration (readStackConfig). */
  readonly config: StackConfig;
}

/** The billing stack: a FencedJob named `billing` and its invoice table. */
export class FencepostStack extends Stack {
  /** One item per invoice, put only if absent, carrying the writer's token. */
  readonly invoices: dynamodb.Table;
  /** The billing chunk function (apps/billing/lambda/chunk.ts): the FencedJob's user function. */
  readonly chunkFunction: FencedChunkFunction;
  /** The billing job: lock and job tables, manifest bucket, workflow, schedules, sweeper, alarms. */
  readonly billing: FencedJob;

  constructor(scope: Construct, id: string, props: FencepostStackProps) {
    super(scope, id, props);
    const c = props.config;

    // A new on-demand table sustains 4,000 WRU/s at first: warmed to the night's peak when that is more, at most to
    // the table quota, never below the recorded warm throughput (config.ts invoiceWarmThroughput).
    const warm = invoiceWarmThroughput(c);
    this.invoices = schemaTable(this, 'Invoices', INVOICE_TABLE, {
      warmThroughput: warm.writeUnits !== undefined ? { writeUnitsPerSecond: warm.writeUnits } : undefined,
    });
    if (warm.aboveQuota) {
      Annotations.of(this.invoices).addWarningV2(
        'fencepost:invoiceWarmThroughputQuota',
        `The night's peak is ${warm.peak} WRU/s (chunkConcurrency ${c.chunkConcurrency}), above the on-demand table quota of ${ON_DEMAND_TABLE_WRITE_QUOTA} write units: the invoice table is warmed to the quota, and writes above it are throttled (and retried). Lower chunkConcurrency, or raise the quota in Service Quotas.`,
      );
    }
    if (warm.aboveRecord) {
      Annotations.of(this.invoices).addWarningV2(
        'fencepost:invoiceWarmThroughputRecord',
        `This deploy warms the invoice table to ${warm.writeUnits} write units a second, above the recorded invoiceWarmWriteUnits (${c.invoiceWarmWriteUnits}): once it is deployed, set invoiceWarmWriteUnits to ${warm.writeUnits} in cdk.json. Warm throughput cannot be lowered, so a later synth that asked less (fewer chunks at once) would fail the deploy; the record keeps it from asking less.`,
      );
    }
    this.chunkFunction = new FencedChunkFunction(this, 'ChunkFunction', {
      entry: chunkEntry(),
      environment: {
        [BillingEnv.invoiceTable]: this.invoices.tableName,
        [BillingEnv.invoices]: String(c.invoices),
        [BillingEnv.chunkSize]: String(c.chunkSize),
      },
      timeout: CHUNK_TIMEOUT,
      memorySize: 1024,
    });
    // Each invoice is put once (attribute_not_exists), inside the chunk's fenced transaction.
    this.chunkFunction.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [this.invoices.tableArn] }));
    // Its grants are these and FencedJob's, none on "*" but X-Ray's.
    Validations.of(this.chunkFunction).acknowledge(XRAY_ACKNOWLEDGEMENT);

    // cdk.json says times in ms; FencedJob takes Durations.
    const { chunkMs, leaseMs, renewMs, marginMs, clockOffsetAlarmMs, ...settings } = jobSettings(c);
    this.billing = new FencedJob(this, 'Billing', {
      ...settings,
      leaseDuration: Duration.millis(leaseMs),
      renewInterval: Duration.millis(renewMs),
      margin: Duration.millis(marginMs),
      clockOffsetAlarmThreshold: Duration.millis(clockOffsetAlarmMs),
      name: BILLING_JOB,
      chunkFunction: this.chunkFunction,
      chunkDuration: Duration.millis(chunkMs!),
      chunkStepName: 'BillChunk',
      chunkWritesManifest: true, // each chunk writes its invoices' object and commits it to the night's manifest
      fencedTables: { invoices: this.invoices },
      dashboardProgress: {
        left: [appMetric(BILLING_JOB, BillingMetric.invoicesRecorded, 'Sum'), appMetric(BILLING_JOB, BillingMetric.invoicesAlreadyRecorded, 'Sum')],
        right: [appMetric(BILLING_JOB, Metric.chunksCommitted, 'Sum')],
      },
    });

    new CfnOutput(this, 'LockTableName', { value: this.billing.lockTable.tableName });
    new CfnOutput(this, 'JobTableName', { value: this.billing.jobTable.tableName });
    new CfnOutput(this, 'InvoiceTableName', { value: this.invoices.tableName });
    new CfnOutput(this, 'ManifestBucketName', { value: this.billing.manifestBucket!.bucketName });
    new CfnOutput(this, 'BillingStateMachineArn', { value: this.billing.stateMachine.stateMachineArn });
    new CfnOutput(this, 'SweeperStateMachineArn', { value: this.billing.sweeper.stateMachine.stateMachineArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: this.billing.alarms.topic.topicArn });
    new CfnOutput(this, 'DashboardName', { value: this.billing.alarms.dashboard.dashboardName });
  }
}

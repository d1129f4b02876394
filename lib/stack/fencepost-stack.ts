/**
 * The deployable stack: stores, the billing workflow (owned by lib/stack/billing-workflow.ts), the nightly
 * schedule and the alarms. It only composes; each construct owns its resources and exposes them.
 * Environment-agnostic: no account or Region lookups, so `cdk synth` needs no credentials.
 */
import { CfnOutput, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { FencepostAlarms } from './alarms';
import { BillingWorkflow } from './billing-workflow';
import { type StackConfig, workflowSettings } from './config';
import { FencepostData } from './data';
import { NightlySchedule } from './schedule';

export interface FencepostStackProps extends StackProps {
  /** The validated configuration (readStackConfig). */
  readonly config: StackConfig;
}

export class FencepostStack extends Stack {
  readonly data: FencepostData;
  readonly billing: BillingWorkflow;
  readonly schedule: NightlySchedule;
  readonly alarms: FencepostAlarms;

  constructor(scope: Construct, id: string, props: FencepostStackProps) {
    super(scope, id, props);
    const c = props.config;

    this.data = new FencepostData(this, 'Data');
    this.billing = new BillingWorkflow(this, 'Billing', {
      locks: this.data.locks,
      jobs: this.data.jobs,
      invoices: this.data.invoices,
      bucket: this.data.bucket,
      settings: workflowSettings(c),
    });
    acknowledgeWorkflowFindings(this.billing);

    this.schedule = new NightlySchedule(this, 'Nightly', {
      stateMachine: this.billing.stateMachine,
      expression: c.scheduleExpression,
      timeZone: c.scheduleTimeZone,
    });

    this.alarms = new FencepostAlarms(this, 'Alarms', {
      locks: this.data.locks,
      jobs: this.data.jobs,
      stateMachine: this.billing.stateMachine,
      deadLetterQueue: this.schedule.deadLetterQueue,
      clockOffsetAlarmMs: c.clockOffsetAlarmMs,
      marginMs: c.marginMs,
      fencedRejectionsThreshold: c.fencedRejectionsAlarmThreshold,
      conditionalCheckFailedThreshold: c.conditionalCheckFailedAlarmThreshold,
      deadlineHour: c.billingDeadlineHour,
      timeZone: c.scheduleTimeZone,
      alarmEmail: c.alarmEmail,
    });

    new CfnOutput(this, 'LockTableName', { value: this.data.locks.tableName });
    new CfnOutput(this, 'JobTableName', { value: this.data.jobs.tableName });
    new CfnOutput(this, 'InvoiceTableName', { value: this.data.invoices.tableName });
    new CfnOutput(this, 'ManifestBucketName', { value: this.data.bucket.bucketName });
    new CfnOutput(this, 'BillingStateMachineArn', { value: this.billing.stateMachine.stateMachineArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: this.alarms.topic.topicArn });
    new CfnOutput(this, 'DashboardName', { value: this.alarms.dashboard.dashboardName });
  }
}

/**
 * Findings on the billing workflow that its owner has not settled yet (the file is being rewritten).
 * Acknowledged on the state machine only, each with the reason it is acceptable today; remove one as soon as
 * billing-workflow.ts configures the feature (cdk-nag then simply stops reporting it).
 */
function acknowledgeWorkflowFindings(billing: BillingWorkflow): void {
  Validations.of(billing.stateMachine).acknowledge(
    {
      id: 'AwsSolutions-SF1',
      reason: 'Standard workflow: Step Functions keeps every execution\'s full event history for 90 days, and the alarms watch '
        + 'failed/timed-out/aborted executions. CloudWatch Logs delivery is billing-workflow.ts\'s to add (being rewritten); '
        + 'remove this acknowledgement when it sets logs with level ALL.',
    },
    {
      id: 'AwsSolutions-SF2',
      reason: 'X-Ray tracing is observability, not safety (the fence is the safety, Part 4). Whether the state machine traces '
        + 'is billing-workflow.ts\'s choice (being rewritten); remove this acknowledgement when it sets tracingEnabled.',
    },
  );
}

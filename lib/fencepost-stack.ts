/**
 * The deployable stack: stores, the billing workflow (owned by lib/billing-workflow.ts), the nightly
 * schedule and the alarms. It only composes; each construct owns its resources and exposes them.
 * Environment-agnostic: no account or Region lookups, so `cdk synth` needs no credentials.
 */
import { CfnOutput, Duration, Stack, type StackProps } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { FencepostAlarms } from './alarms';
import { BillingWorkflow } from './billing-workflow';
import { type StackConfig, workflowSettings } from './config';
import { FencepostData } from './data';
import { NightlySchedule } from './schedule';
import { OrphanSweeper } from './sweeper';

export interface FencepostStackProps extends StackProps {
  /** The validated configuration (readStackConfig). */
  readonly config: StackConfig;
}

export class FencepostStack extends Stack {
  readonly data: FencepostData;
  readonly billing: BillingWorkflow;
  readonly schedule: NightlySchedule;
  readonly sweeper: OrphanSweeper;
  readonly sweeperSchedule: NightlySchedule;
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

    this.schedule = new NightlySchedule(this, 'Nightly', {
      stateMachine: this.billing.stateMachine,
      expression: c.scheduleExpression,
      timeZone: c.scheduleTimeZone,
      description: 'Fencepost: start the nightly billing run',
    });

    this.sweeper = new OrphanSweeper(this, 'Sweeper', {
      locks: this.data.locks,
      jobs: this.data.jobs,
      billing: this.billing.stateMachine,
      environment: this.billing.environment,
      stormShare: c.sweeperStormShare,
      stormMinimum: c.sweeperStormMinimum,
      maxRequeues: c.sweeperMaxRequeues,
    });
    this.sweeperSchedule = new NightlySchedule(this, 'SweeperSchedule', {
      stateMachine: this.sweeper.stateMachine,
      expression: c.sweeperScheduleExpression,
      timeZone: c.scheduleTimeZone,
      maxEventAge: Duration.minutes(5), // a missed sweep is replaced by the next one
      description: 'Fencepost: start the orphan sweeper (re-queues nights whose holder stopped renewing)',
    });

    this.alarms = new FencepostAlarms(this, 'Alarms', {
      locks: this.data.locks,
      jobs: this.data.jobs,
      invoices: this.data.invoices,
      stateMachine: this.billing.stateMachine,
      deadLetterQueue: this.schedule.deadLetterQueue,
      sweeper: this.sweeper.stateMachine,
      sweeperDeadLetterQueue: this.sweeperSchedule.deadLetterQueue,
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
    new CfnOutput(this, 'SweeperStateMachineArn', { value: this.sweeper.stateMachine.stateMachineArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: this.alarms.topic.topicArn });
    new CfnOutput(this, 'DashboardName', { value: this.alarms.dashboard.dashboardName });
  }
}

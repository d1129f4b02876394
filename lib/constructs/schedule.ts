/**
 * The scheduled trigger: an EventBridge Scheduler schedule that starts a job's state machine with
 * `{ "scheduledTime": "<aws.scheduler.scheduled-time>" }` (the workflow derives and validates jobDate from it).
 *
 * What it guarantees: at-least-once delivery, retried, with undeliverable starts kept in a dead-letter queue.
 * What it does not: exactly once. Two deliveries of the same run (a retry after a lost response, a manual
 * re-run) are harmless by design: the second execution finds the lease held and waits it out, or finds the job
 * row DONE; and if it ever did run, its writes carry a lower token than the fence and are refused.
 * The lease and the fence make a duplicate trigger safe; the schedule doesn't have to.
 */
import { Duration, Stack, TimeZone, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as targets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';

/** The schedule: the state machine it starts, its expression and time zone, and how long a missed start stays worth sending. */
export interface JobScheduleProps {
  /** The state machine to start. */
  readonly stateMachine: sfn.IStateMachine;
  /** Scheduler expression, `cron(...)` or `rate(...)` (validated by FencedJob). */
  readonly expression: string;
  /** IANA time zone the expression is read in. */
  readonly timeZone: string;
  /** What this schedule starts, shown in the Scheduler console (each schedule says its own). */
  readonly description: string;
  /** Delivery retries before a start goes to the dead-letter queue. @default 3 */
  readonly retryAttempts?: number;
  /** How long Scheduler keeps trying one run's start. @default Duration.hours(1) */
  readonly maxEventAge?: Duration;
}

/** A schedule that starts a state machine with `{ scheduledTime }`, its dead-letter queue and its role. */
export class JobSchedule extends Construct {
  /** The schedule. */
  readonly schedule: scheduler.Schedule;
  /** Starts Scheduler could not deliver; the alarms watch it. */
  readonly deadLetterQueue: sqs.Queue;
  /** Scheduler's execution role: states:StartExecution on this state machine, sqs:SendMessage on the DLQ. */
  readonly role: iam.Role;

  constructor(scope: Construct, id: string, props: JobScheduleProps) {
    super(scope, id);
    const stack = Stack.of(this);

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED, // Scheduler delivers to SSE-SQS without a key grant
      enforceSSL: true,
      retentionPeriod: Duration.days(14), // the longest SQS allows: time to notice and start the run again by hand
    });
    Validations.of(this.deadLetterQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        "This queue is the schedule's dead-letter queue (Scheduler's DeadLetterConfig, which cdk-nag does not see); " +
        'nothing consumes it, an alarm fires on its first message and a person reads it.',
    });

    // Assumable only by Scheduler acting for this account's default schedule group (confused-deputy guard).
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: {
          StringEquals: {
            'aws:SourceAccount': stack.account,
            'aws:SourceArn': stack.formatArn({ service: 'scheduler', resource: 'schedule-group', resourceName: 'default' }),
          },
        },
      }),
      description: `EventBridge Scheduler: ${props.description}`,
    });

    // The target grants exactly states:StartExecution on the state machine and sqs:SendMessage on the DLQ to the role.
    const target = new targets.StepFunctionsStartExecution(props.stateMachine, {
      role: this.role,
      input: scheduler.ScheduleTargetInput.fromObject({ scheduledTime: scheduler.ContextAttribute.scheduledTime }),
      deadLetterQueue: this.deadLetterQueue,
      retryAttempts: props.retryAttempts ?? 3,
      maxEventAge: props.maxEventAge ?? Duration.hours(1),
    });

    this.schedule = new scheduler.Schedule(this, 'Schedule', {
      schedule: scheduler.ScheduleExpression.expression(props.expression, TimeZone.of(props.timeZone)),
      target,
      description: props.description,
    });
  }
}

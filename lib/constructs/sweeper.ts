/**
 * The orphan sweeper in the cloud (design §4): its own state machine on a short schedule.
 *
 *   SightClaimed → (nothing claimed: done) → WaitOutTheLease (SecondsPath) → VerifyAndRequeue
 *
 * SightClaimed reads only the sparse index and each row's lock item; the Wait state is the sweeper's own timer
 * (no clock is compared); VerifyAndRequeue looks again, treats rows whose rvn, owner and fence did not change
 * as orphans, re-queues at most `maxRequeues` of them with one conditional write each (none in a storm), and
 * starts an execution of the job's state machine per re-queued run; a run re-queued `maxRequeuesPerRun` times
 * is given up (no run, no write, the RunsGivenUp metric). It is liveness only: the fence is the safety.
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Env } from '../lambda/env';
import { stateMachineLogGroupName } from './fenced-workflow';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { HandlerFunction } from './handler-function';
import { claimedIndexArn, keysGrant } from './job-table';
import { claimShard, runKeysPattern } from '../core/job-keys';
import { cronCalendar } from './cron';
import { TRANSIENT_ERRORS } from './task-errors';

/** Scheduler's finest schedule: a sweep every minute, all day. */
const EVERY_MINUTE = 'rate(1 minute)';

/**
 * The sweeper's default schedule: every minute of the hours a run can be claimed in, from the scheduled start's hour
 * through the deadline's hour (across midnight when the start is late), read in the job's schedule's time zone.
 * Outside them no scheduled or re-queued run holds a lease, so an idle sweep would only cost a state machine
 * execution; a run orphaned there (a run started by hand that died) is re-queued by the next window's first sweeps
 * (docs/DESIGN.md "The sweeper"). A scheduled `rate(...)`, or a cron whose hour is not one number, may start a run at
 * any hour: every minute then; so does a start in the deadline's own hour, whose run ends at the next day's deadline.
 * @param scheduleExpression - the scheduled start, `cron(...)` or `rate(...)`
 * @param deadlineHour - the hour (0..23) by which the run must be DONE
 */
export function sweepWindowExpression(scheduleExpression: string, deadlineHour: number): string {
  const startHours = new Set(cronCalendar(scheduleExpression)?.startMinutes.map((m) => Math.floor(m / 60)));
  if (startHours.size !== 1 || !Number.isInteger(deadlineHour) || deadlineHour < 0 || deadlineHour > 23) return EVERY_MINUTE;
  const [start] = startHours;
  if (start === deadlineHour) return EVERY_MINUTE;
  const hours: number[] = [];
  for (let h = start; ; h = (h + 1) % 24) {
    hours.push(h);
    if (h === deadlineHour) break;
  }
  return `cron(* ${hours.join(',')} * * ? *)`;
}

/** The orphan sweeper: the job's tables, the state machine it restarts runs of, the functions' environment, the storm rule. */
export interface SweeperProps {
  /** The job's name: the sweeper's log group is `<stack>-<name>-sweeper`. */
  readonly name: string;
  /** The lock table. */
  readonly lockTable: ITable;
  /** The job table; the sweeper reads it only through its sparse index of claimed rows (lib/core/schema.ts JOB_TABLE). */
  readonly jobTable: ITable;
  /** The job's state machine, started once per re-queued run. */
  readonly job: sfn.IStateMachine;
  /** The job functions' environment (tables, lease settings), reused so both read the same configuration. */
  readonly environment: Record<string, string>;
  /** Above this share of claimed rows looking dead at once, re-queue none (a storm). */
  readonly stormShare: number;
  /** A storm needs at least this many dead-looking rows. */
  readonly stormMinimum: number;
  /** Re-queues per sweep at most. */
  readonly maxRequeues: number;
  /** A run re-queued this many times is given up (RunsGivenUp) until a person re-arms it. */
  readonly maxRequeuesPerRun: number;
}

/** The orphan sweeper's state machine and its two functions. */
export class OrphanSweeper extends Construct {
  /** SightClaimed → WaitOutTheLease → VerifyAndRequeue. */
  readonly stateMachine: sfn.StateMachine;
  /** The first sighting and the second (which re-queues and starts runs). */
  readonly functions: { readonly sight: NodejsFunction; readonly verify: NodejsFunction };

  constructor(scope: Construct, id: string, props: SweeperProps) {
    super(scope, id);
    const environment = {
      ...props.environment,
      [Env.stormShare]: String(props.stormShare),
      [Env.stormMinimum]: String(props.stormMinimum),
      [Env.maxRequeues]: String(props.maxRequeues),
      [Env.maxRequeuesPerRun]: String(props.maxRequeuesPerRun),
      [Env.jobStateMachineArn]: props.job.stateMachineArn,
    };
    const timeout = Duration.minutes(2);
    const sight = new HandlerFunction(this, 'SweepSightFunction', { handler: 'sweep-sight', environment, timeout });
    const verify = new HandlerFunction(this, 'SweepVerifyFunction', { handler: 'sweep-verify', environment, timeout });
    this.functions = { sight, verify };

    // Grants by need. The sparse index is the only way either function reads the job table (never a Scan), and only
    // this job's partition of it (its claim shard); the lock items and job rows they read and re-queue are this job's.
    const own = [runKeysPattern(props.name)];
    for (const fn of [sight, verify]) {
      fn.addToRolePolicy(keysGrant(['dynamodb:Query'], [claimedIndexArn(props.jobTable)], [claimShard(props.name)]));
      fn.addToRolePolicy(keysGrant(['dynamodb:GetItem'], [props.lockTable.tableArn], own));
    }
    verify.addToRolePolicy(keysGrant(['dynamodb:UpdateItem'], [props.jobTable.tableArn], own));
    props.job.grantStartExecution(verify);

    const task = (taskId: string, fn: HandlerFunction, resultPath: string, payload?: sfn.TaskInput) => {
      const t = new tasks.LambdaInvoke(this, taskId, {
        lambdaFunction: fn,
        payload,
        payloadResponseOnly: true,
        resultPath,
        retryOnServiceExceptions: false,
        taskTimeout: sfn.Timeout.duration(timeout.plus(Duration.seconds(30))),
      });
      t.addRetry({ errors: TRANSIENT_ERRORS, interval: Duration.seconds(1), backoffRate: 2, maxAttempts: 3, jitterStrategy: sfn.JitterType.FULL });
      return t;
    };
    const sightTask = task('SightClaimed', sight, '$.sighted');
    const wait = new sfn.Wait(this, 'WaitOutTheLease', { time: sfn.WaitTime.secondsPath('$.sighted.waitSeconds') });
    const verifyTask = task(
      'VerifyAndRequeue',
      verify,
      '$.verified',
      sfn.TaskInput.fromObject({ 'sighted.$': '$.sighted', 'sweep.$': '$$.Execution.Name' }),
    );
    sightTask.next(
      new sfn.Choice(this, 'AnythingClaimed')
        .when(sfn.Condition.numberEquals('$.sighted.claimed', 0), new sfn.Succeed(this, 'NothingClaimed'))
        .otherwise(wait),
    );
    wait.next(verifyTask);
    verifyTask.next(new sfn.Succeed(this, 'Swept'));

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(sightTask),
      timeout: Duration.minutes(15),
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'ExecutionLogs', {
          logGroupName: stateMachineLogGroupName(this, `${props.name}-sweeper`),
          retention: logs.RetentionDays.ONE_MONTH,
          removalPolicy: RemovalPolicy.DESTROY,
        }),
        level: sfn.LogLevel.ALL,
      },
    });

    Validations.of(this.stateMachine).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'Execution logging and X-Ray tracing support no resource-level permissions: AWS requires "*".',
    });
  }
}

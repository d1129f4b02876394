/**
 * The orphan sweeper in the cloud (reference Part 6, design §4): its own state machine on a short schedule.
 *
 *   SightClaimed → (nothing claimed: done) → WaitOutTheLease (SecondsPath) → VerifyAndRequeue
 *
 * SightClaimed reads only the sparse index and each row's lock item; the Wait state is the sweeper's own timer
 * (no clock is compared); VerifyAndRequeue looks again, treats rows whose rvn, owner and fence did not change
 * as orphans, re-queues at most `maxRequeues` of them with one conditional write each (none in a storm), and
 * starts a billing execution per re-queued night. It is liveness only: the fence is the safety.
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Env } from '../lambda/env';
import { JOB_TABLE } from '../core/schema';
import { TRANSIENT_ERRORS, stateMachineLogGroupName } from './billing-workflow';
import { handlerFunction } from './handler-function';

export interface SweeperProps {
  readonly locks: ITable;
  readonly jobs: ITable;
  readonly billing: sfn.IStateMachine;
  /** The billing functions' environment (tables, lease settings), reused so both read the same configuration. */
  readonly environment: Record<string, string>;
  readonly stormShare: number;
  readonly stormMinimum: number;
  readonly maxRequeues: number;
}

export class OrphanSweeper extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: { readonly sight: NodejsFunction; readonly verify: NodejsFunction };

  constructor(scope: Construct, id: string, props: SweeperProps) {
    super(scope, id);
    const environment = {
      ...props.environment,
      [Env.stormShare]: String(props.stormShare),
      [Env.stormMinimum]: String(props.stormMinimum),
      [Env.maxRequeues]: String(props.maxRequeues),
      [Env.billingStateMachineArn]: props.billing.stateMachineArn,
    };
    const sight = handlerFunction(this, 'sweep-sight', { environment, timeout: Duration.minutes(2) });
    const verify = handlerFunction(this, 'sweep-verify', { environment, timeout: Duration.minutes(2) });
    this.functions = { sight, verify };

    // Grants by need. The sparse index is the only way either function reads the job table (never a Scan).
    const index = `${props.jobs.tableArn}/index/${JOB_TABLE.sparseIndex!.name}`;
    for (const fn of [sight, verify]) {
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:Query'], resources: [index] }));
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [props.locks.tableArn] }));
    }
    verify.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:UpdateItem'], resources: [props.jobs.tableArn] }));
    props.billing.grantStartExecution(verify);

    const task = (taskId: string, fn: NodejsFunction, resultPath: string) => {
      const t = new tasks.LambdaInvoke(this, taskId, {
        lambdaFunction: fn,
        payloadResponseOnly: true,
        resultPath,
        retryOnServiceExceptions: false,
        taskTimeout: sfn.Timeout.duration(Duration.minutes(2).plus(Duration.seconds(30))),
      });
      t.addRetry({ errors: TRANSIENT_ERRORS, interval: Duration.seconds(1), backoffRate: 2, maxAttempts: 3, jitterStrategy: sfn.JitterType.FULL });
      return t;
    };
    const sightTask = task('SightClaimed', sight, '$.sighted');
    const wait = new sfn.Wait(this, 'WaitOutTheLease', { time: sfn.WaitTime.secondsPath('$.sighted.waitSeconds') });
    const verifyTask = task('VerifyAndRequeue', verify, '$.verified');
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
          logGroupName: stateMachineLogGroupName(this, 'sweeper'),
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

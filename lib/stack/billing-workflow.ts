/**
 * The nightly billing state machine (design §5) and its Lambdas, each a thin adapter over the core library.
 *
 *   Prepare → Observe ⇄ Wait a poll period … → Claim → Raise fence → Chunks (Map) → Complete
 *
 * The clock-free claim (reference Part 5) is spread over states: Observe reads the lock item and takes one step
 * of the claim rule (lib/core/lease.ts nextClaimStep); while someone holds it, a Wait state (SecondsPath) waits a
 * poll period on Step Functions' timer and Observe counts how long the rvn has stayed unchanged; once that is a
 * full lease, Claim claims on condition "rvn unchanged"; a failed claim observes again, within the claim budget. Every Lambda that acts
 * for the holder renews first and computes its own stop time: a stop time never crosses a process boundary.
 * A lost lease or a fenced-out write ends the run quietly (Succeed "Lost", with a metric, no retries); transient
 * store errors are retried with backoff; anything else releases the lease conditionally and fails loudly.
 */
import { type CfnElement, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { BillingHandlerName } from '../../lambda/index';
import type { StackConfig } from './config';
import { handlerFunction } from './handler-function';
import { Env } from '../../lambda/env';

/** The settings the workflow's functions and Map take: a slice of the validated stack configuration. */
export type WorkflowSettings = Pick<StackConfig,
  'leaseMs' | 'renewMs' | 'marginMs' | 'invoices' | 'chunkSize' | 'chunkConcurrency' | 'claimBudget' | 'scheduleTimeZone'>;

export interface BillingWorkflowProps {
  readonly locks: ITable;
  readonly jobs: ITable;
  readonly invoices: ITable;
  readonly bucket: IBucket;
  readonly settings: WorkflowSettings;
}

/** Error names the Lambdas throw (lib/core/errors.ts, lambda/runtime.ts). The Catch and Retry clauses match them. */
export const LOST_ERRORS = ['LeaseLostError', 'StopTimePassedError', 'FencedOutError'];
export const TRANSIENT_ERRORS = [
  'TransientStoreError', 'Lambda.ServiceException', 'Lambda.AWSLambdaException', 'Lambda.SdkClientException', 'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException', // the Invoke call itself timed out: nothing says the function ran, so try again
];

/**
 * Per-function timeouts; each task's timeout is its function's plus 30 s, so the Lambda always times out first.
 * A chunk is 51 transactions (5,000 invoices, 99 Puts each) plus its object and a manifest commit: about 2.5 s
 * (docs/PERFORMANCE.md). A minute leaves room for retries of every call, each bounded by the SDK's request timeout
 * (lib/core/stores.ts awsClients). Longer would only let a stuck chunk keep renewing its lease (the heartbeat runs
 * beside the work) while writing nothing, holding the night from a new holder.
 */
export const TIMEOUT: Record<BillingHandlerName, Duration> = {
  prepare: Duration.seconds(10), observe: Duration.seconds(20), claim: Duration.seconds(20), raise: Duration.seconds(30),
  chunk: Duration.minutes(1), complete: Duration.seconds(30), release: Duration.seconds(20),
};

/**
 * State machine log groups go under /aws/vendedlogs/states/: Step Functions adds every log group it delivers to to
 * the account's CloudWatch Logs resource policy, which is limited to 5,120 characters; under /aws/vendedlogs/ it
 * doesn't need to (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html).
 */
export function stateMachineLogGroupName(scope: Construct, name: string): string {
  return `/aws/vendedlogs/states/${Stack.of(scope).stackName}-${name}`;
}

export class BillingWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: Record<BillingHandlerName, NodejsFunction>;
  /** The environment every billing function gets (the sweeper's functions reuse it). */
  readonly environment: Record<string, string>;

  constructor(scope: Construct, id: string, props: BillingWorkflowProps) {
    super(scope, id);
    const s = props.settings;
    const environment: Record<string, string> = {
      [Env.lockTable]: props.locks.tableName, [Env.jobTable]: props.jobs.tableName, [Env.invoiceTable]: props.invoices.tableName,
      [Env.bucket]: props.bucket.bucketName,
      [Env.leaseMs]: String(s.leaseMs), [Env.renewMs]: String(s.renewMs), [Env.marginMs]: String(s.marginMs),
      [Env.invoices]: String(s.invoices), [Env.chunkSize]: String(s.chunkSize), [Env.claimBudget]: String(s.claimBudget),
      [Env.scheduleTimeZone]: s.scheduleTimeZone,
    };
    this.environment = environment;
    const fn = (name: BillingHandlerName, memoryMb = 256) => handlerFunction(this, name, { environment, timeout: TIMEOUT[name], memoryMb });
    this.functions = {
      prepare: fn('prepare'), observe: fn('observe'), claim: fn('claim'), raise: fn('raise'),
      chunk: fn('chunk', 1024), complete: fn('complete'), release: fn('release'),
    };

    // Grants by need: each function gets the actions it uses on the resources it touches, nothing more. Written
    // out rather than table.grant(), which would add the tables' index ARNs that no function reads.
    const f = this.functions;
    const allow = (fns: NodejsFunction[], actions: string[], resources: string[], conditions?: Record<string, unknown>) => {
      for (const one of fns) one.addToRolePolicy(new iam.PolicyStatement({ actions, resources, conditions }));
    };
    allow([f.observe], ['dynamodb:GetItem'], [props.locks.tableArn, props.jobs.tableArn]);
    allow([f.claim, f.raise, f.chunk, f.complete, f.release], ['dynamodb:UpdateItem'], [props.locks.tableArn]);
    allow([f.raise, f.complete], ['dynamodb:UpdateItem'], [props.jobs.tableArn]);
    allow([f.chunk], ['dynamodb:ConditionCheckItem', 'dynamodb:UpdateItem'], [props.jobs.tableArn]);
    allow([f.chunk], ['dynamodb:PutItem'], [props.invoices.tableArn]);
    const manifestFns = [f.raise, f.chunk, f.complete];
    // No s3:ListBucket: the raise creates the manifest with If-None-Match: * and reads only after a 412, so nothing
    // depends on whether a missing key answers 404 (with ListBucket) or 403 (without).
    allow(manifestFns, ['s3:GetObject', 's3:PutObject'], [props.bucket.arnForObjects('billing/*')]);
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(this.definition(s)),
      timeout: Duration.hours(2),
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'ExecutionLogs', {
          logGroupName: stateMachineLogGroupName(this, 'billing'), retention: logs.RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY,
        }),
        level: sfn.LogLevel.ALL,
        includeExecutionData: true,
      },
    });
    this.acknowledgeFindings(props.bucket);
  }

  /** The cdk-nag findings that remain, each acknowledged where it arises, with the reason it is right. */
  private acknowledgeFindings(bucket: IBucket): void {
    const stack = Stack.of(this);
    const logicalId = (c: Construct) => stack.getLogicalId(c.node.defaultChild as CfnElement);
    const bucketId = logicalId(bucket as unknown as Construct);
    for (const one of [this.functions.raise, this.functions.chunk, this.functions.complete]) {
      Validations.of(one).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/billing/*]`,
        reason: 'Manifest and chunk object keys carry the night\'s date and the writer\'s token (billing/<date>/chunks/03.t12.jsonl), so they cannot be listed in advance; the grant is limited to the billing/ prefix.',
      });
    }
    Validations.of(this.stateMachine).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'Execution logging (logs:CreateLogDelivery and friends) and X-Ray tracing support no resource-level permissions: AWS requires "*".',
    });
    Validations.of(this.stateMachine).acknowledge(...Object.values(this.functions).map((one) => ({
      id: `AwsSolutions-IAM5[Resource::<${logicalId(one)}.Arn>:*]`,
      reason: 'Step Functions\' LambdaInvoke grant covers this one function\'s versions and aliases (ARN:*), nothing else.',
    })));
  }

  /** A Lambda task with our retry policy; without resultPath its result replaces the state's input. */
  private task(id: string, name: BillingHandlerName, payload: Record<string, unknown>, resultPath?: string): tasks.LambdaInvoke {
    const t = new tasks.LambdaInvoke(this, id, {
      lambdaFunction: this.functions[name],
      payload: sfn.TaskInput.fromObject(payload),
      payloadResponseOnly: true, // Resource = the function's ARN: the local runner maps it back to the handler
      resultPath,
      taskTimeout: sfn.Timeout.duration(TIMEOUT[name].plus(Duration.seconds(30))),
      retryOnServiceExceptions: false, // the Retry below covers them, with our backoff
    });
    t.addRetry({ errors: TRANSIENT_ERRORS, interval: Duration.seconds(1), backoffRate: 2, maxAttempts: 4, jitterStrategy: sfn.JitterType.FULL });
    return t;
  }

  private definition(s: WorkflowSettings): sfn.IChainable {
    const night = { 'jobDate.$': '$.night.jobDate', 'holder.$': '$.night.holder' };
    const held = { ...night, 'token.$': '$.claimed.token' };

    const invalid = new sfn.Fail(this, 'InvalidInput', { error: 'InvalidInput', causePath: '$.error.Cause' });
    const prepare = this.task('Prepare', 'prepare', { 'input.$': '$', 'holder.$': '$$.Execution.Name' }, '$.night')
      .addCatch(invalid, { errors: ['ConfigError'], resultPath: '$.error' });
    const start = new sfn.Pass(this, 'FirstObservation', { result: sfn.Result.fromObject({ attempt: 0 }), resultPath: '$.observed' });
    const observe = this.task('Observe', 'observe', { ...night, 'previous.$': '$.observed' }, '$.observed');
    const claim = this.task('Claim', 'claim', { ...night, 'sighting.$': '$.observed' }, '$.claimed');
    const poll = new sfn.Wait(this, 'WatchTheLease', { time: sfn.WaitTime.secondsPath('$.observed.waitSeconds') });
    const raise = this.task('RaiseFence', 'raise', held, '$.raised');
    const chunkTask = this.task('BillChunk', 'chunk', { 'jobDate.$': '$.jobDate', 'holder.$': '$.holder', 'token.$': '$.token', 'chunk.$': '$.chunk' });
    const chunks = new sfn.Map(this, 'Chunks', {
      itemsPath: '$.raised.chunks',
      itemSelector: { ...held, 'chunk.$': '$$.Map.Item.Value' },
      maxConcurrency: s.chunkConcurrency,
      resultPath: '$.chunks',
    }).itemProcessor(chunkTask);
    const complete = this.task('Complete', 'complete', held, '$.completed');

    const completed = new sfn.Succeed(this, 'Completed');
    const alreadyDone = new sfn.Succeed(this, 'AlreadyDone');
    const lost = new sfn.Succeed(this, 'Lost', { comment: 'Lost the lease or fenced out: another holder owns the night. Quiet by design.' });
    const gaveUp = new sfn.Fail(this, 'ClaimBudgetExhausted', { error: 'ClaimBudgetExhausted', cause: 'the holder stayed alive through every lease of the claim budget' });
    const failed = new sfn.Fail(this, 'Failed', { error: 'BillingFailed', causePath: '$.error.Cause' });
    const releaseAfterFailure = this.task('ReleaseAfterFailure', 'release', held, '$.released');
    releaseAfterFailure.addCatch(failed, { resultPath: '$.releaseError' }).next(failed);
    for (const step of [raise, chunks, complete]) {
      step.addCatch(lost, { errors: LOST_ERRORS, resultPath: '$.lost' });
      step.addCatch(releaseAfterFailure, { errors: ['States.ALL'], resultPath: '$.error' });
    }

    // Transitions, in the order of the algorithm.
    prepare.next(start);
    start.next(observe);
    observe.next(new sfn.Choice(this, 'ClaimOrWatch')
      .when(sfn.Condition.booleanEquals('$.observed.done', true), alreadyDone)
      .when(sfn.Condition.booleanEquals('$.observed.exhausted', true), gaveUp)
      .when(sfn.Condition.booleanEquals('$.observed.claimNow', true), claim)
      .otherwise(poll));
    poll.next(observe);
    claim.next(new sfn.Choice(this, 'Claimed')
      .when(sfn.Condition.booleanEquals('$.claimed.claimed', true), raise)
      .otherwise(observe));
    raise.next(new sfn.Choice(this, 'AlreadyDoneAtRaise')
      .when(sfn.Condition.booleanEquals('$.raised.alreadyDone', true), alreadyDone)
      .otherwise(chunks));
    chunks.next(complete);
    complete.next(completed);
    return prepare;
  }
}

/**
 * A fenced job's state machine (design §5) and its functions, each a thin adapter over the core library; the one
 * function that does the job's work, a chunk, is the user's.
 *
 *   Prepare → Observe ⇄ Wait a poll period … → Claim → Raise fence → Chunks (Map of the user's function) → Complete
 *
 * The clock-free claim is spread over states: Observe reads the lock item and takes one step
 * of the claim rule (lib/core/lease.ts nextClaimStep); while someone holds it, a Wait state (SecondsPath) waits a
 * poll period on Step Functions' timer and Observe counts how long the rvn has stayed unchanged; once that is a
 * full lease, Claim claims on condition "rvn unchanged"; a failed claim observes again, within the claim budget. A
 * budget spent on a live holder whose run is RUNNING ends quietly (Succeed "AlreadyRunning": a duplicate start);
 * spent on any other live holder, the run fails (ClaimBudgetExhausted).
 * Every Lambda that acts for the holder renews first and computes its own stop time: a stop time never crosses a
 * process boundary. A lost lease or a fenced-out write ends the run quietly (Succeed "Lost", with a metric, no
 * retries); transient store errors are retried with backoff, and so, before the raise, is a process that died or
 * never answered (nothing else would start the run again); anything else fails loudly, releasing the lease
 * (conditionally) only if it failed before the chunks started: after, a chunk's Lambda may still run under it.
 *
 * Runs of more chunks than distributedMapAboveChunks run their chunks as a Distributed Map: each chunk is a child
 * execution with its own history (lib/constructs/chunk-plan.ts; docs/DESIGN.md "Large runs").
 */
import { type CfnElement, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { FencedHandlerName } from '../lambda/index';
import { Env } from '../lambda/env';
import { jobKeys, runKeysPattern } from '../core/job-keys';
import { EPOCH_FLOOR_KEY } from '../core/store/lock';
import { serviceName } from '../core/observability';
import { EXECUTION_TIMEOUT, chunkMapPlan } from './chunk-plan';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { HandlerFunction } from './handler-function';
import { keysGrant } from './job-table';
import type { Retrier } from './renewal-gap';
import { LOST_ERRORS, MAP_RUN_FAILED, PROCESS_ERRORS, PROCESS_RETRIES, STOP_TIME_PASSED, TRANSIENT_ERRORS, TRANSIENT_RETRIES } from './task-errors';

/** The settings the workflow's functions and Map take (validated by FencedJob; FencedJobSettings says each). */
export interface WorkflowSettings {
  /** How long a lease lasts without renewal. */
  readonly leaseMs: number;
  /** How often the holder renews. */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin. */
  readonly marginMs: number;
  /** Leases a claimant waits on a live holder before it gives up. */
  readonly claimBudget: number;
  /** Chunks in one run. */
  readonly chunks: number;
  /** Chunks run at once (the Map's MaxConcurrency). */
  readonly chunkConcurrency: number;
  /** Runs of more chunks than this run them as a Distributed Map. */
  readonly distributedMapAboveChunks: number;
  /** The largest output of one chunk invocation, in bytes. */
  readonly chunkOutputBytes: number;
  /** The time zone a scheduled start's date is read in. */
  readonly scheduleTimeZone: string;
}

/** The fenced workflow's stores, the user's chunk function, and its settings (FencedJob builds these). */
export interface FencedWorkflowProps {
  /** The job's name (lambda/job-keys.ts): its keys, its manifest folder, its log group. */
  readonly name: string;
  /** The lock table. */
  readonly lockTable: ITable;
  /** The job table. */
  readonly jobTable: ITable;
  /** The manifest bucket. @default - no manifest: the run's state is in DynamoDB alone (the chunk function writes no manifest) */
  readonly manifestBucket?: IBucket;
  /** The user's chunk function: it gets the fence's grants and, when it is a `lambda.Function`, the environment. */
  readonly chunkFunction: lambda.IFunction;
  /** The chunk function's own timeout; its task's is 30 s more, so the function always times out first. */
  readonly chunkTimeout: Duration;
  /** The chunk function writes its chunk's object and commits it to the run's manifest (grants on the job's S3 prefix). */
  readonly chunkWritesManifest: boolean;
  /** The chunk task's state name. */
  readonly chunkStepName: string;
  /** The lease, chunk and Map settings. */
  readonly settings: WorkflowSettings;
}

/**
 * Per-function timeouts of the workflow's own functions; each task's timeout is its function's plus 30 s, so the
 * Lambda always times out first. Each does a handful of single-item calls, each bounded by the SDK's request
 * timeout (lib/core/aws/clients.ts awsClients), with room for their retries.
 */
export const TIMEOUT: Record<FencedHandlerName, Duration> = {
  prepare: Duration.seconds(10),
  observe: Duration.seconds(20),
  claim: Duration.seconds(20),
  raise: Duration.seconds(30),
  complete: Duration.seconds(30),
  release: Duration.seconds(20),
};

/**
 * The backoff of every Retry in the workflow: from 1 s, doubling, full jitter, and at most 2 s a wait. The cap keeps
 * one retry's wait, which falls between two renewals of the holder when the retried task acts for it, within the
 * lease (lib/constructs/renewal-gap.ts; docs/DESIGN.md "The gap between renewals"): uncapped, the fourth retry's wait is 8 s.
 */
const RETRY_BACKOFF = { interval: Duration.seconds(1), backoffRate: 2, maxDelay: Duration.seconds(2), jitterStrategy: sfn.JitterType.FULL };

/** Transient store and Lambda service errors: every task retries them. */
const TRANSIENT_RETRY: sfn.RetryProps = { errors: TRANSIENT_ERRORS, maxAttempts: TRANSIENT_RETRIES, ...RETRY_BACKOFF };

/** A process that died or never answered, before the raise (RaiseFence also its own stop time: a pause). */
function processRetry(name: FencedHandlerName): sfn.RetryProps {
  return { errors: name === 'raise' ? [...PROCESS_ERRORS, STOP_TIME_PASSED] : PROCESS_ERRORS, maxAttempts: PROCESS_RETRIES, ...RETRY_BACKOFF };
}

/** A retrier as the template holds it (ASL). */
function aslOf(r: sfn.RetryProps): Retrier {
  return {
    ErrorEquals: r.errors ?? ['States.ALL'],
    IntervalSeconds: r.interval?.toSeconds(),
    BackoffRate: r.backoffRate,
    MaxAttempts: r.maxAttempts,
    MaxDelaySeconds: r.maxDelay?.toSeconds(),
  };
}

/**
 * The Retry blocks of every task that acts for the holder (RaiseFence, the chunk task, Complete), as the workflow
 * generates them: what the worst gap between renewals is computed from (lib/constructs/renewal-gap.ts).
 */
export function holderRetriers(): Retrier[] {
  return [TRANSIENT_RETRY, processRetry('raise')].map(aslOf);
}

/**
 * State machine log groups go under /aws/vendedlogs/states/: Step Functions adds every log group it delivers to to
 * the account's CloudWatch Logs resource policy, which is limited to 5,120 characters; under /aws/vendedlogs/ it
 * doesn't need to (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html).
 */
export function stateMachineLogGroupName(scope: Construct, name: string): string {
  return `/aws/vendedlogs/states/${Stack.of(scope).stackName}-${name}`;
}

/** `reindex` → `Reindex`, `sales-report` → `SalesReport`: the job's name in construct ids and the Fail state's error. */
export function pascalName(name: string): string {
  return name
    .split('-')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
}

/** The fenced workflow: its state machine, its own functions, and the grants and environment of the user's chunk function. */
export class FencedWorkflow extends Construct {
  /** The job's state machine: start it with `{ "jobDate": "YYYY-MM-DD" }` or `{ "scheduledTime": "<ISO time>" }`. */
  readonly stateMachine: sfn.StateMachine;
  /** The run's chunks run as a Distributed Map (chunkMapPlan), not inline. */
  readonly distributed: boolean;
  /** The workflow's own functions (the chunk function is the user's). */
  readonly functions: Record<FencedHandlerName, NodejsFunction>;
  /** The environment every function of the job gets, the chunk function's included (the sweeper's reuse it). */
  readonly environment: Record<string, string>;
  private readonly chunkFunction: lambda.IFunction;
  private readonly chunkTimeout: Duration;

  constructor(scope: Construct, id: string, props: FencedWorkflowProps) {
    super(scope, id);
    const s = props.settings;
    this.distributed = chunkMapPlan(s).mode === 'distributed';
    this.chunkFunction = props.chunkFunction;
    this.chunkTimeout = props.chunkTimeout;
    this.environment = {
      [Env.jobName]: props.name,
      [Env.chunks]: String(s.chunks),
      [Env.lockTable]: props.lockTable.tableName,
      [Env.jobTable]: props.jobTable.tableName,
      ...(props.manifestBucket ? { [Env.bucket]: props.manifestBucket.bucketName } : {}),
      [Env.leaseMs]: String(s.leaseMs),
      [Env.renewMs]: String(s.renewMs),
      [Env.marginMs]: String(s.marginMs),
      [Env.claimBudget]: String(s.claimBudget),
      [Env.scheduleTimeZone]: s.scheduleTimeZone,
      // Every function of the job, the user's chunk function included, publishes its metrics and logs as the job's
      // own service: the job's alarms and dashboard read that dimension, so another job's metrics never reach them.
      POWERTOOLS_SERVICE_NAME: serviceName(props.name),
    };
    const fn = (name: FencedHandlerName) =>
      new HandlerFunction(this, `${pascalName(name)}Function`, { handler: name, environment: this.environment, timeout: TIMEOUT[name] });
    this.functions = {
      prepare: fn('prepare'),
      observe: fn('observe'),
      claim: fn('claim'),
      raise: fn('raise'),
      complete: fn('complete'),
      release: fn('release'),
    };
    // A function the user imported (not a lambda.Function of this app) cannot be configured here: its owner sets
    // `environment` on it.
    if (props.chunkFunction instanceof lambda.Function) {
      for (const [k, v] of Object.entries(this.environment)) props.chunkFunction.addEnvironment(k, v);
    }
    this.grant(props);

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(this.definition(props)),
      timeout: EXECUTION_TIMEOUT,
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'ExecutionLogs', {
          logGroupName: stateMachineLogGroupName(this, props.name),
          retention: logs.RetentionDays.ONE_MONTH,
          removalPolicy: RemovalPolicy.DESTROY,
        }),
        level: sfn.LogLevel.ALL,
        includeExecutionData: true,
      },
    });
    this.acknowledgeFindings(props);
  }

  /**
   * Grants by need: each function gets the actions it uses on the resources it touches, nothing more. Written out
   * rather than table.grant(), which would add the tables' index ARNs that no function reads. The lock and job
   * tables may hold other jobs' keys: every grant on them is scoped to this job's (`<name>#…`: its lock items, job
   * rows and chunk fence items), and the claim's read to the epoch floor's item.
   */
  private grant(props: FencedWorkflowProps): void {
    const f = this.functions;
    const chunk = props.chunkFunction;
    const own = [runKeysPattern(props.name)];
    const allow = (fns: lambda.IFunction[], actions: string[], resources: string[], keys: string[] = own) => {
      for (const one of fns) one.addToRolePolicy(keysGrant(actions, resources, keys));
    };
    allow([f.observe], ['dynamodb:GetItem'], [props.lockTable.tableArn, props.jobTable.tableArn]);
    // After a Distributed Map's failure the release step only reads whether the lease is still ours (keep).
    allow([f.release], ['dynamodb:GetItem'], [props.lockTable.tableArn]);
    // Every function that acts for the holder renews first (UpdateItem on its lock item); release gives it back.
    allow([f.claim, f.raise, chunk, f.complete, f.release], ['dynamodb:UpdateItem'], [props.lockTable.tableArn]);
    // A key's first claim (each run's lock) reads the epoch floor, to start above it (docs/DESIGN.md "The restore bump").
    allow([f.claim], ['dynamodb:GetItem'], [props.lockTable.tableArn], [EPOCH_FLOOR_KEY]);
    allow([f.raise, f.complete], ['dynamodb:UpdateItem'], [props.jobTable.tableArn]);
    // Complete reads every chunk's fence item (its progress) before it marks the run DONE (docs/DESIGN.md, "Chunk fences").
    allow([f.complete], ['dynamodb:GetItem'], [props.jobTable.tableArn]);
    // Before a process's first claim (or raise), the library describes the table it is about to write (its key, its
    // index, no TTL: lib/core/aws/table-check.ts): a TTL on the lock table would reset the fencing tokens. Read-only, and
    // on that one table, in statements of their own: a table-level call carries no key, so no dynamodb:LeadingKeys.
    const describe = ['dynamodb:DescribeTable', 'dynamodb:DescribeTimeToLive'];
    f.claim.addToRolePolicy(new iam.PolicyStatement({ actions: describe, resources: [props.lockTable.tableArn] }));
    f.raise.addToRolePolicy(new iam.PolicyStatement({ actions: describe, resources: [props.jobTable.tableArn] }));
    // A chunk checks its chunk fence in each transaction and records itself done on it.
    allow([chunk], ['dynamodb:ConditionCheckItem', 'dynamodb:UpdateItem'], [props.jobTable.tableArn]);
    // No s3:ListBucket: the raise creates the manifest with If-None-Match: * and reads only after a 412, so nothing
    // depends on whether a missing key answers 404 (with ListBucket) or 403 (without).
    if (props.manifestBucket)
      for (const one of this.manifestWriters(props))
        one.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['s3:GetObject', 's3:PutObject'],
            resources: [props.manifestBucket.arnForObjects(`${jobKeys(props.name).prefix}*`)],
          }),
        );
  }

  /** The functions that write the manifest: the raise and complete, and the chunk function when it commits to it. */
  private manifestWriters(props: FencedWorkflowProps): lambda.IFunction[] {
    const f = this.functions;
    return props.chunkWritesManifest ? [f.raise, props.chunkFunction, f.complete] : [f.raise, f.complete];
  }

  /** The cdk-nag findings that remain, each acknowledged where it arises, with the reason it is right. */
  private acknowledgeFindings(props: FencedWorkflowProps): void {
    const stack = Stack.of(this);
    const logicalId = (c: Construct) => stack.getLogicalId(c.node.defaultChild as CfnElement);
    const prefix = jobKeys(props.name).prefix;
    // A bucket of this app is named by its logical id in the finding; an imported one by its ARN, when it is literal.
    const bucketArn =
      props.manifestBucket &&
      (props.manifestBucket.node.defaultChild
        ? `<${logicalId(props.manifestBucket)}.Arn>`
        : (stack.resolve(props.manifestBucket.bucketArn) as unknown));
    if (typeof bucketArn === 'string') {
      for (const one of this.manifestWriters(props)) {
        Validations.of(one).acknowledge({
          id: `AwsSolutions-IAM5[Resource::${bucketArn}/${prefix}*]`,
          reason: `Manifest and chunk object keys carry the run's date and the writer's token (${prefix}<date>/chunks/03.t12.jsonl), so they cannot be listed in advance; the grant is limited to the ${prefix} prefix.`,
        });
      }
    }
    Validations.of(this.stateMachine).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'Execution logging (logs:CreateLogDelivery and friends) and X-Ray tracing support no resource-level permissions: AWS requires "*".',
    });
    if (this.distributed) {
      // CDK's grant for a Distributed Map (its children are executions of this same state machine): StartExecution on
      // the machine, Describe/StopExecution on its executions and Redrive on its Map Runs' children, whose names
      // are only known at run time (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#dist-map-permissions).
      const executions = `arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"${logicalId(this.stateMachine)}"}]}]}`;
      Validations.of(this.stateMachine).acknowledge(
        {
          id: `AwsSolutions-IAM5[Resource::${executions}:*]`,
          reason:
            "Describe/StopExecution of this state machine's own executions only: a Distributed Map watches and stops the chunk child executions it starts, whose names are generated at run time.",
        },
        {
          id: `AwsSolutions-IAM5[Resource::${executions}/Chunks:*]`,
          reason: "RedriveExecution of the child executions of this state machine's Chunks Map Runs only (their names are generated at run time).",
        },
      );
    }
  }

  /** A Lambda task with our retry policy; without resultPath its result replaces the state's input. */
  private task(
    id: string,
    fn: lambda.IFunction,
    timeout: Duration,
    payload: Record<string, unknown>,
    resultPath?: string,
    outputPath?: string,
  ): tasks.LambdaInvoke {
    const t = new tasks.LambdaInvoke(this, id, {
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject(payload),
      payloadResponseOnly: true, // Resource = the function's ARN: the local runner maps it back to the handler
      resultPath,
      outputPath,
      taskTimeout: sfn.Timeout.duration(timeout.plus(Duration.seconds(30))),
      retryOnServiceExceptions: false, // the Retry below covers them, with our backoff
    });
    t.addRetry(TRANSIENT_RETRY);
    return t;
  }

  /** A task invoking one of the workflow's own functions. */
  private step(id: string, name: FencedHandlerName, payload: Record<string, unknown>, resultPath?: string): tasks.LambdaInvoke {
    return this.task(id, this.functions[name], TIMEOUT[name], payload, resultPath);
  }

  /**
   * A step before the fence is raised: also retried when its process died or never answered (PROCESS_ERRORS). Until
   * the job row is raised the sweeper cannot see the run and the trigger has fired once, so an execution that
   * fails here leaves the run never started again. Each of these steps is safe to run again, even beside a zombie
   * invocation of itself: Prepare and Observe only read; Claim's rvn is derived from the execution and the sighting,
   * so a retry finds its own claim (the same holder and token; a zombie's claim can land only on a free lock, after
   * the run's release, docs/DESIGN.md "Before the raise"); RaiseFence renews on "holder and
   * epoch still ours" and raises to the same token, which a second raise leaves as it is. RaiseFence is also retried
   * when its own stop time passed (STOP_TIME_PASSED): a pause, not another holder.
   */
  private preRaise(id: string, name: FencedHandlerName, payload: Record<string, unknown>, resultPath?: string): tasks.LambdaInvoke {
    const t = this.step(id, name, payload, resultPath);
    t.addRetry(processRetry(name));
    return t;
  }

  private definition(props: FencedWorkflowProps): sfn.IChainable {
    const run = { 'jobDate.$': '$.run.jobDate', 'holder.$': '$.run.holder' };
    const held = { ...run, 'token.$': '$.claimed.token' };

    const invalid = new sfn.Fail(this, 'InvalidInput', { error: 'InvalidInput', causePath: '$.error.Cause' });
    const prepare = this.preRaise('Prepare', 'prepare', { 'input.$': '$', 'holder.$': '$$.Execution.Name' }, '$.run').addCatch(invalid, {
      errors: ['ConfigError'],
      resultPath: '$.error',
    });
    const start = new sfn.Pass(this, 'FirstObservation', { result: sfn.Result.fromObject({ attempt: 0 }), resultPath: '$.observed' });
    const observe = this.preRaise('Observe', 'observe', { ...run, 'previous.$': '$.observed' }, '$.observed');
    const claim = this.preRaise('Claim', 'claim', { ...run, 'sighting.$': '$.observed' }, '$.claimed');
    const poll = new sfn.Wait(this, 'WatchTheLease', { time: sfn.WaitTime.secondsPath('$.observed.waitSeconds') });
    const raise = this.preRaise('RaiseFence', 'raise', held, '$.raised');
    // Distributed, a chunk's output is only its number (see chunkMap): the Map's output is then no larger than the
    // chunk list it was given.
    const chunkTask = this.task(
      props.chunkStepName,
      this.chunkFunction,
      this.chunkTimeout,
      { 'jobDate.$': '$.jobDate', 'holder.$': '$.holder', 'token.$': '$.token', 'chunk.$': '$.chunk' },
      undefined,
      this.distributed ? '$.chunk' : undefined,
    );
    const chunks = this.chunkMap(props.settings, { ...held, 'chunk.$': '$$.Map.Item.Value' }).itemProcessor(chunkTask);
    const complete = this.step('Complete', 'complete', held, '$.completed');

    const completed = new sfn.Succeed(this, 'Completed');
    const alreadyDone = new sfn.Succeed(this, 'AlreadyDone');
    const lost = new sfn.Succeed(this, 'Lost', { comment: 'Lost the lease or fenced out: another holder owns the run. Quiet by design.' });
    const alreadyRunning = new sfn.Succeed(this, 'AlreadyRunning', {
      comment: 'A duplicate start: another live holder kept the run RUNNING through the whole claim budget. Quiet by design.',
    });
    const gaveUp = new sfn.Fail(this, 'ClaimBudgetExhausted', {
      error: 'ClaimBudgetExhausted',
      cause: 'a holder stayed alive through every lease of the claim budget without the run RUNNING under its token',
    });
    const failed = new sfn.Fail(this, 'Failed', { error: `${pascalName(props.name)}Failed`, causePath: '$.error.Cause' });
    const releaseAfterFailure = this.step('ReleaseAfterFailure', 'release', held, '$.released');
    releaseAfterFailure.addCatch(failed, { resultPath: '$.releaseError' }).next(failed);
    // A failed child execution reaches a Distributed Map's Catch only as MAP_RUN_FAILED, never as its own error: look
    // whether the lease is still ours (the release step with keep); one no longer ours means another holder owns the
    // run (Lost).
    const afterMapRunFailed = chunks instanceof sfn.DistributedMap ? this.checkAfterMapRun(held, lost, failed) : undefined;
    for (const step of [raise, chunks, complete]) {
      // RaiseFence retries its own StopTimePassedError (a pause); one still past its stop time after every retry is
      // not another holder's doing (a fresh renewal would have met LeaseLostError): it fails loudly, through the
      // release, rather than ending Lost for the sweeper to re-queue into the same end.
      const quiet = step === raise ? LOST_ERRORS.filter((e) => e !== STOP_TIME_PASSED) : LOST_ERRORS;
      step.addCatch(lost, { errors: quiet, resultPath: '$.lost' });
      if (step === chunks && afterMapRunFailed) step.addCatch(afterMapRunFailed, { errors: [MAP_RUN_FAILED], resultPath: '$.error' });
      // Once the chunks started, a failure gives nothing back: a chunk's Lambda may still run under the lease, renewing
      // it (a failed Map's other iterations, the first invocation of a retried one: Step Functions stops neither), and
      // a release would let a waiting holder claim while it acts. The lease lapses once the last of them stops.
      step.addCatch(step === raise ? releaseAfterFailure : failed, { errors: ['States.ALL'], resultPath: '$.error' });
    }

    // Transitions, in the order of the algorithm.
    prepare.next(start);
    start.next(observe);
    observe.next(
      new sfn.Choice(this, 'ClaimOrWatch')
        .when(sfn.Condition.booleanEquals('$.observed.done', true), alreadyDone)
        .when(sfn.Condition.booleanEquals('$.observed.anotherHolder', true), alreadyRunning)
        .when(sfn.Condition.booleanEquals('$.observed.exhausted', true), gaveUp)
        .when(sfn.Condition.booleanEquals('$.observed.claimNow', true), claim)
        .otherwise(poll),
    );
    poll.next(observe);
    claim.next(new sfn.Choice(this, 'Claimed').when(sfn.Condition.booleanEquals('$.claimed.claimed', true), raise).otherwise(observe));
    raise.next(
      new sfn.Choice(this, 'AlreadyDoneAtRaise').when(sfn.Condition.booleanEquals('$.raised.alreadyDone', true), alreadyDone).otherwise(chunks),
    );
    chunks.next(complete);
    complete.next(completed);
    return prepare;
  }

  /**
   * The chunk Map. Inline (the default) keeps every iteration in this execution's history and its results in the
   * state. Distributed, each chunk is a STANDARD child execution with its own history (a chunk and its retries can
   * take 5 × 90 s, past an Express child's 5 minutes). A Distributed Map still assembles its children's outputs into
   * one array, even with ResultPath null (https://github.com/aws/aws-cdk/issues/24799), so each child outputs only
   * its chunk number (the chunk task's OutputPath): the array is no larger than the chunk list, which the config
   * checks keep within the 256 KiB payload quota, and it is discarded (Complete reads progress from the chunk fence
   * items, not from the Map). No ResultWriter (nor its S3 grant) and no ItemReader are needed. No failure is
   * tolerated, as inline: the first failed chunk stops the Map Run.
   */
  private chunkMap(s: WorkflowSettings, itemSelector: Record<string, unknown>): sfn.Map | sfn.DistributedMap {
    if (!this.distributed) {
      return new sfn.Map(this, 'Chunks', { itemsPath: '$.raised.chunks', itemSelector, maxConcurrency: s.chunkConcurrency, resultPath: '$.chunks' });
    }
    return new sfn.DistributedMap(this, 'Chunks', {
      itemsPath: '$.raised.chunks',
      itemSelector,
      maxConcurrency: s.chunkConcurrency,
      mapExecutionType: sfn.StateMachineType.STANDARD,
      label: 'Chunks',
      resultPath: sfn.JsonPath.DISCARD,
    });
  }

  /** Distributed only: why did the Map Run fail? A lease no longer ours means we lost it; the step only looks. */
  private checkAfterMapRun(held: Record<string, string>, lost: sfn.IChainable, failed: sfn.Fail): sfn.IChainable {
    const check = this.step('CheckAfterChunkFailure', 'release', { ...held, keep: true }, '$.released');
    check.addCatch(failed, { resultPath: '$.releaseError' });
    return check.next(new sfn.Choice(this, 'ChunksLostOrFailed').when(sfn.Condition.booleanEquals('$.released.held', false), lost).otherwise(failed));
  }
}

/**
 * The nightly billing state machine (design §5) and its Lambdas, each a thin adapter over the core library.
 *
 *   Prepare → Observe ⇄ Wait a poll period … → Claim → Raise fence → Chunks (Map) → Complete
 *
 * The clock-free claim (reference Part 5) is spread over states: Observe reads the lock item and takes one step
 * of the claim rule (core/lease.ts nextClaimStep); while someone holds it, a Wait state (SecondsPath) waits a
 * poll period on Step Functions' timer and Observe counts how long the rvn has stayed unchanged; once that is a
 * full lease, Claim claims on condition "rvn unchanged"; a failed claim observes again, within the claim budget. Every Lambda that acts
 * for the holder renews first and computes its own stop time: a stop time never crosses a process boundary.
 * A lost lease or a fenced-out write ends the run quietly (Succeed "Lost", with a metric, no retries); transient
 * store errors are retried with backoff; anything else releases the lease conditionally and fails loudly.
 *
 * Large nights (more chunks than distributedMapAboveChunks) run their chunks as a Distributed Map: each chunk is a
 * child execution with its own history, so the parent's history and payload no longer grow with the night
 * (chunkMapPlan below; docs: DESIGN.md "Large nights").
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
import type { BillingHandlerName } from '../lambda/index';
import type { StackConfig } from './config';
import { handlerFunction } from './handler-function';
import { Env } from '../lambda/env';

/** The settings the workflow's functions and Map take: a slice of the validated stack configuration. */
export type WorkflowSettings = Pick<
  StackConfig,
  | 'leaseMs'
  | 'renewMs'
  | 'marginMs'
  | 'invoices'
  | 'chunkSize'
  | 'chunkConcurrency'
  | 'claimBudget'
  | 'scheduleTimeZone'
  | 'distributedMapAboveChunks'
>;

export interface BillingWorkflowProps {
  readonly locks: ITable;
  readonly jobs: ITable;
  readonly invoices: ITable;
  readonly bucket: IBucket;
  readonly settings: WorkflowSettings;
}

/** Error names the Lambdas throw (core/errors.ts, lambda/runtime.ts). The Catch and Retry clauses match them. */
export const LOST_ERRORS = ['LeaseLostError', 'StopTimePassedError', 'FencedOutError'];
export const TRANSIENT_ERRORS = [
  'TransientStoreError',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException', // the Invoke call itself timed out: nothing says the function ran, so try again
];
/** Retries of a transient error per task (ASL MaxAttempts counts retries, not attempts: 1 + 4 invocations at most). */
export const TRANSIENT_RETRIES = 4;
/**
 * What AWS reports when a child execution of a Distributed Map fails (no failure is tolerated): the child's own
 * error (LeaseLostError, ...) never reaches the Map's Catch. Cause: "The specified tolerated failure threshold was
 * exceeded". https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#maprun-fail-threshold
 */
export const MAP_RUN_FAILED = 'States.ExceedToleratedFailureThreshold';

/**
 * Per-function timeouts; each task's timeout is its function's plus 30 s, so the Lambda always times out first.
 * A chunk is 51 transactions (5,000 invoices, 99 Puts each) plus its object and a manifest commit: about 2.5 s
 * (docs/PERFORMANCE.md). A minute leaves room for retries of every call, each bounded by the SDK's request timeout
 * (core/stores.ts awsClients). Longer would only let a stuck chunk keep renewing its lease (the heartbeat runs
 * beside the work) while writing nothing, holding the night from a new holder.
 */
export const TIMEOUT: Record<BillingHandlerName, Duration> = {
  prepare: Duration.seconds(10),
  observe: Duration.seconds(20),
  claim: Duration.seconds(20),
  raise: Duration.seconds(30),
  chunk: Duration.minutes(1),
  complete: Duration.seconds(30),
  release: Duration.seconds(20),
};

/** The billing execution's own timeout (a night that runs past it fails, and the ExecutionsTimedOut alarm fires). */
export const EXECUTION_TIMEOUT = Duration.hours(2);

/**
 * Step Functions quotas the chunk Map is planned against (https://docs.aws.amazon.com/step-functions/latest/dg/limits.html):
 * 25,000 history events per execution and 256 KiB (262,144 bytes) of input or output per state; an inline Map runs
 * at most 40 iterations at once (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html), a
 * Distributed Map at most 10,000 child executions
 * (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html).
 */
export const SFN_QUOTAS = { historyEvents: 25_000, payloadBytes: 262_144, inlineConcurrency: 40, distributedConcurrency: 10_000 } as const;

/**
 * The chunk-time assumption: one fenced transaction (1 check + 99 Puts) takes ~50 ms (DynamoDB Local on the 2-core
 * development machine: 510 in 23.95 s, docs/PERFORMANCE.md bench 8; AWS is expected to be faster), and the tail
 * (chunk object, manifest commit, progress update) ~50 ms (measured 29–45 ms). A chunk must fit in half its
 * function's timeout: the other half is for the SDK's retries of slow calls (core/stores.ts REQUEST_TIMEOUT_MS).
 */
export const CHUNK_TIME = { msPerTransaction: 50, tailMs: 50, putsPerTransaction: 99, shareOfTimeout: 0.5 } as const;

/**
 * History events, counted from the event types Step Functions writes
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html), each path at its worst:
 * a Lambda task is TaskStateEntered, LambdaFunctionScheduled, LambdaFunctionStarted, LambdaFunctionSucceeded,
 * TaskStateExited (5), and each retry adds Scheduled, Started, Failed/TimedOut (3); a Choice, Wait or Pass state is
 * Entered + Exited (2); an inline Map iteration adds MapIterationStarted + MapIterationSucceeded (2).
 */
export const HISTORY = {
  task: 5 + 3 * TRANSIENT_RETRIES, // 17: every allowed retry of a transient error taken
  passOrChoice: 2,
  mapIteration: 2,
  mapState: 4, // MapStateEntered, MapStateStarted, MapStateSucceeded, MapStateExited
  execution: 2, // ExecutionStarted, ExecutionSucceeded/Failed
} as const;

export type ChunkMapMode = 'inline' | 'distributed';

/** How a night's chunks run, and the figures the checks compare with AWS's quotas. */
export interface ChunkMapPlan {
  readonly chunks: number;
  readonly mode: ChunkMapMode;
  /** Worst-case history of the billing execution without its chunks: the longest claim loop and every retry. */
  readonly fixedEvents: number;
  /** Worst-case events one chunk adds to the parent's history when inline: 2 + 17 = 19 (0 when distributed). */
  readonly eventsPerChunk: number;
  /** Worst-case history of the parent execution in this mode. */
  readonly historyEvents: number;
  /** Bytes of the largest state the execution carries: the raise's chunk list, plus (inline) the Map's results. */
  readonly payloadBytes: number;
  /** Estimated duration of one chunk (CHUNK_TIME). */
  readonly chunkMs: number;
}

/** A slack for the state around the chunk list: night, observation, claim and raise objects (well under 1 KB today). */
const STATE_RESERVE_BYTES = 8_192;

const digits = (n: number) => String(Math.max(0, Math.floor(n))).length;

/** JSON.stringify([0, 1, …, chunks - 1]).length, without building it: each d-digit index is d digits and a comma. */
export function chunkListBytes(chunks: number): number {
  let bytes = 2 - (chunks > 0 ? 1 : 0); // brackets, less the last comma
  for (let d = 1; 10 ** (d - 1) <= chunks - 1 || d === 1; d++) {
    const from = d === 1 ? 0 : 10 ** (d - 1);
    bytes += Math.max(0, Math.min(chunks, 10 ** d) - from) * (d + 1);
  }
  return bytes;
}

/**
 * The plan for a night (pure, for the config checks and the definition): chunks above distributedMapAboveChunks
 * run distributed. The history bound: the claim loop waits at most claimBudget leases in Wait states of at least
 * 1 s, so at most ceil(claimBudget × leaseMs / 1000) waits, each followed by an observation (Observe + Choice + Wait),
 * plus one failed claim per lease watched (Claim + Choice, then an observation without a wait).
 */
export function chunkMapPlan(
  s: Pick<WorkflowSettings, 'invoices' | 'chunkSize' | 'leaseMs' | 'claimBudget' | 'distributedMapAboveChunks'>,
): ChunkMapPlan {
  const chunks = Math.ceil(s.invoices / s.chunkSize);
  const mode: ChunkMapMode = chunks > s.distributedMapAboveChunks ? 'distributed' : 'inline';
  const waits = Math.ceil((s.claimBudget * s.leaseMs) / 1000);
  const failedClaims = s.claimBudget + 1;
  const observation = HISTORY.task + HISTORY.passOrChoice;
  const fixedEvents =
    HISTORY.execution +
    HISTORY.task +
    HISTORY.passOrChoice + // Prepare, FirstObservation
    waits * (HISTORY.passOrChoice + observation) +
    observation + // WatchTheLease → Observe → ClaimOrWatch, and the first look
    failedClaims * (HISTORY.task + HISTORY.passOrChoice + observation) + // Claim → Claimed → Observe → ClaimOrWatch
    HISTORY.task +
    HISTORY.passOrChoice + // RaiseFence, AlreadyDoneAtRaise
    HISTORY.mapState +
    2 * (HISTORY.task + HISTORY.passOrChoice); // Complete + Completed, or the failure path's release, Choice and Fail
  const eventsPerChunk = mode === 'inline' ? HISTORY.mapIteration + HISTORY.task : 0;
  // The chunk list as the raise returns it ([0,1,…]); inline, the Map's results stay in the state too:
  // {"chunk":N,"recorded":S,"alreadyRecorded":S,"transactions":T} per chunk (lambda/chunk.ts), at their widest.
  const transactions = Math.ceil(s.chunkSize / CHUNK_TIME.putsPerTransaction);
  const resultBytes = 2 + chunks * (58 + digits(chunks - 1) + 2 * digits(s.chunkSize) + digits(transactions));
  const payloadBytes = STATE_RESERVE_BYTES + chunkListBytes(chunks) + (mode === 'inline' ? resultBytes : 0);
  return {
    chunks,
    mode,
    fixedEvents,
    eventsPerChunk,
    historyEvents: fixedEvents + chunks * eventsPerChunk,
    payloadBytes,
    chunkMs: transactions * CHUNK_TIME.msPerTransaction + CHUNK_TIME.tailMs,
  };
}

/**
 * Every problem with how the chunks would run on AWS, each naming the setting to change first. Assumes the core
 * checks (positive integers, lease relations) passed.
 */
export function chunkMapProblems(
  s: Pick<WorkflowSettings, 'invoices' | 'chunkSize' | 'chunkConcurrency' | 'leaseMs' | 'claimBudget' | 'distributedMapAboveChunks'>,
): string[] {
  const problems: string[] = [];
  if (!Number.isSafeInteger(s.distributedMapAboveChunks) || s.distributedMapAboveChunks < 0) {
    problems.push(`distributedMapAboveChunks must be a non-negative integer (0: always distributed), got ${s.distributedMapAboveChunks}`);
    return problems;
  }
  const plan = chunkMapPlan(s);
  const [limit, where] =
    plan.mode === 'inline'
      ? [
          SFN_QUOTAS.inlineConcurrency,
          `an inline Map (this night's ${plan.chunks} chunks are at most distributedMapAboveChunks, ${s.distributedMapAboveChunks})`,
        ]
      : [SFN_QUOTAS.distributedConcurrency, 'a Distributed Map'];
  if (!Number.isSafeInteger(s.chunkConcurrency) || s.chunkConcurrency < 1 || s.chunkConcurrency > limit) {
    problems.push(`chunkConcurrency must be an integer from 1 to ${limit} for ${where}, got ${s.chunkConcurrency}`);
  }
  const budgetMs = TIMEOUT.chunk.toMilliseconds() * CHUNK_TIME.shareOfTimeout;
  if (plan.chunkMs > budgetMs) {
    const maxSize = Math.floor((budgetMs - CHUNK_TIME.tailMs) / CHUNK_TIME.msPerTransaction) * CHUNK_TIME.putsPerTransaction;
    problems.push(
      `chunkSize (${s.chunkSize}) makes a chunk of about ${(plan.chunkMs / 1000).toFixed(1)} s (${CHUNK_TIME.msPerTransaction} ms per transaction of ${CHUNK_TIME.putsPerTransaction} invoices), more than half the chunk function's ${TIMEOUT.chunk.toSeconds()} s timeout: at most ${maxSize}`,
    );
  }
  if (plan.fixedEvents > SFN_QUOTAS.historyEvents) {
    problems.push(
      `claimBudget (${s.claimBudget}) × leaseMs (${s.leaseMs}) lets the claim loop alone write up to ${plan.fixedEvents} history events (1 s polls), above the ${SFN_QUOTAS.historyEvents} quota`,
    );
  } else if (plan.historyEvents > SFN_QUOTAS.historyEvents) {
    const inlineMax = Math.floor((SFN_QUOTAS.historyEvents - plan.fixedEvents) / (HISTORY.mapIteration + HISTORY.task));
    problems.push(
      `distributedMapAboveChunks (${s.distributedMapAboveChunks}) runs this night's ${plan.chunks} chunks inline, whose history can reach ${plan.historyEvents} events, above the ${SFN_QUOTAS.historyEvents} quota: set it to at most ${inlineMax}`,
    );
  }
  if (plan.payloadBytes > SFN_QUOTAS.payloadBytes) {
    problems.push(
      `chunkSize (${s.chunkSize}) makes ${plan.chunks} chunks, whose list${plan.mode === 'inline' ? ' and inline results' : ''} (about ${plan.payloadBytes} bytes with the rest of the state) exceed the ${SFN_QUOTAS.payloadBytes}-byte state payload quota: raise chunkSize${plan.mode === 'inline' ? ' or lower distributedMapAboveChunks' : ''}`,
    );
  }
  const nightMs = Math.ceil(plan.chunks / Math.max(1, s.chunkConcurrency)) * plan.chunkMs;
  if (nightMs > EXECUTION_TIMEOUT.toMilliseconds()) {
    problems.push(
      `chunkConcurrency (${s.chunkConcurrency}) bills ${plan.chunks} chunks in about ${Math.round(nightMs / 60_000)} minutes, past the execution's ${EXECUTION_TIMEOUT.toHumanString()} timeout: raise it`,
    );
  }
  return problems;
}

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
  /** The night's chunks run as a Distributed Map (chunkMapPlan), not inline. */
  readonly distributed: boolean;
  readonly functions: Record<BillingHandlerName, NodejsFunction>;
  /** The environment every billing function gets (the sweeper's functions reuse it). */
  readonly environment: Record<string, string>;

  constructor(scope: Construct, id: string, props: BillingWorkflowProps) {
    super(scope, id);
    const s = props.settings;
    this.distributed = chunkMapPlan(s).mode === 'distributed';
    const environment: Record<string, string> = {
      [Env.lockTable]: props.locks.tableName,
      [Env.jobTable]: props.jobs.tableName,
      [Env.invoiceTable]: props.invoices.tableName,
      [Env.bucket]: props.bucket.bucketName,
      [Env.leaseMs]: String(s.leaseMs),
      [Env.renewMs]: String(s.renewMs),
      [Env.marginMs]: String(s.marginMs),
      [Env.invoices]: String(s.invoices),
      [Env.chunkSize]: String(s.chunkSize),
      [Env.claimBudget]: String(s.claimBudget),
      [Env.scheduleTimeZone]: s.scheduleTimeZone,
    };
    this.environment = environment;
    const fn = (name: BillingHandlerName, memoryMb = 256) => handlerFunction(this, name, { environment, timeout: TIMEOUT[name], memoryMb });
    this.functions = {
      prepare: fn('prepare'),
      observe: fn('observe'),
      claim: fn('claim'),
      raise: fn('raise'),
      chunk: fn('chunk', 1024),
      complete: fn('complete'),
      release: fn('release'),
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
    // Complete reads every chunk's fence item (its progress) before it marks the night DONE (docs/DESIGN.md, "Chunk fences").
    allow([f.complete], ['dynamodb:GetItem'], [props.jobs.tableArn]);
    allow([f.chunk], ['dynamodb:ConditionCheckItem', 'dynamodb:UpdateItem'], [props.jobs.tableArn]);
    allow([f.chunk], ['dynamodb:PutItem'], [props.invoices.tableArn]);
    const manifestFns = [f.raise, f.chunk, f.complete];
    // No s3:ListBucket: the raise creates the manifest with If-None-Match: * and reads only after a 412, so nothing
    // depends on whether a missing key answers 404 (with ListBucket) or 403 (without).
    allow(manifestFns, ['s3:GetObject', 's3:PutObject'], [props.bucket.arnForObjects('billing/*')]);
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(this.definition(s)),
      timeout: EXECUTION_TIMEOUT,
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'ExecutionLogs', {
          logGroupName: stateMachineLogGroupName(this, 'billing'),
          retention: logs.RetentionDays.ONE_MONTH,
          removalPolicy: RemovalPolicy.DESTROY,
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
        reason:
          "Manifest and chunk object keys carry the night's date and the writer's token (billing/<date>/chunks/03.t12.jsonl), so they cannot be listed in advance; the grant is limited to the billing/ prefix.",
      });
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
  private task(id: string, name: BillingHandlerName, payload: Record<string, unknown>, resultPath?: string, outputPath?: string): tasks.LambdaInvoke {
    const t = new tasks.LambdaInvoke(this, id, {
      lambdaFunction: this.functions[name],
      payload: sfn.TaskInput.fromObject(payload),
      payloadResponseOnly: true, // Resource = the function's ARN: the local runner maps it back to the handler
      resultPath,
      outputPath,
      taskTimeout: sfn.Timeout.duration(TIMEOUT[name].plus(Duration.seconds(30))),
      retryOnServiceExceptions: false, // the Retry below covers them, with our backoff
    });
    t.addRetry({
      errors: TRANSIENT_ERRORS,
      interval: Duration.seconds(1),
      backoffRate: 2,
      maxAttempts: TRANSIENT_RETRIES,
      jitterStrategy: sfn.JitterType.FULL,
    });
    return t;
  }

  private definition(s: WorkflowSettings): sfn.IChainable {
    const night = { 'jobDate.$': '$.night.jobDate', 'holder.$': '$.night.holder' };
    const held = { ...night, 'token.$': '$.claimed.token' };

    const invalid = new sfn.Fail(this, 'InvalidInput', { error: 'InvalidInput', causePath: '$.error.Cause' });
    const prepare = this.task('Prepare', 'prepare', { 'input.$': '$', 'holder.$': '$$.Execution.Name' }, '$.night').addCatch(invalid, {
      errors: ['ConfigError'],
      resultPath: '$.error',
    });
    const start = new sfn.Pass(this, 'FirstObservation', { result: sfn.Result.fromObject({ attempt: 0 }), resultPath: '$.observed' });
    const observe = this.task('Observe', 'observe', { ...night, 'previous.$': '$.observed' }, '$.observed');
    const claim = this.task('Claim', 'claim', { ...night, 'sighting.$': '$.observed' }, '$.claimed');
    const poll = new sfn.Wait(this, 'WatchTheLease', { time: sfn.WaitTime.secondsPath('$.observed.waitSeconds') });
    const raise = this.task('RaiseFence', 'raise', held, '$.raised');
    const distributed = this.distributed;
    // Distributed, a chunk's output is only its number (see chunkMap): the Map's output is then no larger than the
    // chunk list it was given.
    const chunkTask = this.task(
      'BillChunk',
      'chunk',
      { 'jobDate.$': '$.jobDate', 'holder.$': '$.holder', 'token.$': '$.token', 'chunk.$': '$.chunk' },
      undefined,
      distributed ? '$.chunk' : undefined,
    );
    const chunks = this.chunkMap(s, { ...held, 'chunk.$': '$$.Map.Item.Value' }).itemProcessor(chunkTask);
    const complete = this.task('Complete', 'complete', held, '$.completed');

    const completed = new sfn.Succeed(this, 'Completed');
    const alreadyDone = new sfn.Succeed(this, 'AlreadyDone');
    const lost = new sfn.Succeed(this, 'Lost', { comment: 'Lost the lease or fenced out: another holder owns the night. Quiet by design.' });
    const gaveUp = new sfn.Fail(this, 'ClaimBudgetExhausted', {
      error: 'ClaimBudgetExhausted',
      cause: 'the holder stayed alive through every lease of the claim budget',
    });
    const failed = new sfn.Fail(this, 'Failed', { error: 'BillingFailed', causePath: '$.error.Cause' });
    const releaseAfterFailure = this.task('ReleaseAfterFailure', 'release', held, '$.released');
    releaseAfterFailure.addCatch(failed, { resultPath: '$.releaseError' }).next(failed);
    // A failed child execution reaches a Distributed Map's Catch only as MAP_RUN_FAILED, never as its own error:
    // release conditionally, and a release that finds the lease gone means another holder owns the night (Lost).
    const afterMapRunFailed = chunks instanceof sfn.DistributedMap ? this.releaseAfterMapRun(held, lost, failed) : undefined;
    for (const step of [raise, chunks, complete]) {
      step.addCatch(lost, { errors: LOST_ERRORS, resultPath: '$.lost' });
      if (step === chunks && afterMapRunFailed) step.addCatch(afterMapRunFailed, { errors: [MAP_RUN_FAILED], resultPath: '$.error' });
      step.addCatch(releaseAfterFailure, { errors: ['States.ALL'], resultPath: '$.error' });
    }

    // Transitions, in the order of the algorithm.
    prepare.next(start);
    start.next(observe);
    observe.next(
      new sfn.Choice(this, 'ClaimOrWatch')
        .when(sfn.Condition.booleanEquals('$.observed.done', true), alreadyDone)
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
   * The chunk Map. Inline (the default night: unchanged) keeps every iteration in this execution's history and its
   * results in the state. Distributed, each chunk is a STANDARD child execution with its own history (a chunk and
   * its retries can take 5 × 90 s, past an Express child's 5 minutes). A Distributed Map still assembles its
   * children's outputs into one array, even with ResultPath null (https://github.com/aws/aws-cdk/issues/24799), so
   * each child outputs only its chunk number (BillChunk's OutputPath): the array is no larger than the chunk list,
   * which the config checks keep within the 256 KiB payload quota, and it is discarded (Complete reads progress
   * from the job row, not from the Map). No ResultWriter (nor its S3 grant) and no ItemReader are needed. No failure
   * is tolerated, as inline: the first failed chunk stops the Map Run.
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

  /** Distributed only: why did the Map Run fail? A release that finds the lease no longer ours means we lost it. */
  private releaseAfterMapRun(held: Record<string, string>, lost: sfn.IChainable, failed: sfn.Fail): sfn.IChainable {
    const release = this.task('ReleaseAfterChunkFailure', 'release', held, '$.released');
    release.addCatch(failed, { resultPath: '$.releaseError' });
    return release.next(
      new sfn.Choice(this, 'ChunksLostOrFailed').when(sfn.Condition.booleanEquals('$.released.released', false), lost).otherwise(failed),
    );
  }
}

/**
 * The world of a FencedJob: the REAL handlers of FencedJob's state machine and of its orphan
 * sweeper (lib/lambda/prepare.ts, observe, claim, raise, the chunk handler, complete, release, sweep-sight, sweep-verify)
 * on the in-memory stores (or lib/core/aws's on DynamoDB Local and local S3: dynamo.ts) and one VirtualClock, driven
 * by the states of the SYNTHESIZED definitions: a small deterministic interpreter of the Amazon States Language they
 * use (Task with Parameters, ResultPath, TimeoutSeconds, Retry and Catch by error name; Pass, Wait with SecondsPath,
 * Choice, an inline or a Distributed Map, Succeed, Fail) on virtual time. A quarter of the schedules run the job built
 * with a Distributed Map (distributedMapAboveChunks 0): a child execution per chunk, a Map Run start-up and wind-down,
 * a failed child failing the Map Run and aborting the rest.
 * The definitions come from a FencedJob built in this process (bundling skipped) with the job's shape (WorkflowJob:
 * its chunks, lease, chunk function's timeout and environment), so a change in the constructs changes what is
 * explored; the sweeper's period is its schedule's rate expression. The chunk function's work is the job's: the
 * repository's own (verify/explore/workflow-world.ts, which also breaks rules on purpose through `variant`), or a
 * user's (explore-fenced-job.ts).
 *
 * Actors: every Lambda invocation is one (a cold process each, its runtime made by lib/lambda/runtime.ts createRuntime
 * on the schedule's stores and its own view of the clock); its store calls and its StartExecution are the step
 * boundaries where the scheduler (scheduler.ts) interleaves and injects crash, pause, lost, throttle and conflict.
 * On top of those, at the Lambda and Step Functions level (the error names as Step Functions reports them:
 * https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html):
 *   crash of a process     the task fails with Runtime.ExitError (what Lambda reports when the runtime exits), or
 *                          Lambda.Unknown (the sandbox died) a quarter of the time;
 *   invoke throttled       Lambda.TooManyRequestsException before the handler ran;
 *   invoke 500             Lambda.ServiceException, Lambda.AWSLambdaException or Lambda.SdkClientException (Lambda's
 *                          transient 500s), the handler not run, or run on beside the Retry's next attempt;
 *   invoke timed out       Lambda.ClientExecutionTimeoutException after the handler's k-th store call, while it runs
 *                          on: the Retry starts a second invocation beside it;
 *   sandbox died           Lambda.Unknown: the process is killed before the handler ran, right after its k-th store
 *                          call landed (its answer never comes), or as it returned; it never runs again (drawn in
 *                          the timeouts' share, beside the two below);
 *   function timed out     Sandbox.Timedout: the handler's k-th store call hangs (sent or not), its timers run on,
 *                          and at the function's own timeout Lambda kills the process and answers the task (AWS's
 *                          page names a function timeout Lambda.Unknown under lambda:invoke; with the function's
 *                          ARN as the Resource, as here, it is the runtime's Sandbox.Timedout: the Retry names both);
 *   no answer              the handler's answer never reaches the task: only the task's TimeoutSeconds ends it;
 *   task timeout           a task whose invocation stalls (a pause) past TimeoutSeconds fails with States.Timeout and
 *                          the execution moves on while the Lambda still runs: a zombie holder;
 *   a Map's iteration fails the Map stops its other iterations (sfn.ts); their Lambdas run on, answers discarded;
 *   a Map Run's child fails the Distributed Map Run fails (States.ExceedToleratedFailureThreshold) and aborts its
 *                          running children (sfn.ts): their Lambdas run on, answers discarded;
 *   StartExecution         refused with ExecutionLimitExceeded (HTTP 400, the account's open executions at their
 *                          quota: API_StartExecution.html's errors; not retried by the sweeper's step, the next sweep
 *                          re-queues), delivered twice (the SDK's retry after a lost answer), AWS's rule for a name taken: the
 *                          same name and input while open is the same execution, else ExecutionAlreadyExists; its
 *                          500 is named InternalFailure, as Step Functions names it;
 *   the daily trigger      delivered twice in half the schedules (EventBridge Scheduler is at-least-once), of those a
 *                          quarter three times and a quarter late (after the first execution closed, or hours late,
 *                          on the same run's input); each StartExecution it sends may be throttled or answered
 *                          500/503 (applied or not), and Scheduler retries it on its RetryPolicy, a new execution each.
 * A request already sent may land any time later (a paused call), so the world never ends an invocation at its
 * function's own timeout, but for the function timed out above: that would only remove schedules.
 * The world's first draws stay on the schedule's stream, in their order; each added since (a fault's form, the
 * trigger's deliveries and start errors) is drawn from a stream of its own (AWS_STREAM), so no earlier draw moved.
 *
 * After the schedule: each item recorded once, tokens only rise on every fence, no write below the fence, no act
 * past the holder's stop time, epochs never repeat, no claim while another holder's lease runs, a DONE run has every
 * chunk recorded done (and what the job's own `whole` says), the job's own checks, and liveness (the run the trigger
 * started is DONE, and every execution of the job closed, within livenessBoundMs once the faults stopped).
 * Liveness covers every run started, raised or not: a run whose executions all ended before its raise is
 * stranded (the trigger was delivered once, the sweeper sees only raised rows).
 *
 * The file reads top to bottom: settings, the job, the synthesized definitions, setup, actors, checks; world.ts runs it.
 */
import '../quiet-lambda';
import { App, type CfnElement, Duration, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import type { CfnSchedule } from 'aws-cdk-lib/aws-scheduler';
import type { CfnStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import type { SFNClient } from '@aws-sdk/client-sfn';
import { awsClients, type Clients } from '../../core/aws/clients';
import { VirtualClock } from '../../core/clock';
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import { jobKeys } from '../../core/job-keys';
import { pollMsOf } from '../../core/lease';
import { MemoryJobStore } from '../job-store';
import { MemoryLockStore } from '../lock-store';
import { MemoryManifestStore } from '../manifest-store';
import { plainTables, type PlainTables } from '../tables';
import type { JobStore } from '../../core/store/jobs';
import type { LockStore, WriteOutcome } from '../../core/store/lock';
import type { ManifestStore } from '../../core/store/manifest';
import { chunkHandlerOn, type RuntimeChunkContext } from '../../lambda/chunk-handler';
import { Env } from '../../lambda/env';
import { makeHandlers } from '../../lambda/index';
import { createRuntime, type Runtime } from '../../lambda/runtime';
import { FencedJob } from '../../constructs/fenced-job';
import { START_UP_MS } from '../../constructs/renewal-gap';
import { resolveJoin } from '../../local/workflow';
import { prng } from '../../core/prng';
import { through } from '../process';
import { interpreter, maxDelayMs, StateError, tasksOf, type MachineDef, type Retrier, type StateDef } from './sfn';
import { type Broken, plainStores } from '../broken';
import { Actor, type FaultPlan, named, type Placed, PlacedCounts, Scheduler } from '../scheduler';
import { CallLog, FenceHistory, HOLDER_ACTS, LockHistory, rateErrorCovered, twoHoldersChecks } from '../history';
import { type Accepted, doneChecks, holderChecks, recordingBatches } from '../checks';
import type { Check, World, WorldState } from '../world';

type Json = Record<string, unknown>;

/** The world's settings: the trigger's and the AWS faults' pace (the job's shape is the WorkflowJob's). */
const FLOW_SETTINGS = {
  /** The duplicate delivery of the daily trigger, when there is one, comes within this long after the first. */
  duplicateWithinMs: 30_000,
  /** A duplicate delivery steered into the run: within `withinMs` after one of the lease's first `upTo` renewals. */
  againAfterRenewal: { upTo: 5, withinMs: 500 },
  /** Each schedule's sparse index lags its table by up to a seeded share of this. */
  maxIndexLagMs: 3_000,
  /**
   * The scheduler's faults at store calls; a pause long enough passes a task's TimeoutSeconds. An answer up to 10 s
   * late: longer than the margin (2 s), so a stop time counted from the answer overruns. Steering (docs/TESTING.md):
   * a pause weighs 8 at the fenced write, a delay 8 at the lease's calls, a pause 4 at a claim (one that outlasts
   * Claim's TimeoutSeconds lands after the retried run's release: a claim that follows a release, as
   * epoch-deleted needs), an invocation's first claim or renewal (its answer starts the invocation's stop time) is
   * faulted at 6 times the chance, the fenced write at twice.
   */
  faults: {
    chance: 0.08,
    budget: 4,
    maxPauseMs: 240_000,
    lateMs: 10_000,
    windowMs: 120_000,
    // Exaggerated (an NTP step is rarely seconds, a drift rarely 1%) so a run of a minute meets them: each invocation's wall
    // clock, which the handlers only write (renewed_at, claimed_since) and never time anything by.
    wall: { maxStepMs: 15_000, maxRateError: 0.5 },
    // The SDK resends a request whose answer it lost: any write can land twice, and the code sees the second answer
    // (a conditional write's own first landing makes its resend fail its condition; an S3 conditional PUT's, 412).
    twice: ['claim', 'renew', 'release', 'raiseJob', 'raiseFence', 'recordBatch', 'markChunkDone', 'complete', 'requeue', 'create', 'putIfMatch'],
    // Each invocation's monotonic clock runs fast or slow by up to half of what the margin covers.
    monoRate: rateErrorCovered(LEASE_DEFAULTS) / 2,
    emphasis: [
      { methods: ['recordBatch'], kind: 'pause', weight: 8 },
      { methods: ['claim', 'renew'], kind: 'late', weight: 8 },
      { methods: ['claim'], kind: 'pause', weight: 4 },
    ],
    chanceAt: [
      { methods: ['claim', 'renew'], share: 6, first: true },
      { methods: ['recordBatch'], share: 2 },
    ],
  },
  /** Faults at a Lambda invocation (throttled, timed out, no answer), within the same window. */
  invokeFaults: { chance: 0.08, budget: 2 },
  /**
   * The trigger's StartExecution answered with an error (throttled, or a 500/503 applied or not): its chance at each,
   * at most `budget` a schedule (fewer than Scheduler's retries: no start goes to the dead-letter queue).
   */
  startErrors: { chance: 0.05, budget: 2 },
  /** A late delivery of the trigger comes up to this long after the first execution closed ... */
  lateAfterEndMs: 60_000,
  /** ... or hours late: 1 to 20 h after the first delivery, within the run's date (it started at 01:30). */
  lateHoursMs: { from: 3_600_000, to: 72_000_000 },
  /**
   * The share of schedules whose job runs every chunk at once (chunkConcurrency = chunks), drawn on the AWS stream:
   * a failed chunk then fails the Map while the others' Lambdas run on. (It found the Map's Catch releasing the lease
   * under them: 4 of 1,000 such schedules had two holders at once, before the workflow left the lease to lapse.)
   */
  allAtOnceShare: 0.25,
  /**
   * The share of schedules whose job runs its chunks as a Distributed Map (distributedMapAboveChunks = 0, with
   * distributedLease), drawn from the same draw as allAtOnceShare (its top end): a child execution per chunk, a Map
   * Run that fails when one fails and aborts the others, and a Map Run's start-up and wind-down of up to 5 s each.
   */
  distributedShare: 0.25,
  /** Scheduler's retry of a failed start: after 1 s up to this many ms (doubling each retry), within the event's age. */
  startRetryMs: 60_000,
} as const;

/**
 * What a process crash, an invoke throttled, answered 500 or timed out, a sandbox that died, a function past its own
 * timeout, and a task timeout fail the task with.
 */
/** The faults at store calls a job's schedules take unless the job gives its own. */
export const WORKFLOW_FAULTS: FaultPlan = FLOW_SETTINGS.faults;

const CRASHED = 'Runtime.ExitError';
const INVOKE_THROTTLED = 'Lambda.TooManyRequestsException';
const INVOKE_SERVICE_ERROR = 'Lambda.ServiceException';
/**
 * Lambda's 500s as Step Functions names them (bp-lambda-serviceexception.html: "ServiceException, AWSLambdaException,
 * or SdkClientException"): the service-error kinds, each the handler not run or run on beside the Retry's next attempt.
 */
const SERVICE_ERRORS = {
  'service-error': INVOKE_SERVICE_ERROR,
  'aws-lambda-exception': 'Lambda.AWSLambdaException',
  'sdk-client-exception': 'Lambda.SdkClientException',
} as const;
type ServiceErrorKind = keyof typeof SERVICE_ERRORS;
const isServiceError = (kind: string | undefined): kind is ServiceErrorKind => kind !== undefined && kind in SERVICE_ERRORS;
const INVOKE_TIMED_OUT = 'Lambda.ClientExecutionTimeoutException';
const SANDBOX_DIED = 'Lambda.Unknown';
const FUNCTION_TIMED_OUT = 'Sandbox.Timedout';
const TASK_TIMED_OUT = 'States.Timeout';

const DATE = '2026-09-28';
const SCHEDULED_TIME = `${DATE}T01:30:00Z`;
const ITEMS = 'items';
const TABLES = { locks: 'locks', jobs: 'jobs' } as const;
const BUCKET = 'manifests';
const JOB_ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:job';
/** The index lag's stream and the clocks' rates' stream: seeds far from the schedules' own seeds. */
const LAG_STREAM = 0x5eed_0000;
const RATE_STREAM = 0x5eed_1000;
/** The AWS faults' stream (the trigger's deliveries and start errors, the split of an invocation's fault): far from both. */
const AWS_STREAM = 0x7a11_0000;

/**
 * The job a workflow world runs: the FencedJob's shape (the world builds the construct with it, so it runs the
 * definitions FencedJob synthesizes for that shape) and, for each schedule, the work of its chunk function.
 */
export interface WorkflowJob<R extends JobRun = JobRun> extends JobShape {
  /** One schedule's run of the job, made as the schedule is set up. */
  readonly run: (schedule: JobSchedule) => R;
  /** The job's own checks, after the world's safety checks (a schedule's run is its state's `run`). */
  readonly checks?: readonly Check<WorkflowState<R>>[];
}

/** A job's shape: what FencedJob is built with, and how long its work takes. */
interface JobShape {
  /** FencedJob's `chunks`. */
  readonly chunks: number;
  /** The lease of the job built with an inline Map. */
  readonly lease: LeaseConfig;
  /**
   * The lease of the job built with a Distributed Map: the construct requires lease − margin to cover a Map Run's
   * start-up too (renewal-gap.ts: 11 s).
   */
  readonly distributedLease: LeaseConfig;
  /** The chunk function's own timeout, in seconds (its task's is 30 s more: the construct's rule). */
  readonly chunkTimeoutS: number;
  /** The chunk function's own environment variables; FencedJob sets its own beside them. */
  readonly environment: Readonly<Record<string, string>>;
  /** The longest one chunk's work takes on its invocation's clock: the liveness bound counts it. */
  readonly chunkWorkMs: number;
  /** The faults at store calls, in place of the world's own plan. */
  readonly faults?: FaultPlan;
}

/** What a job's run is given of its schedule. */
interface JobSchedule {
  readonly seed: number;
  readonly scheduler: Scheduler;
  readonly clock: VirtualClock;
  /** The table the world's stores keep the job's items in. */
  readonly items: string;
  /** The job store every actor's view ends in. */
  readonly jobs: WorkflowStores['jobs'];
  /** Plain reads and writes of the tables the job store holds, where the stores have them. */
  readonly tables: PlainTables | undefined;
}

/** One schedule's run of a job: its chunk function's work, and what it checks beyond the world's own checks. */
export interface JobRun {
  /** The work on one chunk, run by the chunk function's invocation `invocation` (its clock; its calls are its steps). */
  work(context: RuntimeChunkContext, invocation: Actor): Promise<object>;
  /** The job store the invocations see, around the schedule's: a watch of what they send. @defaultValue the store */
  readonly jobs?: (store: JobStore) => JobStore;
  /** What a DONE run holds beyond each chunk recorded done (the world's check "a DONE run is whole"). */
  readonly whole?: () => Promise<readonly string[]>;
}

/**
 * One schedule's variant of the world: the stores as its actors see them (`plainStores`: as they are) and the
 * definitions as it runs them. The repository breaks a rule on purpose through it, to prove a check catches it.
 */
export interface WorkflowVariant {
  readonly broken: Broken;
  /** The job's definition as this schedule runs it. @defaultValue as synthesized */
  readonly machine?: (job: MachineDef) => MachineDef;
  /** Wait states pass on at once. @defaultValue false */
  readonly skipWaits?: boolean;
}

/** How a world is built: its job, and the variants it takes by name (`variants` lists them; `variant` makes one). */
export interface WorkflowOptions<R extends JobRun = JobRun> {
  readonly job: WorkflowJob<R>;
  readonly variants?: readonly string[];
  readonly variant?: (name: string, stores: { readonly locks: LockStore; readonly jobs: JobStore }) => WorkflowVariant;
}

// ---------------------------------------------------------------------------------------------------------------
// The synthesized definitions, once per process and job shape.

/** What the world runs, read from the synthesized FencedJob. */
interface Flow {
  readonly job: MachineDef;
  /** The job's machine with chunkConcurrency = chunks: every chunk at once. */
  readonly jobAllAtOnce: MachineDef;
  /** The job's machine with distributedMapAboveChunks = 0: its chunks a Distributed Map, a child execution each. */
  readonly jobDistributed: MachineDef;
  /** The distributed job's handlers' environments (its lease is distributedLease). */
  readonly distributedEnvironmentOf: Readonly<Record<string, Record<string, string>>>;
  readonly sweeper: MachineDef;
  /** A task's Resource (the function's placeholder ARN) → the handler it runs ('chunk' for the job's own). */
  readonly handlerOf: Readonly<Record<string, string>>;
  /** Each handler's environment, as its function is deployed, the stores' references made local names. */
  readonly environmentOf: Readonly<Record<string, Record<string, string>>>;
  /** The sweeper's schedule's period. */
  readonly sweepPeriodMs: number;
  /** Each handler's function timeout, in ms (Lambda kills the process then: Sandbox.Timedout). */
  readonly timeoutMsOf: Readonly<Record<string, number>>;
  /** The daily schedule's RetryPolicy: how often, and for how long, Scheduler retries a start that failed. */
  readonly triggerRetry: { readonly attempts: number; readonly maxAgeMs: number };
}

const cached = new Map<string, Flow>();

/** The FencedJob's state machines and functions for a job's shape, synthesized once per process (bundling skipped: only the template is read). */
function flow(s: JobShape): Flow {
  const shape = JSON.stringify([s.chunks, s.lease, s.distributedLease, s.chunkTimeoutS, s.environment]);
  const known = cached.get(shape);
  if (known) return known;
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const fencedJob = (stack: Stack, chunkConcurrency: number, distributed?: { readonly lease: LeaseConfig }) => {
    const lease = distributed?.lease ?? s.lease;
    const chunk = new lambda.Function(stack, 'Chunk', {
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async () => ({});'),
      timeout: Duration.seconds(s.chunkTimeoutS),
      environment: { ...s.environment },
    });
    const job = new FencedJob(stack, 'Job', {
      name: 'explore',
      chunkFunction: chunk,
      chunks: s.chunks,
      chunkConcurrency,
      leaseDuration: Duration.millis(lease.leaseMs),
      renewInterval: Duration.millis(lease.renewMs),
      margin: Duration.millis(lease.marginMs),
      claimBudget: lease.claimBudget,
      chunkWritesManifest: true, // the world explores the runs with a manifest (the raise creates it, the complete marks it)
      // The world's runs happen inside the default sweep window, where the sweeper runs every minute: the same period.
      sweeperScheduleExpression: 'rate(1 minute)',
      ...(distributed ? { distributedMapAboveChunks: 0 } : {}),
    });
    return { chunk, job };
  };
  const stack = new Stack(app, 'Explore');
  const { chunk, job } = fencedJob(stack, 1);
  // The same job with every chunk at once (a Map whose failed iteration stops the others), in an app of its own.
  const allAtOnceStack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Explore');
  const allAtOnce = fencedJob(allAtOnceStack, s.chunks).job;
  // The same job with its chunks as a Distributed Map (a child execution per chunk), as a run of many chunks is built.
  const distributedStack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Explore');
  const distributed = fencedJob(distributedStack, s.chunks, { lease: s.distributedLease });
  const idOf = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as CfnElement);
  const definition = (machine: { node: { defaultChild?: unknown } }, within: Stack = stack) =>
    JSON.parse(resolveJoin(within.resolve((machine.node.defaultChild as CfnStateMachine).definitionString))) as MachineDef;
  const functionsOf = (j: FencedJob, c: lambda.Function): Record<string, { node: { defaultChild?: unknown } }> => ({
    ...j.workflow.functions,
    'sweep-sight': j.sweeper.functions.sight,
    'sweep-verify': j.sweeper.functions.verify,
    chunk: c,
  });
  const functions = functionsOf(job, chunk);
  const handlerOf: Record<string, string> = {};
  const environmentOf: Record<string, Record<string, string>> = {};
  const timeoutMsOf: Record<string, number> = {};
  // The references a function's environment holds, as this world names them.
  const local: Record<string, string> = {
    [Env.lockTable]: TABLES.locks,
    [Env.jobTable]: TABLES.jobs,
    [Env.bucket]: BUCKET,
    [Env.jobStateMachineArn]: JOB_ARN,
  };
  const environmentIn = (within: Stack, fn: { node: { defaultChild?: unknown } }) => {
    const env = (within.resolve((fn.node.defaultChild as CfnFunction).environment) as { variables?: Json } | undefined)?.variables ?? {};
    // The chunk function here is a plain lambda.Function: FencedJob set the job's environment on it.
    return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, typeof v === 'string' ? v : local[k]]));
  };
  for (const [name, fn] of Object.entries(functions)) {
    handlerOf[resolveJoin({ 'Fn::GetAtt': [idOf(fn), 'Arn'] })] = name; // the ARN the resolved definition names it by
    environmentOf[name] = environmentIn(stack, fn);
    timeoutMsOf[name] = Number(stack.resolve((fn.node.defaultChild as CfnFunction).timeout) ?? 3) * 1000; // Lambda's default: 3 s
  }
  const distributedEnvironmentOf = Object.fromEntries(
    Object.entries(functionsOf(distributed.job, distributed.chunk)).map(([name, fn]) => [name, environmentIn(distributedStack, fn)]),
  );
  const target = stack.resolve((job.schedule.schedule.node.defaultChild as CfnSchedule).target) as {
    retryPolicy?: { maximumRetryAttempts?: number; maximumEventAgeInSeconds?: number };
  };
  const rate = String(stack.resolve((job.sweeperSchedule.schedule.node.defaultChild as CfnSchedule).scheduleExpression));
  const jobAllAtOnce = definition(allAtOnce.stateMachine, allAtOnceStack);
  const jobDistributed = definition(distributed.job.stateMachine, distributedStack);
  for (const [which, machine] of [
    ['all-at-once', jobAllAtOnce],
    ['distributed', jobDistributed],
  ] as const)
    for (const t of tasksOf(machine))
      if (!handlerOf[String(t.Resource)]) throw new Error(`the ${which} job's task invokes no function of the stack: ${String(t.Resource)}`);
  const made: Flow = {
    job: definition(job.stateMachine),
    jobAllAtOnce,
    jobDistributed,
    distributedEnvironmentOf,
    sweeper: definition(job.sweeper.stateMachine),
    handlerOf,
    environmentOf,
    sweepPeriodMs: rateMs(rate),
    timeoutMsOf,
    // Scheduler's defaults when the schedule sets none: 185 retries within 24 h (API_RetryPolicy.html).
    triggerRetry: {
      attempts: target.retryPolicy?.maximumRetryAttempts ?? 185,
      maxAgeMs: (target.retryPolicy?.maximumEventAgeInSeconds ?? 86_400) * 1000,
    },
  };
  cached.set(shape, made);
  return made;
}

/** `rate(1 minute)` → 60000. */
function rateMs(expression: string): number {
  const m = /^rate\((\d+) (second|minute|hour|day)s?\)$/.exec(expression);
  if (!m) throw new Error(`the sweeper's schedule is not a rate expression: ${expression}`);
  return Number(m[1]) * { second: 1_000, minute: 60_000, hour: 3_600_000, day: 86_400_000 }[m[2] as 'second'];
}

/**
 * The longest wait a task's Retry can schedule: its largest backoff, IntervalSeconds × BackoffRate^(MaxAttempts − 1)
 * up to MaxDelaySeconds, at full length. Once the faults stopped, a task waits out at most one backoff already scheduled: its next attempt
 * meets no fault (a stop time that passed in a pause is renewed afresh by the retried RaiseFence).
 */
function retryWaitMs(machine: MachineDef): number {
  const longest = (r: Retrier) =>
    (r.MaxAttempts ?? 3) > 0 ? Math.min((r.IntervalSeconds ?? 1) * 1000 * (r.BackoffRate ?? 2) ** ((r.MaxAttempts ?? 3) - 1), maxDelayMs(r)) : 0;
  return Math.max(0, ...tasksOf(machine).flatMap((t) => (t.Retry ?? []).map(longest)));
}

/**
 * How long after the last fault's effect ended the started run must be DONE and every execution of the job closed.
 * From the definitions, the lease and the sweeper's period, along the longest path, the one through the sweeper (a
 * run not yet raised when the faults stop has an execution that retried its way on, and needs at most a retry, a
 * lease of watching a holder that stopped, and the run):
 *   - a retry still waiting when the faults stop, the job's longest backoff or the sweeper's;
 *   - the holder's last renewal runs a lease;
 *   - a sweep to sight the row unchanged: the next sweep starts within a period, and one more if its first sighting
 *     came before that last renewal; each waits the lease (rounded up to whole seconds, its Wait state) to verify;
 *   - the re-queued run waits a full lease on the dead holder's rvn, each poll rounded up to a whole second (Observe's
 *     Wait), then does the run: every chunk's work (and a Distributed Map Run's start-up and wind-down);
 *   - the index's lag (the row reaches the sparse index up to one lag late).
 */
function livenessBoundMs(f: Flow, job: MachineDef, spec: JobShape, lease: LeaseConfig, mapRunMs: number, faults: FaultPlan): number {
  const retries = Math.max(retryWaitMs(job), retryWaitMs(f.sweeper));
  const leaseWaitMs = Math.ceil(lease.leaseMs / 1000) * 1000;
  const pollMs = Math.max(1, Math.ceil(pollMsOf(lease) / 1000)) * 1000;
  // A Distributed Map Run's start-up and wind-down lengthen the re-queued run.
  const nightMs = spec.chunks * spec.chunkWorkMs + 2 * mapRunMs;
  const bound =
    retries + lease.leaseMs + 2 * (f.sweepPeriodMs + leaseWaitMs) + retries + lease.leaseMs + pollMs + nightMs + FLOW_SETTINGS.maxIndexLagMs;
  // An invocation times its work on its own clock: one running slow stretches it by up to 1 / (1 - monoRate).
  return bound / (1 - (faults.monoRate ?? 0));
}

// ---------------------------------------------------------------------------------------------------------------
// Setup: one schedule's state.

interface Execution {
  readonly name: string;
  readonly input: string;
  status: 'RUNNING' | 'SUCCEEDED' | 'FAILED';
  end?: string;
}

/** A fault at one invocation (the header lists them). */
type InvokeKind = 'throttled' | ServiceErrorKind | 'timed-out' | 'sandbox-timedout' | 'no-answer' | 'unknown';

/**
 * One invocation's fault. `afterStep`: for `timed-out`, the store call after which the Invoke call times out (default
 * 1); for `sandbox-timedout`, the call that hangs (default 1); for `unknown`, the call right after which the sandbox
 * dies (0: before the handler ran; past its last call: as it returned; default 1). `ran`: a service error (`service-error`, `aws-lambda-exception`, `sdk-client-exception`) whose
 * handler runs on (default false). `applied`: a `sandbox-timedout` whose hung call landed (default true).
 */
interface InvokePlan {
  readonly kind: InvokeKind;
  readonly afterStep?: number;
  readonly ran?: boolean;
  readonly applied?: boolean;
}

/** The trigger's StartExecution answered with an error: throttled (not applied), or a 500/503 applied or not. */
interface StartError {
  readonly kind: 'throttled' | 'server-error';
  /** A server error's start took effect before the error. @default false */
  readonly applied?: boolean;
  /** @default 500 */
  readonly status?: 500 | 503;
}

/** A delivery of the trigger after the first: at a time, a time after the first execution closed, or after a renewal. */
type Delivery = { readonly atMs: number } | { readonly afterEndMs: number } | { readonly renewal: number; readonly afterRenewalMs: number };

/**
 * Faults placed by a test (scheduler.ts `Placed`), and this world's own: the trigger's second delivery at `againAtMs`
 * and further ones (`again`; absent: none), faults at an invocation (the nth attempt of a state in an execution),
 * StartExecution delivered twice (the nth send by a matching actor), and errors answering the trigger's nth
 * StartExecution (of every delivery's, retries included, 1 = the first).
 */
export interface WorkflowPlaced extends Placed {
  readonly againAtMs?: number;
  readonly again?: readonly Delivery[];
  readonly invoke?: readonly ({ readonly execution: string; readonly state: string; readonly nth?: number } & InvokePlan)[];
  readonly startTwice?: readonly { readonly actor: string | RegExp; readonly nth?: number }[];
  /** StartExecution refused with ExecutionLimitExceeded (the nth send by a matching actor). */
  readonly startLimited?: readonly { readonly actor: string | RegExp; readonly nth?: number }[];
  readonly startErrors?: readonly ({ readonly nth?: number } & StartError)[];
  /** The job runs every chunk at once (chunkConcurrency = chunks). @default false */
  readonly allAtOnce?: boolean;
  /** The job runs its chunks as a Distributed Map, every chunk at once (a child execution each). @default false */
  readonly distributed?: boolean;
  /** A broken definition, for a test to show what a Retry rule is for: this error name taken out of every job Retry. */
  readonly unretried?: string;
}

/** A fault of this world's own (the scheduler's are at store calls); `at`: when its effect ends. */
interface InvokeFault {
  readonly kind: string;
  readonly point: string;
  at: number;
}

/** One schedule of the workflow world: its clock, streams, scheduler, stores and machines, and what the actors record for the checks. */
export interface WorkflowState<R extends JobRun = JobRun> extends WorldState {
  readonly f: Flow;
  /** The job's shape. */
  readonly spec: JobShape;
  /** This schedule's run of the job: its chunk work, and what its checks read. */
  readonly run: R;
  /** The faults at store calls. */
  readonly faults: FaultPlan;
  /** livenessBoundMs of the definitions. */
  readonly bound: number;
  /** The lease the job is built with (the distributed job's is longer: distributedLease). */
  readonly lease: LeaseConfig;
  /** Each handler's environment, as the job this schedule runs deploys it. */
  readonly environmentOf: Readonly<Record<string, Record<string, string>>>;
  /** A Distributed Map Run's start-up and wind-down, each up to this long; 0 for an inline Map. */
  readonly mapRunMs: number;
  /** Draws each invocation's monotonic rate error as it starts. */
  readonly rates: () => number;
  readonly random: () => number;
  /** The AWS faults' own stream (AWS_STREAM). */
  readonly aws: () => number;
  readonly clock: VirtualClock;
  /** How each running invocation's task is answered when its process crashes, set as each starts. */
  readonly invocations: Map<Actor, (error: string) => void>;
  readonly indexLagMs: number;
  readonly jobs: WorkflowStores['jobs'];
  readonly manifests: ManifestStore;
  /** The table the run's items are written to. */
  readonly items: string;
  readonly keys: ReturnType<typeof jobKeys>;
  readonly jobId: string;
  readonly broken: Broken;
  /** The definitions as this schedule runs them (the no-task-timeout mutation strips the job's TimeoutSeconds). */
  readonly machines: { readonly job: MachineDef; readonly sweeper: MachineDef };
  readonly skipWaits: boolean;
  readonly accepted: Accepted[];
  readonly seenRequests: Set<string>;
  /** Each invocation's store calls as it sent them, and when their answers came (history.ts). */
  readonly calls: CallLog;
  /** Every lock write the lock store applied (history.ts). */
  readonly lockWrites: LockHistory;
  /** Every fence raised and batch accepted that the job store applied (history.ts). */
  readonly fenceWrites: FenceHistory;
  readonly invokeFaults: InvokeFault[];
  /** The trigger's StartExecution errors (their own budget), each effect lasting until Scheduler's retry. */
  readonly startFaults: InvokeFault[];
  readonly executions: Map<string, Execution>;
  /** Invocations whose handler has not returned: a zombie's write in flight still lands before the schedule ends. */
  readonly running: Set<Actor>;
  /** When the job row's complete took effect (the row is the authority). */
  doneAt: number | undefined;
  raised: boolean;
  /** Every delivery of the daily trigger has come. */
  triggered: boolean;
  /** The virtual time a schedule may run to: past the last delivery of the trigger (set as the actors start). */
  horizonMs: number;
  readonly placed: WorkflowPlaced | undefined;
}

/**
 * The stores one schedule runs on: the in-memory ones (the sparse index's lag drawn, a page of one row, so every query
 * runs its pagination path), or lib/core/aws's on DynamoDB Local (dynamo.ts), the same schedules over every shipped
 * condition expression.
 */
export interface WorkflowStores {
  readonly locks: LockStore;
  /** The job table's store, and every item a table holds (the checks count the run's items). */
  readonly jobs: JobStore & { dump(table: string): readonly unknown[] | Promise<readonly unknown[]> };
  readonly manifests: ManifestStore;
  /** The table the run's items are written to. */
  readonly items: string;
  /** How far the sparse index lags its table at most (0: DynamoDB Local's, read at once). */
  readonly indexLagMs: number;
  /** Plain reads and writes of the tables the job store holds (the memory stores'). */
  readonly tables?: PlainTables;
}

/** Builds one schedule's stores on its clock, given the sparse index's lag drawn for it (a memory store's only). */
export type WorkflowStoresOf = (clock: VirtualClock, lag: { readonly indexLagMs: number; readonly random: () => number }) => WorkflowStores;

/**
 * The in-memory stores of one schedule.
 * @param keys - each of the job's own tables' partition key attribute, for a plain put (`pk` for a table not named)
 */
export const memoryWorkflowStores =
  (keys?: Readonly<Record<string, string>>): WorkflowStoresOf =>
  (clock, lag) => {
    const jobs = new MemoryJobStore({ clock, jobs: TABLES.jobs, indexLagMs: lag.indexLagMs, random: lag.random, pageSize: 1 });
    return {
      locks: new MemoryLockStore({ clock }),
      jobs,
      manifests: new MemoryManifestStore(),
      items: ITEMS,
      indexLagMs: lag.indexLagMs,
      tables: plainTables(jobs, keys),
    };
  };

function setup<R extends JobRun>(
  storesOf: WorkflowStoresOf,
  options: WorkflowOptions<R>,
  seed: number,
  mutation: string | undefined,
  placed?: WorkflowPlaced,
): WorkflowState<R> {
  const variants = options.variants ?? [];
  if (mutation !== undefined && !variants.includes(mutation))
    throw new Error(`unknown mutation ${mutation}: ${variants.length > 0 ? `one of ${variants.join(', ')}` : 'this world takes none'}`);
  const spec = options.job;
  const f = flow(spec);
  const s = FLOW_SETTINGS;
  const faults = spec.faults ?? s.faults;
  const random = prng(seed);
  const clock = new VirtualClock();
  const invocations = new Map<Actor, (error: string) => void>();
  const aws = prng(seed + AWS_STREAM);
  const scheduler = new Scheduler(
    clock,
    random,
    faults,
    (actor) => {
      // A process that dies mid-invocation: Lambda answers the task with the runtime's exit, or, a quarter of the
      // time (drawn: placed crashes are all exits), with the sandbox's death (Lambda.Unknown).
      invocations.get(actor)?.(!placed && aws() < 0.25 ? SANDBOX_DIED : CRASHED);
      return undefined;
    },
    undefined,
    placed,
  );
  const lagRandom = prng(seed + LAG_STREAM);
  const indexLagMs = Math.floor(lagRandom() * s.maxIndexLagMs);
  const rates = prng(seed + RATE_STREAM);
  const stores = storesOf(clock, { indexLagMs, random: lagRandom });
  const fenceWrites = new FenceHistory(clock);
  const jobs = fenceWrites.observe(stores.jobs);
  const lockWrites = new LockHistory(clock);
  const locks = lockWrites.observe(stores.locks);
  const keys = jobKeys('explore');
  // One draw picks the job: every chunk at once (its bottom share), a Distributed Map (its top share), or one at a time.
  const pick = placed ? (placed.allAtOnce ? 0 : placed.distributed ? 1 : 0.5) : aws();
  const distributed = pick >= 1 - s.distributedShare;
  const chosen = pick < s.allAtOnceShare ? f.jobAllAtOnce : distributed ? f.jobDistributed : f.job;
  const lease = distributed ? spec.distributedLease : spec.lease;
  const mapRunMs = distributed ? START_UP_MS.mapRun : 0;
  const jobMachine = placed?.unretried ? unretried(chosen, placed.unretried) : chosen;
  const variant: WorkflowVariant =
    mutation !== undefined && options.variant ? options.variant(mutation, { locks, jobs }) : { broken: plainStores({ locks, jobs }) };
  const bound = livenessBoundMs(f, chosen, spec, lease, mapRunMs, faults);
  return {
    f,
    spec,
    run: spec.run({ seed, scheduler, clock, items: stores.items, jobs, tables: stores.tables }),
    faults,
    bound,
    lease,
    environmentOf: distributed ? f.distributedEnvironmentOf : f.environmentOf,
    mapRunMs,
    random,
    rates,
    aws,
    clock,
    scheduler,
    invocations,
    indexLagMs: stores.indexLagMs,
    jobs,
    manifests: stores.manifests,
    items: stores.items,
    keys,
    jobId: keys.job(DATE),
    broken: variant.broken,
    machines: { job: variant.machine?.(jobMachine) ?? jobMachine, sweeper: f.sweeper },
    skipWaits: variant.skipWaits ?? false,
    violations: [],
    accepted: [],
    seenRequests: new Set(),
    calls: new CallLog(clock),
    lockWrites,
    fenceWrites,
    invokeFaults: [],
    startFaults: [],
    executions: new Map(),
    running: new Set(),
    doneAt: undefined,
    raised: false,
    triggered: false,
    horizonMs: faults.windowMs + faults.maxPauseMs + bound,
    placed,
  };
}

/** When the last fault's effect ended: the scheduler's, or this world's own at an invocation. */
const faultsEndMs = (w: WorkflowState): number => Math.max(w.scheduler.faultsEndMs, ...[...w.invokeFaults, ...w.startFaults].map((x) => x.at));

// ---------------------------------------------------------------------------------------------------------------
// Actors: the daily trigger (once to three times, or late), the sweeper's schedule, and every task's invocation.

function actors(w: WorkflowState): void {
  const s = FLOW_SETTINGS;
  const { f, clock, scheduler, random, aws, jobs, broken, violations, invokeFaults, startFaults, executions, running } = w;

  // Placed faults count their matching attempts and sends (the nth lands), as the scheduler's do.
  const placedInvokes = new PlacedCounts(w.placed?.invoke ?? []);
  const placedStarts = new PlacedCounts(w.placed?.startTwice ?? []);
  const placedLimits = new PlacedCounts(w.placed?.startLimited ?? []);
  const placedStartErrors = new PlacedCounts(w.placed?.startErrors ?? []);
  const invokeFault = (exec: string, state: string): InvokePlan | undefined => {
    if (w.placed) return placedInvokes.due((f) => f.execution === exec && f.state === state);
    if (invokeFaults.length >= s.invokeFaults.budget || clock.monotonicMs() > w.faults.windowMs) return undefined;
    if (random() >= s.invokeFaults.chance) return undefined;
    const share = (['throttled', 'timed-out', 'no-answer'] as const)[Math.floor(random() * 3)];
    // Two shares split on the AWS stream, so no other kind's share moves: Lambda's error answers (throttled, or a 500
    // that may have run the handler), and a run that ends badly (the Invoke call times out, the function runs past
    // its own timeout, the sandbox dies: before the handler ran, after a call landed, or as it returned). The answers
    // that never come keep their share whole (no-task-timeout needs them).
    if (share === 'throttled') {
      const e = aws(); // throttled half the time, else one of Lambda's 500s: ServiceException, AWSLambdaException, SdkClientException
      if (e < 0.5) return { kind: 'throttled' };
      return { kind: e < 0.75 ? 'service-error' : e < 0.875 ? 'aws-lambda-exception' : 'sdk-client-exception', ran: aws() < 0.5 };
    }
    if (share === 'no-answer') return { kind: 'no-answer' };
    const u = aws();
    if (u < 1 / 3) return { kind: 'timed-out' };
    if (u < 2 / 3) return { kind: 'sandbox-timedout', applied: aws() < 0.5 };
    const v = aws(); // the call after which it dies is drawn as a timeout's is; a fifth die before, a fifth as it returns
    return { kind: 'unknown', afterStep: v < 0.2 ? 0 : v < 0.4 ? Infinity : undefined };
  };
  // The account's open executions at their quota: StartExecution refused (drawn on the AWS stream, a quarter of the chance).
  const startLimited = (actor: Actor): boolean => {
    if (w.placed) return placedLimits.due((f) => named(f.actor, actor.name)) !== undefined;
    return invokeFaults.length < s.invokeFaults.budget && clock.monotonicMs() <= w.faults.windowMs && aws() < s.invokeFaults.chance / 4;
  };
  const startTwice = (actor: Actor): boolean => {
    if (w.placed) return placedStarts.due((f) => named(f.actor, actor.name)) !== undefined;
    return invokeFaults.length < s.invokeFaults.budget && clock.monotonicMs() <= w.faults.windowMs && random() < s.invokeFaults.chance;
  };

  // The job store a holder's invocations see: the mutation's view (one per execution, as a holder's process
  // would keep it), every accepted batch recorded with the fence as it stood (checks.ts).
  const batchLog = { accepted: w.accepted, seenRequests: w.seenRequests, violations, log: (line: string) => scheduler.log(line), logRefused: true };
  const observed = (actor: Actor, inner: JobStore): JobStore => recordingBatches(actor.name, w.run.jobs?.(inner) ?? inner, jobs, batchLog);

  // Every claim that took effect, in the trace (the lock history keeps them for the checks); the renewals that took
  // effect counted, for a delivery that waits on one (below).
  let renewals = 0;
  const onRenewal: { readonly nth: number; readonly then: () => void }[] = [];
  const lockCall = (method: string, _args: unknown[], result: unknown): void => {
    const out = result as WriteOutcome;
    if (!out?.ok) return;
    if (method === 'renew') {
      renewals++;
      for (const due of onRenewal.filter((r) => r.nth === renewals)) due.then();
    }
    if (method === 'claim') scheduler.log(`${String(out.item.holder)} claimed epoch ${Number(out.item.epoch)}`);
  };

  // The run is DONE when the job row's complete takes effect (the row is the authority).
  const jobCall = (method: string, _args: unknown[], result: unknown): void => {
    if (method === 'complete' && (result as { ok: boolean }).ok) w.doneAt ??= clock.monotonicMs();
    if (method === 'raiseJob' && (result as { ok: boolean }).ok) w.raised = true;
  };

  /**
   * One invocation's runtime: a cold process on the schedule's stores, its calls its own step boundaries. Each call,
   * as it is applied, passes `gate` (counted from 1): held before it is sent, or its answer held after, for ever.
   */
  const runtimeOf = (actor: Actor, handler: string, view: JobStore, gate: StepGate | undefined): Runtime => {
    let steps = 0;
    const step = <T extends object>(inner: T, onCall?: (method: string, args: unknown[], result: unknown) => void): T =>
      gate === undefined
        ? scheduler.wrap(inner, actor, onCall) // no fault at its calls: one layer the fewer on every call
        : scheduler.wrap(
            through(inner, (method, args, apply) => {
              if (gate.holdBefore(steps + 1)) return (steps++, never);
              return Promise.resolve(apply()).then((result) => {
                onCall?.(method, args, result);
                return gate.holdAfter(++steps) ? never : result;
              });
            }),
            actor,
          );
    const sfn = step({
      // StartExecution, with AWS's rule for a name already taken; sometimes delivered twice (the SDK's retry).
      send: async (command: { input: { name?: string; input?: string } }) => {
        const { name = '', input = '' } = command.input;
        if (startLimited(actor)) {
          invokeFaults.push({ kind: 'start-limit-exceeded', point: `StartExecution@${actor.name}`, at: clock.monotonicMs() });
          scheduler.log(`${actor.name} StartExecution ${name} refused: ExecutionLimitExceeded`);
          throw Object.assign(new Error('Maximum number of running executions reached'), {
            name: 'ExecutionLimitExceeded',
            $metadata: { httpStatusCode: 400 },
          });
        }
        const out = startJob(name, input, actor);
        if (startTwice(actor)) {
          invokeFaults.push({ kind: 'start-twice', point: `StartExecution@${actor.name}`, at: clock.monotonicMs() });
          scheduler.log(`${actor.name} StartExecution ${name} delivered twice`);
          try {
            startJob(name, input, actor);
          } catch {
            // Logged by startJob: the SDK's retry sees the answer the first delivery already had.
          }
        }
        return out;
      },
    });
    return createRuntime({
      environment: { ...w.environmentOf[handler], [Env.worker]: actor.name },
      clients: dummyClients(),
      sfn: { send: (command: never) => sfn.send(command).catch((err: unknown) => sfnError(err, actor)) } as unknown as SFNClient,
      // Outermost, the observer: what the invocation's code sent, and when its answers came (history.ts).
      stores: {
        // The sweeper's functions see the lock store as the sweeper does; every other invocation as a holder does.
        locks: w.calls.observe(actor, step(handler.startsWith('sweep-') ? broken.locks : broken.locksFor(actor, w.lease), lockCall)),
        jobs: w.calls.observe(actor, step(observed(actor, view), jobCall)),
        manifests: step(w.manifests),
      },
      clock: actor,
      random,
    });
  };

  /** Step Functions' own name for a 500 (AWS's common errors: InternalFailure), where the scheduler says DynamoDB's. */
  const sfnError = (err: unknown, actor: Actor): never => {
    const e = err as Error;
    if (e?.name !== 'InternalServerError') throw err;
    scheduler.log(`${actor.name} StartExecution answered InternalFailure (500)`);
    throw Object.assign(e, { name: 'InternalFailure' });
  };

  /**
   * One attempt of a task: invoke the handler as a fresh actor and answer with whichever comes first: its result or
   * error, the process's crash, an invoke fault, or the task's TimeoutSeconds. The invocation runs on after a
   * timeout or an invoke timeout: nothing stops a Lambda because Step Functions stopped waiting. Only Lambda kills
   * one: a sandbox that died (Lambda.Unknown), a function past its own timeout (Sandbox.Timedout).
   */
  let invocationCount = 0;
  const attempt = (exec: Execution, state: string, st: StateDef, payload: unknown, view: JobStore): Promise<unknown> => {
    const handler = f.handlerOf[String(st.Resource)];
    if (!handler) throw new Error(`task ${state} invokes no function of the stack: ${String(st.Resource)}`);
    const actor = scheduler.actor(invocationName(exec.name, state, ++invocationCount), w.rates);
    const fault = invokeFault(exec.name, state);
    const kind = fault?.kind;
    const now = clock.monotonicMs();
    const functionMs = f.timeoutMsOf[handler] ?? Infinity;
    // An unanswered invocation's effect lasts until its task's TimeoutSeconds ends it, a hung one's until Lambda kills it.
    const effectEnds = kind === 'no-answer' ? now + (st.TimeoutSeconds ?? 0) * 1000 : kind === 'sandbox-timedout' ? now + functionMs : now;
    const recorded: InvokeFault | undefined = fault && { kind: `invoke-${kind}`, point: `${state}@${exec.name}`, at: effectEnds };
    if (recorded) invokeFaults.push(recorded);
    // Refused before the handler ran: nothing of it runs.
    const refused: [string, string, string] | undefined =
      kind === 'throttled'
        ? [INVOKE_THROTTLED, 'invoke THROTTLED', 'Rate exceeded']
        : isServiceError(kind) && !fault?.ran
          ? [SERVICE_ERRORS[kind], `invoke ${SERVICE_ERRORS[kind]} before the handler ran`, 'Lambda answered 500']
          : kind === 'unknown' && fault?.afterStep === 0
            ? [SANDBOX_DIED, 'SANDBOX DIED before the handler ran', 'the sandbox died']
            : undefined;
    if (refused) {
      scheduler.log(`${actor.name} ${refused[1]}`);
      return Promise.reject(new StateError(refused[0], refused[2]));
    }
    return new Promise((resolve, reject) => {
      let answered = false;
      const answer = (how: () => void) => {
        if (answered) return;
        answered = true;
        timer?.cancel();
        w.invocations.delete(actor);
        how();
      };
      const fail = (error: string, detail: string) => answer(() => reject(new StateError(error, detail)));
      const timer = st.TimeoutSeconds
        ? clock.after(st.TimeoutSeconds * 1000, () => {
            scheduler.log(`${actor.name} task TIMEOUT after ${st.TimeoutSeconds} s; its Lambda runs on`);
            fail(TASK_TIMED_OUT, `${state} ran past ${st.TimeoutSeconds} s`);
          })
        : undefined;
      // A process that exits answers the task with the exit, unless no answer reaches the task at all.
      w.invocations.set(actor, (error) => (kind === 'no-answer' ? undefined : fail(error, 'the process exited')));
      // Lambda kills the process where it stands: it never runs again (no call, no timer), and answers the task.
      const kill = (error: string, why: string) => {
        if (answered || actor.crashed) return;
        actor.crash();
        scheduler.log(`${actor.name} KILLED by Lambda (${why}): ${error}`);
        fail(error, why);
      };
      // The store call a timeout or a death comes after: placed, or drawn 1 to 3 (the schedule's stream, as before).
      const drawnStep =
        kind === 'timed-out' || kind === 'sandbox-timedout' || kind === 'unknown' ? (w.placed ? 1 : 1 + Math.floor(random() * 3)) : undefined;
      const stepAt = fault?.afterStep ?? drawnStep;
      const hungSent = fault?.applied ?? true;
      const gate: StepGate = {
        holdBefore: (nth) => {
          if (kind !== 'sandbox-timedout' || hungSent || nth !== stepAt) return false;
          scheduler.log(`${actor.name} HUNG at its call ${nth}, not sent`);
          return true;
        },
        holdAfter: (nth) => {
          if (nth !== stepAt) return false;
          if (kind === 'timed-out') {
            scheduler.log(`${actor.name} invoke TIMED OUT after step ${nth}; its Lambda runs on`);
            fail(INVOKE_TIMED_OUT, 'the Invoke call timed out');
            return false;
          }
          if (kind === 'unknown') {
            kill(SANDBOX_DIED, `the sandbox died after its call ${nth} landed`);
            return true;
          }
          if (kind === 'sandbox-timedout' && hungSent) {
            scheduler.log(`${actor.name} HUNG after its call ${nth} landed`);
            return true;
          }
          return false;
        },
      };
      // A function timed out: Lambda kills it at its own timeout, whatever it is doing then (it hung at its call above).
      if (kind === 'sandbox-timedout')
        clock.after(functionMs, () => kill(FUNCTION_TIMED_OUT, `it ran past its function's ${functionMs / 1000} s timeout`));
      const source = () => runtimeOf(actor, handler, view, stepAt === undefined ? undefined : gate);
      const run =
        handler === 'chunk'
          ? chunkHandlerOn(source, (c) => w.run.work(c, actor))
          : (makeHandlers(source)[handler as keyof ReturnType<typeof makeHandlers>] as (event: unknown) => Promise<unknown>);
      running.add(actor);
      const ran = run(payload as never);
      ran.finally(() => running.delete(actor)).catch(() => undefined);
      if (isServiceError(kind)) {
        // Lambda answered 500 while the handler it started runs on: the Retry's next attempt runs beside it.
        scheduler.log(`${actor.name} invoke ${SERVICE_ERRORS[kind]}; its Lambda runs on`);
        fail(SERVICE_ERRORS[kind], 'Lambda answered 500');
      }
      // The handler returned (or threw) before its fault fired: the sandbox dies as it answers, or no timeout came.
      const settled = (how: () => void, returned: boolean) => {
        if (kind === 'no-answer') {
          if (returned) scheduler.log(`${actor.name} answered; the answer is LOST`);
          return void w.invocations.delete(actor);
        }
        if (kind === 'unknown') return kill(SANDBOX_DIED, 'the sandbox died as the handler returned');
        if (kind === 'sandbox-timedout' && recorded) recorded.at = clock.monotonicMs(); // it never hung: no effect
        answer(how);
      };
      ran.then(
        (value) => settled(() => resolve(value), true),
        (err: Error) => settled(() => reject(new StateError(err.name, err.message)), false),
      );
    });
  };

  // The machines' states, on the world's clock and seed; each task attempt a fresh actor's invocation (attempt above).
  const stepFunctions = interpreter<JobStore>({
    attempt,
    sleep: (ms) => clock.sleep(ms),
    random,
    log: (line) => scheduler.log(line),
    skipWaits: w.skipWaits,
    // A Map Run's start-up and wind-down: up to START_UP_MS.mapRun each, drawn on the AWS stream.
    mapRunMs: () => Math.floor(aws() * w.mapRunMs),
  });

  /** Called as each execution of the job closes. */
  const closed: ((name: string) => void)[] = [];

  const startJob = (name: string, input: string, by?: Actor): 'started' | 'existing' => {
    const e = executions.get(name);
    if (e) {
      const same = e.input === input && e.status === 'RUNNING';
      scheduler.log(
        `${by?.name ?? 'the schedule'} StartExecution ${name}: ${same ? 'the same execution (open, same input)' : `ExecutionAlreadyExists (${e.status}${e.input === input ? '' : ', another input'})`}`,
      );
      if (same) return 'existing';
      throw Object.assign(new Error(`Execution Already Exists: '${name}'`), { name: 'ExecutionAlreadyExists', $metadata: { httpStatusCode: 400 } });
    }
    const exec: Execution = { name, input, status: 'RUNNING' };
    executions.set(name, exec);
    scheduler.log(`${by?.name ?? 'the schedule'} starts execution ${name}`);
    wakeSweeper();
    const view = broken.jobsFor(new Actor(name, clock), (inner) => inner);
    const parsed = JSON.parse(input) as Json;
    stepFunctions
      .run(exec, w.machines.job, parsed, { Execution: { Name: name, Input: parsed } }, view)
      .then(
        (out) => {
          exec.status = out.failed ? 'FAILED' : 'SUCCEEDED';
          exec.end = out.failed ?? out.end;
          scheduler.log(`${name} ends ${exec.status} at ${out.end}`);
        },
        (err: Error) => {
          exec.status = 'FAILED';
          exec.end = err instanceof StateError ? err.error : err.message;
          scheduler.log(`${name} ends FAILED: ${exec.end}`);
        },
      )
      .then(() => closed.forEach((c) => c(name)));
    return 'started';
  };

  /**
   * The sweeper's schedule: an execution of its machine every period. While the run is DONE and nothing of the job
   * runs, a sweep would find no claimed row: none is run until the next execution of the job starts (a late trigger),
   * so a schedule waiting hours for one does not run a sweep a minute.
   */
  let sweeps = 0;
  let sweeperIdle = false;
  const idle = () => w.doneAt !== undefined && [...executions.values()].every((e) => e.status !== 'RUNNING') && [...running].every((a) => a.crashed);
  const sweep = (): void => {
    if (idle()) {
      sweeperIdle = true;
      return;
    }
    const name = `sweep-${++sweeps}`;
    const exec: Execution = { name, input: '{}', status: 'RUNNING' };
    scheduler.log(`the sweeper's schedule starts ${name}`);
    stepFunctions.run(exec, w.machines.sweeper, {}, { Execution: { Name: name, Input: {} } }, jobs).then(
      (out) => scheduler.log(`${name} ends at ${out.end}`),
      (err: Error) => scheduler.log(`${name} ends FAILED: ${err instanceof StateError ? err.error : err.message}`),
    );
    clock.after(f.sweepPeriodMs, sweep);
  };
  /** The sweeper's schedule resumes on its own period's grid. */
  function wakeSweeper(): void {
    if (!sweeperIdle) return;
    sweeperIdle = false;
    clock.after(f.sweepPeriodMs - (clock.monotonicMs() % f.sweepPeriodMs), sweep);
  }

  // The daily trigger (EventBridge Scheduler): delivered at least once, each delivery a StartExecution of the job
  // with the run's input and no name (Step Functions names it: here exec-<delivery>, .<attempt> for a retry). A
  // StartExecution answered with an error is retried on the schedule's RetryPolicy, with exponential backoff (whose
  // steps AWS does not publish), a new execution each time, so one applied before its error runs twice
  // (https://docs.aws.amazon.com/scheduler/latest/APIReference/API_RetryPolicy.html).
  const trigger = JSON.stringify({ scheduledTime: SCHEDULED_TIME });
  let undelivered = 1;
  let startCalls = 0;
  const startError = (): StartError | undefined => {
    startCalls++;
    if (w.placed) return placedStartErrors.due(() => true);
    if (startFaults.length >= s.startErrors.budget || aws() >= s.startErrors.chance) return undefined;
    const u = aws();
    return u < 1 / 3 ? { kind: 'throttled' } : { kind: 'server-error', status: u < 2 / 3 ? 500 : 503, applied: aws() < 0.5 };
  };
  const deliver = (letter: string, attempt = 1, firstAt = clock.monotonicMs()): void => {
    const name = attempt === 1 ? `exec-${letter}` : `exec-${letter}.${attempt}`;
    const error = startError();
    if (error === undefined) {
      startJob(name, trigger);
      w.triggered = --undelivered === 0;
      return;
    }
    const applied = error.kind === 'server-error' && (error.applied ?? false);
    const what = error.kind === 'throttled' ? 'ThrottlingException' : `${error.status ?? 500} (${applied ? 'applied' : 'not applied'})`;
    if (applied) startJob(name, trigger);
    scheduler.log(`the schedule's StartExecution #${startCalls} (delivery ${letter}) answered ${what}`);
    const retryMs = 1_000 + Math.floor(aws() * s.startRetryMs * 2 ** (attempt - 1));
    const retryAt = clock.monotonicMs() + retryMs;
    startFaults.push({ kind: `trigger-${error.kind}`, point: `StartExecution@exec-${letter}`, at: retryAt });
    if (attempt > f.triggerRetry.attempts || retryAt - firstAt > f.triggerRetry.maxAgeMs) {
      scheduler.log(`delivery ${letter} goes to the dead-letter queue`);
      w.triggered = --undelivered === 0;
      return;
    }
    scheduler.log(`the schedule retries delivery ${letter} in ${retryMs} ms`);
    clock.after(retryMs, () => deliver(letter, attempt + 1, firstAt));
  };

  scheduler.log(`the sparse index lags by up to ${w.indexLagMs} ms`);
  deliver('a');
  // The deliveries after the first, in half the schedules (the schedule's own stream, as before): drawnAgain.
  const again: readonly Delivery[] = w.placed
    ? [...(w.placed.againAtMs === undefined ? [] : [{ atMs: w.placed.againAtMs }]), ...(w.placed.again ?? [])]
    : random() < 0.5
      ? drawnAgain(Math.floor(random() * s.duplicateWithinMs), aws)
      : [];
  const letters = 'bcdefgh';
  again.forEach((d, i) => {
    const letter = letters[i]!;
    undelivered++;
    if ('atMs' in d) {
      scheduler.log(`the daily trigger is delivered again at ${d.atMs} ms`);
      clock.after(d.atMs, () => deliver(letter));
      w.horizonMs = Math.max(w.horizonMs, d.atMs + w.bound);
    } else if ('afterEndMs' in d) {
      scheduler.log(`the daily trigger is delivered again ${d.afterEndMs} ms after the first execution closed`);
      const first = (name: string) => {
        if (!name.startsWith('exec-a')) return;
        closed.splice(closed.indexOf(first), 1);
        clock.after(d.afterEndMs, () => deliver(letter));
      };
      closed.push(first);
      w.horizonMs += d.afterEndMs;
    } else {
      // While the first run holds its lease, right after a renewal: a claimant starts watching a fresh rvn, where
      // a claim that does not wait out the whole lease overlaps a live holder. If the first execution closes before
      // that renewal, the delivery comes as late ones do.
      scheduler.log(`the daily trigger is delivered again ${d.afterRenewalMs} ms after the lease's renewal ${d.renewal}`);
      let pending = true;
      const fire = () => {
        if (!pending) return;
        pending = false;
        clock.after(d.afterRenewalMs, () => deliver(letter));
      };
      onRenewal.push({ nth: d.renewal, then: fire });
      closed.push((name) => {
        if (name.startsWith('exec-a')) fire();
      });
      w.horizonMs += d.afterRenewalMs + w.bound;
    }
  });
  w.triggered = undelivered === 0;
  clock.after(f.sweepPeriodMs, sweep);
}

/** What an invocation's fault does at its store calls (counted from 1, as each is applied). */
interface StepGate {
  /** Hold the nth call before it is sent, for ever: the process hangs there (its timers run on). */
  readonly holdBefore: (nth: number) => boolean;
  /** Hold the nth call's answer, for ever: the process was killed there, or hangs there. */
  readonly holdAfter: (nth: number) => boolean;
}

const never = new Promise<never>(() => undefined);

/** An invocation's actor name, `<execution>/<state>#<n>` (a Map Run's child execution is `<execution>/<Map>:<i>`). */
const invocationName = (execution: string, state: string, n: number): string => `${execution}/${state}#${n}`;

/** The execution an invocation runs for, the lease's holder: the first part of its name (`exec-a` of `exec-a/RunChunk#7`). */
export const executionOf = (invocation: string): string => invocation.split('/')[0]!;

/**
 * The trigger's deliveries after the first, drawn: a second steered into the first run, right after one of its
 * lease's renewals (half of these: a claimant watching a live holder from a fresh rvn, where a claim that does not
 * wait out the lease the holder keeps overlaps it), or a second at `againAtMs` and a third (a quarter), or one late
 * (a quarter): up to a minute after the first execution closed, or hours after the first.
 */
function drawnAgain(againAtMs: number, aws: () => number): Delivery[] {
  const s = FLOW_SETTINGS;
  const u = aws();
  if (u < 0.5) {
    const { upTo, withinMs } = s.againAfterRenewal;
    return [{ renewal: 1 + Math.floor(aws() * upTo), afterRenewalMs: Math.floor(aws() * withinMs) }];
  }
  if (u < 0.75) return [{ atMs: againAtMs }, { atMs: Math.floor(aws() * s.duplicateWithinMs) }];
  if (aws() < 0.5) return [{ afterEndMs: Math.floor(aws() * s.lateAfterEndMs) }];
  return [{ atMs: s.lateHoursMs.from + Math.floor(aws() * (s.lateHoursMs.to - s.lateHoursMs.from)) }];
}

// ---------------------------------------------------------------------------------------------------------------
// Checks: safety, from the trace and the stores' final state, then liveness.

/** Liveness: the run the trigger started is DONE, raised or not, within the bound once the faults stopped. */
async function doneInTime(w: WorkflowState): Promise<string[]> {
  const deadline = Math.max(0, faultsEndMs(w)) + w.bound;
  if (w.doneAt === undefined) {
    const row = await w.jobs.readJob(w.jobId);
    return [`the run is ${row?.state ?? 'never raised'} at ${w.clock.monotonicMs()} ms, never DONE (faults ended at ${faultsEndMs(w)} ms)`];
  }
  if (w.doneAt > deadline) return [`the run was DONE at ${w.doneAt} ms, after the bound ${deadline} ms`];
  return [];
}

/** Liveness: every execution of the job closed (a RUNNING one at the end waits on nothing that will come). */
function closedInTime(w: WorkflowState): string[] {
  const deadline = Math.max(0, faultsEndMs(w)) + w.bound;
  return [...w.executions.values()]
    .filter((e) => e.status === 'RUNNING')
    .map((e) => `execution ${e.name} still RUNNING at ${w.clock.monotonicMs()} ms (bound ${deadline} ms)`);
}

const safety: readonly Check<WorkflowState>[] = [
  ...holderChecks<WorkflowState>(
    (w) => ({ lease: w.lease, monoRate: w.faults.monoRate ?? 0 }),
    (w) => twoHoldersChecks(w.calls.calls, w.lockWrites, w.jobId, HOLDER_ACTS),
  ),
  {
    name: 'a DONE run is whole',
    check: async (w) => {
      const chunks = await doneChecks(w.jobs, { jobId: w.jobId, date: DATE, chunks: w.spec.chunks, jobsTable: w.jobs.table }, w.keys);
      const done = (await w.jobs.readJob(w.jobId))?.state === 'DONE';
      return [...chunks, ...(done ? ((await w.run.whole?.()) ?? []) : [])];
    },
  },
];

const liveness: readonly Check<WorkflowState>[] = [
  { name: 'liveness: the run is DONE within the bound', check: doneInTime },
  { name: 'liveness: every execution of the job closed', check: closedInTime },
];

// ---------------------------------------------------------------------------------------------------------------
// The world.

/**
 * The world of a FencedJob running `options.job`, on the stores `storesOf` builds: in memory (memoryWorkflowStores),
 * or on DynamoDB Local (verify/explore/dynamo.ts).
 */
export const fencedJobWorld = <R extends JobRun>(
  storesOf: WorkflowStoresOf,
  options: WorkflowOptions<R>,
): World<WorkflowState<R>, WorkflowPlaced> => ({
  setup: (seed, mutation, placed) => setup(storesOf, options, seed, mutation, placed),
  actors,
  // Done when the run is, every execution closed and every invocation returned; or when nothing can happen any
  // more: all that, with the run never raised (no sweep sees it) and no trigger still to come: stranded, a violation.
  done: (w) =>
    [...w.executions.values()].every((e) => e.status !== 'RUNNING') &&
    [...w.running].every((a) => a.crashed) &&
    w.triggered &&
    (w.doneAt !== undefined || !w.raised),
  horizonMs: (w) => w.horizonMs,
  // A schedule takes a few hundred turns (under 450 in 300 seeds, and in 100 of each mutation).
  maxTurns: 20_000,
  checks: [...safety, ...(options.job.checks ?? []), ...liveness],
  end: async (w) => {
    const row = await w.jobs.readJob(w.jobId);
    const executions = [...w.executions.values()].map((e) => `${e.name} ${e.status} ${e.end ?? ''}`).join(', ');
    return {
      line: `end: run ${row?.state ?? 'never raised'}; ${executions}`,
      state: row?.state,
      faults: [...w.invokeFaults, ...w.startFaults].map((x) => `${x.kind} ${x.point.replace(/@.*/, '')}`),
    };
  },
});

/** A copy of a definition with `edit` applied to every state, the states of its Maps included. */
export function everyState(machine: MachineDef, edit: (state: Json) => void): MachineDef {
  const copy = structuredClone(machine) as { States: Record<string, Json> };
  const walk = (m: { States: Record<string, Json> }): void => {
    for (const st of Object.values(m.States)) {
      edit(st);
      const inner = (st.ItemProcessor ?? st.Iterator) as { States: Record<string, Json> } | undefined;
      if (inner) walk(inner);
    }
  };
  walk(copy);
  return copy as unknown as MachineDef;
}

/** A definition whose every Retry no longer names `error` (a retrier left naming nothing is dropped). */
const unretried = (machine: MachineDef, error: string): MachineDef =>
  everyState(machine, (st) => {
    const retry = st.Retry as Retrier[] | undefined;
    if (retry) st.Retry = retry.map((r) => ({ ...r, ErrorEquals: r.ErrorEquals.filter((e) => e !== error) })).filter((r) => r.ErrorEquals.length > 0);
  });

let clients: Clients | undefined;
/** The handlers are given the schedule's stores; these clients are never sent a request (they exist for the Runtime's shape). */
function dummyClients(): Clients {
  return (clients ??= awsClients());
}

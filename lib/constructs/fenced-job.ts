/**
 * FencedJob: a scheduled job that runs exactly once in effect, whatever the job does, as one construct.
 *
 * It owns the lock table and the job table (or uses the stack's own: lockTable, jobTable), the manifest bucket when
 * the chunks write a manifest (or the stack's: manifestBucket), the fenced workflow (claim the lease clock-free,
 * raise the fences first, run the chunks with the USER'S function, complete, release), the job's schedule, the
 * orphan sweeper with its schedule, and the alarms with their dashboard (docs/DESIGN.md §4–§6; docs/FENCED-JOB.md).
 *
 * What it guarantees: a holder that lost its lease cannot write past the fence (the chunk function's fenced
 * writes are refused by DynamoDB and S3), two starts of the same run are harmless, a run whose holder
 * died is re-queued. What it does not: the chunk function's own writes are only safe if it follows the contract
 * below; the lease alone guarantees nothing.
 *
 * The chunk function is invoked with `{ jobDate, holder, token, chunk }` and must, in this order: resume the lease
 * (renew first: `resume` in the core, which computes this process's own stop time), check the stop time before
 * each act, put every write in a transaction with the ConditionCheck of its chunk fence item (`<name>#<date>#chunk#NN`,
 * `fence <= token`), commit its output to the run's manifest (If-Match) if the job has one, then mark the chunk done on its fence item
 * (Complete refuses to mark the run DONE over a chunk that is not). It gets the environment it needs
 * (lib/lambda/env.ts: job name, chunk count, tables, bucket, lease settings) and the grants on the lock and job tables
 * and on the manifest bucket's `<name>/` prefix; grants on its own tables are the caller's. FencedChunkFunction makes
 * such a function, bundled as the library's own are.
 */
import { CfnOutput, type CfnResource, Duration, Stage, Token } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { LEASE_DEFAULTS, inWords, leaseProblems } from '../core/config';
import { ConfigError } from '../core/errors';
import { SWEEPER_DEFAULTS } from '../core/sweeper';
import { JOB_NAME_PATTERN, jobKeys } from '../core/job-keys';
import { JOB_TABLE, LOCK_TABLE } from '../core/schema';
import { FENCED_JOB_MARK } from '../lambda/env';
import { FencepostAlarms } from './alarms';
import { SFN_QUOTAS, type ChunkWording, chunkMapPlan, chunkMapProblems } from './chunk-plan';
import { JOB_TABLE_TTL, JobTable } from './job-table';
import { FencedWorkflow, holderRetriers, pascalName } from './fenced-workflow';
import { LOCK_TABLE_TTL, LockTable } from './lock-table';
import { ManifestBucket, type ManifestBucketProps, refuseUnconditionalManifestWrites } from './manifest-bucket';
import { givenTableProblems, refuseTimeToLive } from './schema-table';
import { clockTime, dateInDstGap } from './cron';
import { LOCAL_RUN_CONTEXT, renewalGapProblem, worstRenewalGap } from './renewal-gap';
import { JobSchedule } from './schedule';
import { OrphanSweeper, sweepWindowExpression } from './sweeper';

/** The settings of a fenced job that are plain values: what FencedJob validates, all in one pass. */
export interface FencedJobSettings {
  /** Chunks in one run (one invocation of the chunk function each). */
  readonly chunks: number;
  /** Chunks the workflow runs at once (the Map's MaxConcurrency): 1..40 inline, 1..10,000 distributed. @default 1 */
  readonly chunkConcurrency: number;
  /**
   * Runs of more chunks than this run them as a Distributed Map (a child execution per chunk), not inline in the job's
   * execution, whose history (25,000 events) and state (256 KiB) would otherwise grow with the run. 0: always
   * distributed. @default 500
   */
  readonly distributedMapAboveChunks: number;
  /** The largest output of one chunk invocation in bytes (JSON), for the inline payload check. @default 1024 */
  readonly chunkOutputBytes: number;
  /**
   * How long one chunk takes, in ms: with chunks and chunkConcurrency it makes the planned run, which must fit the
   * 2-hour execution timeout and the claim budget (claimBudget × leaseMs). @default - neither is checked
   */
  readonly chunkMs?: number;
  /** How long a lease lasts without renewal. @default 10000 */
  readonly leaseMs: number;
  /** How often the holder renews; at most leaseMs / 3. @default 3000 */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin. @default 2000 */
  readonly marginMs: number;
  /**
   * Leases a claimant waits on a live holder before it gives up: at least the planned run (chunkMs), so a duplicate
   * start outwaits a normal run. Giving up on a live holder whose run is RUNNING ends quietly (AlreadyRunning).
   * @default 30
   */
  readonly claimBudget: number;
  /**
   * EventBridge Scheduler expression for the scheduled start, `cron(...)` or `rate(...)`. A cron whose every start of
   * some date falls in a daylight-saving gap of scheduleTimeZone (e.g. 02:00 in Europe/Paris on the last Sunday of
   * March) is refused: Scheduler skips a start at a local time that does not exist, so that date would not run. The
   * NotDone alarm checks only the deadlines that follow a start of a cron on some weekdays (`? * MON-FRI`).
   * @default 'cron(30 1 * * ? *)'
   */
  readonly scheduleExpression: string;
  /** IANA time zone the schedule (and the deadline) is read in. @default 'UTC' */
  readonly scheduleTimeZone: string;
  /** Hour of the day (0..23, in scheduleTimeZone) by which the run must be DONE. @default 5 */
  readonly deadlineHour: number;
  /** Alarm when a Lambda's estimated clock offset exceeds this; must stay below marginMs. @default 500 */
  readonly clockOffsetAlarmMs: number;
  /** Alarm when this many fenced writes are refused in 5 minutes. @default 1 (any rejection) */
  readonly fencedRejectionsAlarmThreshold: number;
  /** Alarm when a table sees more ConditionalCheckFailedRequests than this in 5 minutes. @default 40 */
  readonly conditionalCheckFailedAlarmThreshold: number;
  /** Where alarm notifications are e-mailed. @default - no subscription; subscribe to the topic yourself */
  readonly alarmEmail?: string;
  /**
   * When the orphan sweeper runs (Scheduler's finest rate is one minute), in scheduleTimeZone.
   * @default - every minute from the scheduled start's hour through deadlineHour (e.g. `cron(* 1,2,3,4,5 * * ? *)`), the
   * hours a run can be claimed in; every minute of the day for a `rate(...)` schedule. A run orphaned
   * outside those hours is re-queued when they come round (docs/DESIGN.md "The sweeper").
   */
  readonly sweeperScheduleExpression: string;
  /** Above this share of claimed rows looking dead at once, the sweeper re-queues none (a storm). @default 0.5 */
  readonly sweeperStormShare: number;
  /** A storm needs at least this many dead-looking rows. @default 3 */
  readonly sweeperStormMinimum: number;
  /** Re-queues per sweep at most. @default 10 */
  readonly sweeperMaxRequeues: number;
  /**
   * After this many re-queues of one run the sweeper gives it up: its runs keep failing (a missing grant, a bug, out
   * of memory), so it stops starting them, and the SweeperGaveUp alarm fires until a person fixes the cause and re-arms
   * the run (docs/ALARMS.md). @default 5
   */
  readonly sweeperMaxRequeuesPerRun: number;
}

/** The defaults of every optional setting (the reference text's numbers; ARCHITECTURE.md section 8). */
export const FENCED_JOB_DEFAULTS = {
  chunkConcurrency: 1,
  distributedMapAboveChunks: 500,
  chunkOutputBytes: 1024,
  leaseMs: LEASE_DEFAULTS.leaseMs,
  renewMs: LEASE_DEFAULTS.renewMs,
  marginMs: LEASE_DEFAULTS.marginMs,
  claimBudget: LEASE_DEFAULTS.claimBudget,
  scheduleExpression: 'cron(30 1 * * ? *)',
  scheduleTimeZone: 'UTC',
  deadlineHour: 5,
  clockOffsetAlarmMs: 500,
  fencedRejectionsAlarmThreshold: 1,
  // One waiting claimant claims only after one rvn stayed unchanged a full lease, so it fails at most one claim per
  // lease it waits: 300 s / 10 s + 1 = 31 in 5 minutes (and claimBudget + 1 = 31 in all). Above 40 means more than
  // one claimant, or renewals failing en masse.
  conditionalCheckFailedAlarmThreshold: 40,
  sweeperStormShare: SWEEPER_DEFAULTS.stormShare,
  sweeperStormMinimum: SWEEPER_DEFAULTS.stormMinimum,
  sweeperMaxRequeues: SWEEPER_DEFAULTS.maxRequeuesPerSweep,
  sweeperMaxRequeuesPerRun: SWEEPER_DEFAULTS.maxRequeuesPerRun,
} as const satisfies Omit<FencedJobSettings, 'chunks' | 'chunkMs' | 'alarmEmail' | 'sweeperScheduleExpression'>;

/** FencedJob's settings that have defaults (FENCED_JOB_DEFAULTS): every one but the chunk count and the chunk's duration. */
export type OptionalSettings = Partial<Omit<FencedJobSettings, 'chunks' | 'chunkMs'>>;

/** The settings FencedJobProps gives as Durations (each below), held in FencedJobSettings as whole milliseconds. */
type TimeSetting = 'leaseMs' | 'renewMs' | 'marginMs' | 'clockOffsetAlarmMs';

/** Each time setting's prop: FencedJob's problems name the prop the user wrote. */
const TIME_PROPS: Readonly<Record<TimeSetting, keyof FencedJobProps>> = {
  leaseMs: 'leaseDuration',
  renewMs: 'renewInterval',
  marginMs: 'margin',
  clockOffsetAlarmMs: 'clockOffsetAlarmThreshold',
};

/**
 * A FencedJob: the job's name, its chunk function, the chunks per run, and any setting to change from its default.
 * Every time is a Duration; the plain settings (counts, thresholds, schedules) are FencedJobSettings' own.
 */
export interface FencedJobProps extends Omit<OptionalSettings, 'leaseMs' | 'renewMs' | 'marginMs' | 'clockOffsetAlarmMs'> {
  /**
   * The job's name: lowercase letters, digits and hyphens, starting with a letter (at most 40). Its runs' keys are
   * `<name>#<date>`, their manifests `<name>/<date>/manifest.json`, everything they write to S3 is under `<name>/`.
   * Unique in its Stage (the app, or a Stage in it): a second job of one name there is refused.
   */
  readonly name: string;
  /**
   * The user's chunk function, invoked once per chunk with `{ jobDate, holder, token, chunk }` (see the contract
   * above); a `FencedChunkFunction` is made for it. FencedJob grants it what the fence needs and, when it is a
   * `lambda.Function` of this app, sets its environment (`FencedJob.environment`); set that yourself on an imported
   * function.
   */
  readonly chunkFunction: lambda.IFunction;
  /** Chunks in one run. */
  readonly chunks: number;
  /**
   * How long a lease lasts without renewal: a holder that stops renewing loses the run this long after its last
   * renewal. A whole number of milliseconds. leaseDuration - margin must cover the worst gap between two of the
   * holder's renewals (renewInterval + the longest retry wait + a Lambda start, + a Map Run's start-up for a
   * Distributed Map; docs/FENCED-JOB.md), or the props are refused.
   * @default Duration.seconds(10)
   */
  readonly leaseDuration?: Duration;
  /**
   * How often the holder renews its lease; at most leaseDuration / 3, so two renewals can fail before it lapses.
   * @default Duration.seconds(3)
   */
  readonly renewInterval?: Duration;
  /**
   * The safety margin of the stop time (sent_at + leaseDuration - margin): the holder stops acting this long before
   * its lease could lapse, for clock error and pauses. Zero or more whole milliseconds.
   * @default Duration.seconds(2)
   */
  readonly margin?: Duration;
  /**
   * The ClockOffset alarm fires when a function's wall clock is provably further than this off AWS's time; must be
   * less than margin, which is what absorbs clock error (docs/CLOCK.md).
   * @default Duration.millis(500)
   */
  readonly clockOffsetAlarmThreshold?: Duration;
  /**
   * The chunk function's timeout; its task's is 30 s more, so the function always times out first.
   * @default - the function's own timeout (required when the function is not a `lambda.Function` of this app)
   */
  readonly chunkTimeout?: Duration;
  /**
   * How long one chunk takes (your estimate of a normal chunk, not its timeout). FencedJob plans the run from it,
   * ceil(chunks / chunkConcurrency) × chunkDuration, and refuses a run past the execution timeout or longer than the
   * claim budget (claimBudget × leaseDuration). @default - the run is not planned, neither is checked
   */
  readonly chunkDuration?: Duration;
  /** The chunk task's state name in the definition. @default 'RunChunk' */
  readonly chunkStepName?: string;
  /**
   * The chunk function writes its chunk's object to S3 and commits it to the run's manifest: true gives the job a
   * manifest bucket (its own, or manifestBucket) and grants the function the job's prefix of it. Without it the
   * chunks write DynamoDB only: no bucket, no S3 grant, no manifest (the job row is the run's record).
   * @default false
   */
  readonly chunkWritesManifest?: boolean;
  /**
   * The lock table to use instead of creating one: partition key `pk` (String), no sort key, no TTL attribute, its
   * items never deleted (an item's epoch is the fencing token). A `Table` of this app is checked at synth; an
   * imported table cannot be, and is taken as it is (docs/FENCED-JOB.md).
   * @default - a LockTable of the job's own
   */
  readonly lockTable?: ITable;
  /**
   * The job table to use instead of creating one: partition key `pk` (String), no sort key, no TTL attribute, and
   * the sparse GSI `claimed` (partition key `claim_shard` (String), sort key `claimed_since` (String), projection
   * ALL) through which the sweeper reads the claimed rows. A `Table` of this app is checked at synth; an imported
   * table cannot be (docs/FENCED-JOB.md).
   * @default - a JobTable of the job's own
   */
  readonly jobTable?: ITable;
  /**
   * The bucket the job's manifests and chunk objects go in (under `<name>/`), instead of creating one; only with
   * chunkWritesManifest: true. FencedJob adds to a bucket of this app the policy that refuses unconditional manifest writes;
   * an imported bucket's policy is its owner's to set (docs/FENCED-JOB.md). Versioning is advised, not required.
   * @default - a ManifestBucket of the job's own when chunkWritesManifest, else none
   */
  readonly manifestBucket?: IBucket;
  /**
   * The tables the chunk function writes in its fenced transactions, by a short lowercase id (e.g.
   * `{ orders: table }`): the TransactionConflicts alarm watches them with the job table.
   * @default - the job table alone
   */
  readonly fencedTables?: Readonly<Record<string, ITable>>;
  /** What the chunks report, graphed first on the dashboard. @default - no progress graph */
  readonly dashboardProgress?: { readonly left: cloudwatch.IMetric[]; readonly right?: cloudwatch.IMetric[] };
  /** Retention of the manifest bucket's objects and logs, when FencedJob creates it. @default - ManifestBucket's defaults */
  readonly manifestRetention?: Omit<ManifestBucketProps, 'prefix'>;
  /**
   * Add stack outputs for what a runbook or a script needs: `<Job>LockTableName` (what bump-epochs takes after a
   * restore), `<Job>JobTableName`, `<Job>StateMachineArn` (to start a run by hand), `<Job>AlarmTopicArn`,
   * `<Job>DashboardName`, and `<Job>ManifestBucketName` when there is a bucket; `<Job>` is the name in PascalCase,
   * so two jobs in one stack keep apart. Each value is also a property of the job, for outputs of your own.
   * @default false - no outputs
   */
  readonly outputs?: boolean;
}

/** The workflow's own state names: the chunk step may not take one. */
const STATE_NAMES = new Set([
  'Prepare',
  'InvalidInput',
  'FirstObservation',
  'Observe',
  'ClaimOrWatch',
  'WatchTheLease',
  'Claim',
  'Claimed',
  'ClaimBudgetExhausted',
  'RaiseFence',
  'AlreadyDoneAtRaise',
  'AlreadyDone',
  'AlreadyRunning',
  'Chunks',
  'Complete',
  'Completed',
  'Lost',
  'ReleaseAfterFailure',
  'CheckAfterChunkFailure',
  'ChunksLostOrFailed',
  'Failed',
]);

const positiveInteger = (n: number) => Number.isSafeInteger(n) && n >= 1;

/**
 * Every problem with a fenced job's settings, each naming the setting, for one ConfigError. `chunks` undefined
 * means the caller derives it from settings of its own that are wrong and already reported (e.g. a record count and
 * a chunk size); `wording` says how the chunk problems name what makes the chunks.
 *
 * @param s - the settings, defaults applied
 * @param wording - how problems name the setting that makes the chunks @default `chunks (N)`
 * @returns the problems; empty when the settings are valid
 */
export function fencedJobProblems(s: Omit<FencedJobSettings, 'chunks'> & { readonly chunks: number | undefined }, wording?: ChunkWording): string[] {
  const problems = leaseProblems(s);
  if (s.chunks !== undefined && !positiveInteger(s.chunks)) problems.push(`chunks must be a positive integer, got ${s.chunks}`);
  if (!positiveInteger(s.chunkOutputBytes)) problems.push(`chunkOutputBytes must be a positive integer, got ${s.chunkOutputBytes}`);
  if (s.chunkMs !== undefined && !(s.chunkMs > 0)) problems.push(`chunkDuration must be positive, got ${s.chunkMs} ms`);
  // How the chunks run on AWS (Map mode, concurrency, history, payload): the figures it reads must be valid.
  const planned = s.chunks !== undefined && [s.chunks, s.leaseMs, s.claimBudget, s.chunkOutputBytes].every(positiveInteger);
  if (planned) problems.push(...chunkMapProblems({ ...s, chunks: s.chunks! }, wording));
  else if (!Number.isSafeInteger(s.chunkConcurrency) || s.chunkConcurrency < 1 || s.chunkConcurrency > SFN_QUOTAS.distributedConcurrency) {
    problems.push(`chunkConcurrency must be an integer from 1 to ${SFN_QUOTAS.distributedConcurrency}, got ${s.chunkConcurrency}`);
  }
  const problem = scheduleProblem('scheduleExpression', s.scheduleExpression);
  if (problem) problems.push(problem);
  if (!isTimeZone(s.scheduleTimeZone))
    problems.push(`scheduleTimeZone must be an IANA time zone such as UTC or Europe/Paris, got ${JSON.stringify(s.scheduleTimeZone)}`);
  else if (!problem) {
    // Scheduler skips a start at a local time that does not exist (lib/constructs/cron.ts): that date would never run.
    const skipped = dateInDstGap(s.scheduleExpression, s.scheduleTimeZone, new Date().getUTCFullYear());
    if (skipped) {
      const { gap, starts } = skipped;
      problems.push(
        `scheduleExpression ${s.scheduleExpression} starts at ${starts.map(clockTime).join(', ')} in scheduleTimeZone ${s.scheduleTimeZone}, which skips ${clockTime(gap.fromMinute)}–${clockTime(gap.toMinute)} when daylight saving time begins (on ${gap.date}): EventBridge Scheduler skips a start at a local time that does not exist, so that date would never run. Start outside that hour, or schedule in a zone without daylight saving time (UTC)`,
      );
    }
  }
  if (!positiveInteger(s.clockOffsetAlarmMs)) {
    problems.push(`clockOffsetAlarmMs must be a positive integer, got ${s.clockOffsetAlarmMs}`);
  } else if (s.clockOffsetAlarmMs >= s.marginMs) {
    // The margin absorbs clock error; an alarm at or past it would fire only after the margin is gone.
    problems.push(
      `clockOffsetAlarmMs (${s.clockOffsetAlarmMs}) must be less than marginMs (${s.marginMs}): the alarm must fire before clock error eats the margin`,
    );
  }
  for (const key of ['fencedRejectionsAlarmThreshold', 'conditionalCheckFailedAlarmThreshold'] as const) {
    if (!positiveInteger(s[key])) problems.push(`${key} must be a positive integer, got ${s[key]}`);
  }
  if (!Number.isSafeInteger(s.deadlineHour) || s.deadlineHour < 0 || s.deadlineHour > 23) {
    problems.push(`deadlineHour must be an hour of the day from 0 to 23, got ${s.deadlineHour}`);
  } else if (!problem) {
    const gap = deadlineGapMinutes(s.scheduleExpression, s.deadlineHour);
    if (gap !== undefined && gap < 60) {
      problems.push(
        `deadlineHour (${s.deadlineHour}:00) must be at least an hour after the scheduled start (${gap} minutes is too little for a run)`,
      );
    }
  }
  const sweepProblem = scheduleProblem('sweeperScheduleExpression', s.sweeperScheduleExpression);
  if (sweepProblem) problems.push(sweepProblem);
  if (!(s.sweeperStormShare > 0 && s.sweeperStormShare <= 1)) problems.push(`sweeperStormShare must be in (0, 1], got ${s.sweeperStormShare}`);
  for (const key of ['sweeperStormMinimum', 'sweeperMaxRequeues', 'sweeperMaxRequeuesPerRun'] as const) {
    if (!positiveInteger(s[key])) problems.push(`${key} must be a positive integer, got ${s[key]}`);
  }
  if (s.alarmEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(s.alarmEmail)) {
    problems.push(`alarmEmail must be an e-mail address, got ${JSON.stringify(s.alarmEmail)}`);
  }
  return problems;
}

/** EventBridge Scheduler's recurring forms: cron(6 fields) or rate(N unit). `at(...)` is one-off, not scheduled. */
function scheduleProblem(key: string, expression: string): string | undefined {
  const cron = /^cron\((.+)\)$/.exec(expression);
  if (cron) {
    const fields = cron[1].trim().split(/\s+/);
    return fields.length === 6
      ? undefined
      : `${key} cron(...) needs 6 fields (minutes hours day-of-month month day-of-week year), got ${fields.length} in ${expression}`;
  }
  if (/^rate\([1-9]\d* (minute|minutes|hour|hours|day|days)\)$/.test(expression)) return undefined;
  return `${key} must be cron(...) or rate(N unit), got ${JSON.stringify(expression)}`;
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Minutes from a cron's fixed daily start to the deadline hour, or undefined when the start isn't one fixed time. */
function deadlineGapMinutes(expression: string, deadlineHour: number): number | undefined {
  const m = /^cron\((\d{1,2}) (\d{1,2}) /.exec(expression);
  if (!m) return undefined;
  const start = Number(m[2]) * 60 + Number(m[1]);
  return (((deadlineHour * 60 - start) % 1440) + 1440) % 1440;
}

/**
 * Marks a constructed FencedJob with its name, so that one app's jobs are found by name whichever copy of this module
 * made them (a symbol of the global registry, not `instanceof`).
 */
const FENCED_JOB_NAME = Symbol.for('fencepost.FencedJob.name');

/**
 * The path of the FencedJob of this name already in the Stage of `scope` (the app itself when there is no other), or
 * undefined. Stages deploy apart (a dev and a prod stage, each with its own tables), so one name in two is fine.
 */
function jobOfName(scope: Construct, name: string): string | undefined {
  const stage = Stage.of(scope);
  const within = stage ?? scope.node.root;
  return within.node.findAll().find((c) => (c as unknown as Record<symbol, unknown>)[FENCED_JOB_NAME] === name && Stage.of(c) === stage)?.node.path;
}

/** The longest timeout a Lambda function can have (Lambda's quotas: 900 seconds). */
const LAMBDA_MAX_TIMEOUT_SECONDS = 900;

/** The problems of the chunk function's timeout: what Lambda allows, and, given as chunkTimeout, the function's own. */
function chunkTimeoutProblems(props: FencedJobProps, chunkTimeout: Duration | undefined): string[] {
  if (chunkTimeout === undefined)
    return ['chunkTimeout is required: the chunk function is not a lambda.Function of this app, so its timeout is unknown'];
  if (chunkTimeout.isUnresolved()) return ['chunkTimeout must be a literal Duration, not a token (the chunk task is timed from it at synth)'];
  const seconds = chunkTimeout.toSeconds({ integral: false });
  const problems: string[] = [];
  if (!Number.isInteger(seconds) || seconds < 1) {
    problems.push(`chunkTimeout must be a whole number of seconds from 1 to ${LAMBDA_MAX_TIMEOUT_SECONDS}, got ${seconds} s`);
  } else if (seconds > LAMBDA_MAX_TIMEOUT_SECONDS) {
    problems.push(`chunkTimeout (${seconds} s) must be at most ${LAMBDA_MAX_TIMEOUT_SECONDS} s, the longest timeout a Lambda function can have`);
  }
  const fn = props.chunkFunction;
  if (props.chunkTimeout !== undefined && fn instanceof lambda.Function) {
    const own = fn.timeout ?? Duration.seconds(3); // a lambda.Function without a timeout has Lambda's default
    if (!own.isUnresolved() && own.toMilliseconds() !== chunkTimeout.toMilliseconds({ integral: false })) {
      // Longer, the task would wait on a function already timed out; shorter, the task would retry the chunk while
      // its first invocation still runs.
      problems.push(
        `chunkTimeout (${seconds} s) must be the chunkFunction's own timeout (${own.toSeconds({ integral: false })} s): the chunk task times out 30 s after it, so that the function always times out first; leave chunkTimeout out for a lambda.Function of this app`,
      );
    }
  }
  return problems;
}

/** The problems only the props (not plain settings) can have: name, chunk timeout, state name, table ids, stores. */
function propsProblems(scope: Construct, props: FencedJobProps, chunkTimeout: Duration | undefined): string[] {
  const problems: string[] = [];
  if (!JOB_NAME_PATTERN.test(props.name)) {
    problems.push(`name must be lowercase letters, digits and hyphens, starting with a letter, at most 40, got ${JSON.stringify(props.name)}`);
  } else {
    const other = jobOfName(scope, props.name);
    // Its name keys the job's lock items and rows (<name>#<date>), its manifests and S3 prefix (<name>/) and its
    // metrics' service: two jobs of one name would claim, fence and alarm on each other's runs.
    if (other !== undefined) {
      problems.push(
        `name ${JSON.stringify(props.name)} is already the name of the FencedJob ${other} in this app: a job's name keys its lock items, job rows, manifests and metrics, so two jobs of one name would claim and fence each other's runs; give each job its own name`,
      );
    }
  }
  problems.push(...chunkTimeoutProblems(props, chunkTimeout));
  const step = props.chunkStepName;
  if (step !== undefined && (!/^[A-Za-z][A-Za-z0-9]{0,79}$/.test(step) || STATE_NAMES.has(step))) {
    problems.push(
      `chunkStepName must be letters and digits, starting with a letter, and not one of the workflow's states, got ${JSON.stringify(step)}`,
    );
  }
  for (const id of Object.keys(props.fencedTables ?? {})) {
    if (!/^[a-z][a-zA-Z0-9_]*$/.test(id) || id === 'jobs')
      problems.push(`fencedTables: ${JSON.stringify(id)} must be a lowercase id other than "jobs"`);
  }
  for (const [setting, prop] of Object.entries(TIME_PROPS)) {
    // A settings object spread into the props (as FencedJobSettings, in ms) would otherwise be dropped in silence.
    if (setting in props) problems.push(`${setting} is not a prop of FencedJob: give ${prop} as a Duration (e.g. Duration.millis(n))`);
    const d = props[prop] as Duration | undefined;
    if (d?.isUnresolved()) problems.push(`${prop} must be a literal Duration, not a token (${setting.replace(/Ms$/, '')} is checked at synth)`);
  }
  if (props.lockTable) problems.push(...givenTableProblems('lockTable', props.lockTable, LOCK_TABLE));
  if (props.jobTable) problems.push(...givenTableProblems('jobTable', props.jobTable, JOB_TABLE));
  const sameTable = sameTableName(props.lockTable, props.jobTable);
  if (sameTable !== undefined) {
    // A run's lock item and its job row have the same key, <name>#<date> (lib/core/job-keys.ts): in one table they would be one item.
    problems.push(`lockTable and jobTable must be two tables: a run's lock item and its job row have the same key, got ${sameTable} for both`);
  }
  if (props.chunkWritesManifest !== true) {
    for (const prop of ['manifestBucket', 'manifestRetention'] as const) {
      if (props[prop] !== undefined) problems.push(`${prop} is given, but chunkWritesManifest is not true: the job writes no manifest`);
    }
  } else if (props.manifestBucket && props.manifestRetention) {
    problems.push("manifestRetention applies to the bucket FencedJob creates; a given manifestBucket's retention is its own");
  }
  return problems;
}

/** What names one table given as both lock and job table (the same object, or the same concrete name), else undefined. */
function sameTableName(locks: ITable | undefined, jobs: ITable | undefined): string | undefined {
  if (!locks || !jobs) return undefined;
  if (locks === jobs) return locks.node.path;
  const name = locks.tableName;
  return !Token.isUnresolved(name) && name === jobs.tableName ? JSON.stringify(name) : undefined;
}

/** A time prop in whole ms (a fraction is kept, for the check to refuse by name), or the setting's default. */
function millis(d: Duration | undefined, fallback: number): number {
  return d === undefined || d.isUnresolved() ? fallback : d.toMilliseconds({ integral: false });
}

const TIME_SETTING = /\b(leaseMs|renewMs|marginMs|clockOffsetAlarmMs)\b/;

/**
 * A settings problem said in the props' words: `leaseMs (10000)` → `leaseDuration (10000 ms)`, an integer check of a
 * time → a whole number of milliseconds.
 */
function inPropsWords(problem: string): string {
  const name = (setting: string) => TIME_PROPS[setting as TimeSetting];
  const withUnits = problem
    .replace(
      new RegExp(`^${TIME_SETTING.source} must be a (positive|non-negative) integer, got (.+)$`),
      (_, setting: string, sign: string, got: string) => `${name(setting)} must be a whole, ${sign} number of milliseconds, got ${got} ms`,
    )
    .replace(
      new RegExp(`${TIME_SETTING.source}((?: [-/] \\w+)*) \\((\\d+)\\)`, 'g'),
      (_, setting: string, rest: string, n: string) => `${setting}${rest} (${n} ms)`,
    );
  return inWords(withUnits, TIME_PROPS);
}

/** A scheduled job fenced end to end: tables, bucket, workflow, schedules, sweeper, alarms. */
export class FencedJob extends Construct {
  /** The job's name. */
  readonly name: string;
  /** The settings, defaults applied and validated; times in whole milliseconds. */
  readonly settings: FencedJobSettings;
  /** The lock table (given, or the job's own LockTable's): one lease per run, its epoch the fencing token. */
  readonly lockTable: ITable;
  /** The job table (given, or the job's own JobTable's): job rows, chunk fence items, the sparse index of claimed rows. */
  readonly jobTable: ITable;
  /** The manifest bucket (given, or the job's own ManifestBucket's): the fence on S3. Undefined when no manifest is written. */
  readonly manifestBucket?: IBucket;
  /** The state machine and its functions. */
  readonly workflow: FencedWorkflow;
  /** Starts the job's state machine on its schedule. */
  readonly schedule: JobSchedule;
  /** Re-queues runs whose holder stopped renewing (liveness; the fence is the safety). */
  readonly sweeper: OrphanSweeper;
  /** Starts the sweeper's state machine. */
  readonly sweeperSchedule: JobSchedule;
  /** The alarms, their topic and the dashboard. */
  readonly alarms: FencepostAlarms;
  /** The topic every alarm of the job notifies (KMS-encrypted, TLS only): subscribe your pager to it. */
  readonly alarmTopic: sns.ITopic;
  /** The environment every function of the job gets (the chunk function's, when FencedJob cannot set it). */
  readonly environment: Record<string, string>;

  constructor(scope: Construct, id: string, props: FencedJobProps) {
    super(scope, id);
    const fn = props.chunkFunction;
    // A lambda.Function without a timeout has Lambda's default, 3 seconds.
    const chunkTimeout = props.chunkTimeout ?? (fn instanceof lambda.Function ? (fn.timeout ?? Duration.seconds(3)) : undefined);
    const given = Object.fromEntries(Object.entries(props).filter(([k, v]) => k in FENCED_JOB_DEFAULTS && !(k in TIME_PROPS) && v !== undefined));
    const s: FencedJobSettings = {
      ...FENCED_JOB_DEFAULTS,
      ...given,
      leaseMs: millis(props.leaseDuration, FENCED_JOB_DEFAULTS.leaseMs),
      renewMs: millis(props.renewInterval, FENCED_JOB_DEFAULTS.renewMs),
      marginMs: millis(props.margin, FENCED_JOB_DEFAULTS.marginMs),
      clockOffsetAlarmMs: millis(props.clockOffsetAlarmThreshold, FENCED_JOB_DEFAULTS.clockOffsetAlarmMs),
      chunks: props.chunks,
      chunkMs: props.chunkDuration?.toMilliseconds({ integral: false }),
      sweeperScheduleExpression:
        props.sweeperScheduleExpression ??
        sweepWindowExpression(
          props.scheduleExpression ?? FENCED_JOB_DEFAULTS.scheduleExpression,
          props.deadlineHour ?? FENCED_JOB_DEFAULTS.deadlineHour,
        ),
      alarmEmail: props.alarmEmail,
    };
    const settingsProblems = fencedJobProblems(s);
    const problems = [...propsProblems(this, props, chunkTimeout), ...settingsProblems.map(inPropsWords)];
    // The lease must cover the worst gap between the holder's renewals in AWS, its own tasks' retries included
    // (lib/constructs/renewal-gap.ts); read once the settings it is made of are valid. A local run is exempt (LOCAL_RUN_CONTEXT).
    if (settingsProblems.length === 0 && this.node.tryGetContext(LOCAL_RUN_CONTEXT) !== true) {
      const distributed = chunkMapPlan(s).mode === 'distributed';
      const gap = renewalGapProblem(s, worstRenewalGap({ renewMs: s.renewMs, distributed }, holderRetriers()));
      if (gap) problems.push(inPropsWords(gap));
    }
    if (problems.length > 0) throw new ConfigError(problems);
    this.name = props.name;
    Object.defineProperty(this, FENCED_JOB_NAME, { value: props.name });
    this.settings = s;

    const writesManifest = props.chunkWritesManifest ?? false;
    this.lockTable = props.lockTable ?? new LockTable(this, 'Locks').table;
    this.jobTable = props.jobTable ?? new JobTable(this, 'Jobs').table;
    // The given tables of this app keep refusing a TTL attribute set after this point too.
    if (props.lockTable instanceof dynamodb.Table) refuseTimeToLive(props.lockTable, LOCK_TABLE_TTL);
    if (props.jobTable instanceof dynamodb.Table) refuseTimeToLive(props.jobTable, JOB_TABLE_TTL);
    const prefix = jobKeys(props.name).prefix;
    if (props.manifestBucket) {
      this.manifestBucket = props.manifestBucket;
      refuseUnconditionalManifestWrites(props.manifestBucket, prefix);
    } else if (writesManifest) {
      // Its access-log bucket, when wanted: job.node.findChild('Manifests') is the ManifestBucket.
      this.manifestBucket = new ManifestBucket(this, 'Manifests', { prefix, ...props.manifestRetention }).bucket;
    }
    this.workflow = new FencedWorkflow(this, 'Workflow', {
      name: props.name,
      lockTable: this.lockTable,
      jobTable: this.jobTable,
      manifestBucket: this.manifestBucket,
      chunkFunction: fn,
      chunkTimeout: chunkTimeout!,
      chunkStepName: props.chunkStepName ?? 'RunChunk',
      chunkWritesManifest: writesManifest,
      settings: s,
    });
    this.environment = this.workflow.environment;

    // The id stays 'Nightly': it names the deployed schedule and its dead-letter queue, and a new id would make
    // CloudFormation replace both (the queue with its messages) in every stack already deployed.
    this.schedule = new JobSchedule(this, 'Nightly', {
      stateMachine: this.workflow.stateMachine,
      expression: s.scheduleExpression,
      timeZone: s.scheduleTimeZone,
      description: `Fencepost: start the scheduled ${props.name} run`,
    });
    this.sweeper = new OrphanSweeper(this, 'Sweeper', {
      name: props.name,
      lockTable: this.lockTable,
      jobTable: this.jobTable,
      job: this.workflow.stateMachine,
      environment: this.workflow.environment,
      stormShare: s.sweeperStormShare,
      stormMinimum: s.sweeperStormMinimum,
      maxRequeues: s.sweeperMaxRequeues,
      maxRequeuesPerRun: s.sweeperMaxRequeuesPerRun,
    });
    this.sweeperSchedule = new JobSchedule(this, 'SweeperSchedule', {
      stateMachine: this.sweeper.stateMachine,
      expression: s.sweeperScheduleExpression,
      timeZone: s.scheduleTimeZone,
      maxEventAge: Duration.minutes(5), // a missed sweep is replaced by the next one
      description: `Fencepost: start the orphan sweeper of ${props.name} (re-queues runs whose holder stopped renewing)`,
    });
    // How `fencepost run` finds this job's state machines in the synthesized app (template metadata, not deployed).
    (this.workflow.stateMachine.node.defaultChild as CfnResource).addMetadata(FENCED_JOB_MARK.job, props.name);
    (this.sweeper.stateMachine.node.defaultChild as CfnResource).addMetadata(FENCED_JOB_MARK.sweeper, props.name);
    this.alarms = new FencepostAlarms(this, 'Alarms', {
      name: props.name,
      lockTable: this.lockTable,
      jobTable: this.jobTable,
      fencedTables: props.fencedTables,
      stateMachine: this.workflow.stateMachine,
      deadLetterQueue: this.schedule.deadLetterQueue,
      sweeper: this.sweeper.stateMachine,
      sweeperDeadLetterQueue: this.sweeperSchedule.deadLetterQueue,
      progress: props.dashboardProgress,
      clockOffsetAlarmMs: s.clockOffsetAlarmMs,
      marginMs: s.marginMs,
      fencedRejectionsThreshold: s.fencedRejectionsAlarmThreshold,
      conditionalCheckFailedThreshold: s.conditionalCheckFailedAlarmThreshold,
      deadlineHour: s.deadlineHour,
      timeZone: s.scheduleTimeZone,
      scheduleExpression: s.scheduleExpression,
      alarmEmail: s.alarmEmail,
      maxRequeuesPerRun: s.sweeperMaxRequeuesPerRun,
    });
    this.alarmTopic = this.alarms.topic;
    if (props.outputs === true) this.addOutputs();
  }

  /** The opt-in stack outputs (FencedJobProps.outputs), keyed `<Job><what>` so that two jobs in one stack keep apart. */
  private addOutputs(): void {
    const job = pascalName(this.name);
    const outputs: [string, string, string][] = [
      [
        'LockTableName',
        this.lockTable.tableName,
        `Fencepost ${this.name}: the lock table (its epochs are the fencing tokens; bump-epochs after a restore)`,
      ],
      ['JobTableName', this.jobTable.tableName, `Fencepost ${this.name}: the job table (job rows, chunk fences, the index of claimed rows)`],
      [
        'StateMachineArn',
        this.stateMachine.stateMachineArn,
        `Fencepost ${this.name}: the job's state machine; start it with {"jobDate":"YYYY-MM-DD"}`,
      ],
      ['AlarmTopicArn', this.alarmTopic.topicArn, `Fencepost ${this.name}: the topic every alarm of the job notifies`],
      ['DashboardName', this.alarms.dashboard.dashboardName, `Fencepost ${this.name}: the job's dashboard`],
    ];
    if (this.manifestBucket) {
      outputs.push([
        'ManifestBucketName',
        this.manifestBucket.bucketName,
        `Fencepost ${this.name}: the bucket of the job's manifests and chunk objects`,
      ]);
    }
    for (const [id, value, description] of outputs) new CfnOutput(this, id, { value, description }).overrideLogicalId(`${job}${id}`);
  }

  /** The job's state machine: start it with `{ "jobDate": "YYYY-MM-DD" }` to start a run by hand. */
  get stateMachine(): sfn.StateMachine {
    return this.workflow.stateMachine;
  }
}

/**
 * The billing stack's configuration: one CDK context key, `fencepost`, read and validated once. Every problem is
 * collected and thrown as one ConfigError, so a bad cdk.json is fixed in one pass and nothing is synthesized
 * from it (STYLE 7). The job's settings go through FencedJob's own checks (fencedJobProblems, which uses the
 * core's lease checks), so the CLI, a FencedJob and the stack refuse exactly the same values; the night's size
 * (invoices, chunkSize) and the chunk's time are billing's own.
 */
import { Duration } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ConfigError } from '../../lib/core/internal';
import { FENCED_JOB_DEFAULTS, fencedJobProblems, type FencedJobSettings } from '../../lib/constructs/internal';
import { DEFAULTS } from './settings';

/** The context key that holds every setting below (cdk.json `context.fencepost`). */
export const CONTEXT_KEY = 'fencepost';

/** The settings of the billing job, as cdk.json names them. */
export interface StackConfig {
  /** How long a lease lasts without renewal. @default 10000 */
  readonly leaseMs: number;
  /** How often the holder renews; at most leaseMs / 3, so two renewals can fail before the lease runs out. @default 3000 */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin: the margin covers clock rate error and a late act. @default 2000 */
  readonly marginMs: number;
  /** Invoices in one night. @default 50000 */
  readonly invoices: number;
  /** Invoices per chunk (one Lambda invocation each). @default 5000 (10 chunks of 5,000) */
  readonly chunkSize: number;
  /** Chunks the workflow runs at once: 1..40 inline, 1..10,000 as a Distributed Map. @default 1 */
  readonly chunkConcurrency: number;
  /**
   * Nights of more chunks than this run them as a Distributed Map (a child execution per chunk). 0: always
   * distributed. @default 500 (the worst-case history of 500 inline chunks at the default lease and claim budget is
   * about 17,100 events; see lib/constructs/chunk-plan.ts chunkMapPlan)
   */
  readonly distributedMapAboveChunks: number;
  /** Leases a claimant waits on a live holder before it gives up. @default 30 */
  readonly claimBudget: number;
  /** EventBridge Scheduler expression for the nightly start, `cron(...)` or `rate(...)`. @default 'cron(30 1 * * ? *)' */
  readonly scheduleExpression: string;
  /** IANA time zone the schedule (and the billing deadline) is read in. @default 'UTC' */
  readonly scheduleTimeZone: string;
  /** Alarm when a Lambda's estimated clock offset exceeds this; must stay below marginMs. @default 500 */
  readonly clockOffsetAlarmMs: number;
  /** Alarm when this many fenced writes are refused in 5 minutes. @default 1 (any rejection) */
  readonly fencedRejectionsAlarmThreshold: number;
  /** Alarm when a table sees more ConditionalCheckFailedRequests than this in 5 minutes. @default 40 */
  readonly conditionalCheckFailedAlarmThreshold: number;
  /** Hour of the day (0..23, in scheduleTimeZone) by which the night must be DONE. @default 5 */
  readonly billingDeadlineHour: number;
  /** Where alarm notifications are e-mailed. @default - no subscription; subscribe to the topic yourself */
  readonly alarmEmail?: string;
  /** How often the orphan sweeper runs (Scheduler's finest rate is one minute). @default 'rate(1 minute)' */
  readonly sweeperScheduleExpression: string;
  /** Above this share of claimed rows looking dead at once, the sweeper re-queues none (a storm). @default 0.5 */
  readonly sweeperStormShare: number;
  /** A storm needs at least this many dead-looking rows. @default 3 */
  readonly sweeperStormMinimum: number;
  /** Re-queues per sweep at most. @default 10 */
  readonly sweeperMaxRequeues: number;
  /**
   * The invoice table's warm throughput as deployed, in write units per second: the record the synth never goes
   * below, because DynamoDB cannot lower a table's warm throughput once raised. Record here the value a deploy raised
   * it to (the synth warns with the number). 4,000 to 40,000 (a new on-demand table's to the table quota).
   * @default 4000 (a new on-demand table's: never warmed)
   */
  readonly invoiceWarmWriteUnits: number;
  /** Re-queues of one night before the sweeper gives it up. @default 5 */
  readonly sweeperMaxRequeuesPerRun: number;
}

/** What a new on-demand table sustains before it is warmed: 4,000 writes a second (AWS, docs/PERFORMANCE.md D9). */
export const NEW_ON_DEMAND_WRITE_UNITS = 4_000;

/** FencedJob's defaults with billing's night (lib/core/config.ts DEFAULTS); cdk.json repeats them so they are visible. */
export const STACK_DEFAULTS: StackConfig = {
  leaseMs: FENCED_JOB_DEFAULTS.leaseMs,
  renewMs: FENCED_JOB_DEFAULTS.renewMs,
  marginMs: FENCED_JOB_DEFAULTS.marginMs,
  invoices: DEFAULTS.invoices,
  chunkSize: DEFAULTS.chunkSize,
  chunkConcurrency: FENCED_JOB_DEFAULTS.chunkConcurrency,
  distributedMapAboveChunks: FENCED_JOB_DEFAULTS.distributedMapAboveChunks,
  claimBudget: FENCED_JOB_DEFAULTS.claimBudget,
  scheduleExpression: FENCED_JOB_DEFAULTS.scheduleExpression,
  scheduleTimeZone: FENCED_JOB_DEFAULTS.scheduleTimeZone,
  clockOffsetAlarmMs: FENCED_JOB_DEFAULTS.clockOffsetAlarmMs,
  fencedRejectionsAlarmThreshold: FENCED_JOB_DEFAULTS.fencedRejectionsAlarmThreshold,
  conditionalCheckFailedAlarmThreshold: FENCED_JOB_DEFAULTS.conditionalCheckFailedAlarmThreshold,
  billingDeadlineHour: FENCED_JOB_DEFAULTS.deadlineHour,
  sweeperScheduleExpression: 'rate(1 minute)', // billing's cdk.json sweeps every minute; FencedJob's own default sweeps its window only
  sweeperStormShare: FENCED_JOB_DEFAULTS.sweeperStormShare,
  sweeperStormMinimum: FENCED_JOB_DEFAULTS.sweeperStormMinimum,
  sweeperMaxRequeues: FENCED_JOB_DEFAULTS.sweeperMaxRequeues,
  invoiceWarmWriteUnits: NEW_ON_DEMAND_WRITE_UNITS,
  sweeperMaxRequeuesPerRun: FENCED_JOB_DEFAULTS.sweeperMaxRequeuesPerRun,
};

/**
 * The billing chunk function's timeout. A chunk is 51 transactions (5,000 invoices, 99 Puts each) plus its object and
 * a manifest commit: about 2.5 s (docs/PERFORMANCE.md). A minute leaves room for retries of every call, each bounded
 * by the SDK's request timeout (lib/core/aws/clients.ts awsClients). Longer would only let a stuck chunk keep renewing its
 * lease (the heartbeat runs beside the work) while writing nothing, holding the night from a new holder.
 */
export const CHUNK_TIMEOUT = Duration.minutes(1);

/**
 * The chunk-time assumption: one fenced transaction (1 check + 99 Puts) takes ~50 ms (DynamoDB Local on the 2-core
 * development machine: 510 in 23.95 s, docs/PERFORMANCE.md bench 8; AWS is expected to be faster), and the tail
 * (chunk object, manifest commit, progress update) ~50 ms (measured 29–45 ms). A chunk must fit in half its
 * function's timeout: the other half is for the SDK's retries of slow calls (lib/core/aws/clients.ts REQUEST_TIMEOUT_MS).
 */
export const CHUNK_TIME = { msPerTransaction: 50, tailMs: 50, putsPerTransaction: 99, shareOfTimeout: 0.5 } as const;

/**
 * Write request units per item in a transactional write of an item up to 1 KB: twice a plain write's (AWS, "Capacity
 * unit consumption for transactions"; an invoice item is under 100 bytes, bench 9).
 */
export const TRANSACTIONAL_WRU_PER_ITEM = 2;

/**
 * The most write request units a second an on-demand table takes by default: the account's table-level throughput
 * quota, 40,000 ("your on-demand throughput rate is bounded by 40,000 table-level read and write throughput AWS
 * service quota", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html).
 * A table can be pre-warmed up to that quota and no further
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html): a larger warm throughput
 * cannot be deployed.
 */
export const ON_DEMAND_TABLE_WRITE_QUOTA = 40_000;

/** The invoice table's warm throughput for a configuration, and why. */
export interface InvoiceWarmThroughput {
  /** WriteUnitsPerSecond for the table; undefined: a new table's 4,000 suffice and none was recorded above it. */
  readonly writeUnits: number | undefined;
  /** The night's peak by the chunk-time model (invoiceWritePeak). */
  readonly peak: number;
  /** The peak is above the table quota: the table is warmed to the quota, and the night's writes above it are throttled. */
  readonly aboveQuota: boolean;
  /** The template raises the table above its recorded invoiceWarmWriteUnits: record writeUnits after the deploy. */
  readonly aboveRecord: boolean;
}

/**
 * The invoice table's warm throughput: the night's peak, capped at the table quota, and never less than the recorded
 * invoiceWarmWriteUnits. Warm throughput can only be raised (warm-throughput.html: once increased it cannot be
 * decreased), and the synth cannot read what the deployed table has: the record in cdk.json is the floor, and the
 * synth says when a deploy will raise the table above it, so that the new value is recorded before a later change
 * (fewer chunks at once) would ask less.
 */
export function invoiceWarmThroughput(
  c: Pick<StackConfig, 'invoices' | 'chunkSize' | 'chunkConcurrency' | 'invoiceWarmWriteUnits'>,
): InvoiceWarmThroughput {
  const peak = invoiceWritePeak(c);
  const needed = Math.min(peak, ON_DEMAND_TABLE_WRITE_QUOTA);
  const units = Math.max(needed, c.invoiceWarmWriteUnits);
  return {
    writeUnits: units > NEW_ON_DEMAND_WRITE_UNITS ? units : undefined,
    peak,
    aboveQuota: peak > ON_DEMAND_TABLE_WRITE_QUOTA,
    aboveRecord: units > c.invoiceWarmWriteUnits,
  };
}

const digits = (n: number) => String(Math.max(0, Math.floor(n))).length;

/** A billing night's chunks: their count, the estimated time of one, and the largest output of one. */
export interface BillingChunks {
  readonly chunks: number;
  /** Estimated duration of one chunk (CHUNK_TIME). */
  readonly chunkMs: number;
  /** `{"chunk":N,"recorded":S,"alreadyRecorded":S,"transactions":T}` (apps/billing/lambda/chunk.ts) at its widest. */
  readonly chunkOutputBytes: number;
}

/** The chunks of a night of `invoices` in chunks of `chunkSize` (both positive integers). */
export function billingChunks(c: Pick<StackConfig, 'invoices' | 'chunkSize'>): BillingChunks {
  const chunks = Math.ceil(c.invoices / c.chunkSize);
  const transactions = Math.ceil(c.chunkSize / CHUNK_TIME.putsPerTransaction);
  return {
    chunks,
    chunkMs: transactions * CHUNK_TIME.msPerTransaction + CHUNK_TIME.tailMs,
    chunkOutputBytes: 57 + digits(chunks - 1) + 2 * digits(c.chunkSize) + digits(transactions),
  };
}

/**
 * The invoice table's peak write rate in WRU/s, by the chunk-time model: every chunk running at once commits one
 * transaction of putsPerTransaction invoices every msPerTransaction, each invoice TRANSACTIONAL_WRU_PER_ITEM.
 */
export function invoiceWritePeak(c: Pick<StackConfig, 'invoices' | 'chunkSize' | 'chunkConcurrency'>): number {
  const running = Math.min(c.chunkConcurrency, billingChunks(c).chunks);
  return Math.ceil((running * CHUNK_TIME.putsPerTransaction * TRANSACTIONAL_WRU_PER_ITEM * 1000) / CHUNK_TIME.msPerTransaction);
}

/** The billing job's FencedJob settings, from a validated configuration. */
export function jobSettings(c: StackConfig): FencedJobSettings {
  return { ...plainSettings(c), ...billingChunks(c) };
}

/** The settings that do not depend on the night's size. */
function plainSettings(c: StackConfig): Omit<FencedJobSettings, keyof BillingChunks> {
  return {
    chunkConcurrency: c.chunkConcurrency,
    distributedMapAboveChunks: c.distributedMapAboveChunks,
    leaseMs: c.leaseMs,
    renewMs: c.renewMs,
    marginMs: c.marginMs,
    claimBudget: c.claimBudget,
    scheduleExpression: c.scheduleExpression,
    scheduleTimeZone: c.scheduleTimeZone,
    deadlineHour: c.billingDeadlineHour,
    clockOffsetAlarmMs: c.clockOffsetAlarmMs,
    fencedRejectionsAlarmThreshold: c.fencedRejectionsAlarmThreshold,
    conditionalCheckFailedAlarmThreshold: c.conditionalCheckFailedAlarmThreshold,
    alarmEmail: c.alarmEmail,
    sweeperScheduleExpression: c.sweeperScheduleExpression,
    sweeperStormShare: c.sweeperStormShare,
    sweeperStormMinimum: c.sweeperStormMinimum,
    sweeperMaxRequeues: c.sweeperMaxRequeues,
    sweeperMaxRequeuesPerRun: c.sweeperMaxRequeuesPerRun,
  };
}

const NUMBER_KEYS = [
  'leaseMs',
  'renewMs',
  'marginMs',
  'invoices',
  'chunkSize',
  'chunkConcurrency',
  'distributedMapAboveChunks',
  'claimBudget',
  'clockOffsetAlarmMs',
  'fencedRejectionsAlarmThreshold',
  'conditionalCheckFailedAlarmThreshold',
  'billingDeadlineHour',
  'sweeperStormShare',
  'sweeperStormMinimum',
  'sweeperMaxRequeues',
  'invoiceWarmWriteUnits',
  'sweeperMaxRequeuesPerRun',
] as const;
const STRING_KEYS = ['scheduleExpression', 'scheduleTimeZone', 'alarmEmail', 'sweeperScheduleExpression'] as const;
const KNOWN_KEYS: ReadonlySet<string> = new Set([...NUMBER_KEYS, ...STRING_KEYS]);

/** Reads `context.fencepost` from the app (cdk.json, or `-c fencepost='{...}'`) and validates it. */
export function readStackConfig(scope: Construct): StackConfig {
  return parseStackConfig(scope.node.tryGetContext(CONTEXT_KEY));
}

/** Validates raw context (an object, a JSON string, or undefined for all defaults); throws one ConfigError. */
export function parseStackConfig(raw: unknown): StackConfig {
  const problems: string[] = [];
  const given = asObject(raw, problems);
  for (const key of Object.keys(given)) {
    if (!KNOWN_KEYS.has(key)) problems.push(`${CONTEXT_KEY}.${key} is not a setting (known: ${[...KNOWN_KEYS].join(', ')})`);
  }
  for (const key of NUMBER_KEYS) {
    if (key in given && typeof given[key] !== 'number') problems.push(`${key} must be a number, got ${JSON.stringify(given[key])}`);
  }
  for (const key of STRING_KEYS) {
    if (key in given && typeof given[key] !== 'string') problems.push(`${key} must be a string, got ${JSON.stringify(given[key])}`);
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const c = { ...STACK_DEFAULTS, ...given } as StackConfig;
  // The night's size is billing's own; the job's chunks follow from it once it is valid.
  const sized = (['invoices', 'chunkSize'] as const).filter((key) => {
    if (Number.isSafeInteger(c[key]) && c[key] >= 1) return true;
    problems.push(`${key} must be a positive integer, got ${c[key]}`);
    return false;
  });
  const night = sized.length === 2 ? billingChunks(c) : undefined;
  const budgetMs = CHUNK_TIMEOUT.toMilliseconds() * CHUNK_TIME.shareOfTimeout;
  if (night && night.chunkMs > budgetMs) {
    const maxSize = Math.floor((budgetMs - CHUNK_TIME.tailMs) / CHUNK_TIME.msPerTransaction) * CHUNK_TIME.putsPerTransaction;
    problems.push(
      `chunkSize (${c.chunkSize}) makes a chunk of about ${(night.chunkMs / 1000).toFixed(1)} s (${CHUNK_TIME.msPerTransaction} ms per transaction of ${CHUNK_TIME.putsPerTransaction} invoices), more than half the chunk function's ${CHUNK_TIMEOUT.toSeconds()} s timeout: at most ${maxSize}`,
    );
  }
  const warm = c.invoiceWarmWriteUnits;
  if (!Number.isSafeInteger(warm) || warm < NEW_ON_DEMAND_WRITE_UNITS || warm > ON_DEMAND_TABLE_WRITE_QUOTA) {
    problems.push(
      `invoiceWarmWriteUnits must be a whole number of write units from ${NEW_ON_DEMAND_WRITE_UNITS} to ${ON_DEMAND_TABLE_WRITE_QUOTA}, got ${warm}: a new on-demand table has ${NEW_ON_DEMAND_WRITE_UNITS}, and a table cannot be warmed past the on-demand table quota (${ON_DEMAND_TABLE_WRITE_QUOTA})`,
    );
  }
  // Without a valid night the chunks are unknown: the job's checks skip what depends on them.
  const chunks = night ?? { chunks: undefined, chunkOutputBytes: FENCED_JOB_DEFAULTS.chunkOutputBytes };
  const wording = night && { subject: `chunkSize (${c.chunkSize}) makes ${night.chunks} chunks`, fewer: 'raise chunkSize' };
  problems.push(...fencedJobProblems({ ...plainSettings(c), ...chunks }, wording).map((p) => p.replace(/^deadlineHour\b/, 'billingDeadlineHour')));
  if (problems.length > 0) throw new ConfigError(problems);
  return c;
}

function asObject(raw: unknown, problems: string[]): Record<string, unknown> {
  if (raw === undefined) return {};
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      problems.push(`${CONTEXT_KEY} must be an object (or its JSON), got ${JSON.stringify(raw)}`);
      return {};
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    problems.push(`${CONTEXT_KEY} must be an object, got ${JSON.stringify(value)}`);
    return {};
  }
  return value as Record<string, unknown>;
}

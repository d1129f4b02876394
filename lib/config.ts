/**
 * The stack's configuration: one CDK context key, `fencepost`, read and validated once. Every problem is
 * collected and thrown as one ConfigError, so a bad cdk.json is fixed in one pass and nothing is synthesized
 * from it (STYLE 7). The lease and night settings go through the core's own checks (core/config.ts), so
 * the CLI and the stack refuse exactly the same values.
 */
import type { Construct } from 'constructs';
import { ConfigError } from '../core/errors';
import { DEFAULTS, validateBillingConfig } from '../core/config';
import { SFN_QUOTAS, chunkMapProblems, type WorkflowSettings } from './billing-workflow';

/** The context key that holds every setting below (cdk.json `context.fencepost`). */
export const CONTEXT_KEY = 'fencepost';

export interface StackConfig {
  /** How long a lease lasts without renewal. @default 10000 (Part 0) */
  readonly leaseMs: number;
  /** How often the holder renews; at most leaseMs / 3. @default 3000 (Part 0) */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin. @default 2000 (Part 2) */
  readonly marginMs: number;
  /** Invoices in one night. @default 50000 (Part 0) */
  readonly invoices: number;
  /** Invoices per chunk (one Lambda invocation each). @default 5000 (Part 0: 10 chunks of 5,000) */
  readonly chunkSize: number;
  /**
   * Chunks the workflow runs at once (the Map's MaxConcurrency): 1..40 while the night's chunks run inline,
   * 1..10,000 when they run as a Distributed Map. @default 1
   */
  readonly chunkConcurrency: number;
  /**
   * Nights of more chunks than this run them as a Distributed Map (a child execution per chunk), not inline in the
   * billing execution, whose history (25,000 events) and state (256 KiB) would otherwise grow with the night.
   * 0: always distributed. @default 500 (the worst-case history of 500 inline chunks at the default lease and
   * claim budget is about 17,100 events; see chunkMapPlan)
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
}

/** The reference text's numbers (ARCHITECTURE.md section 8); cdk.json repeats them so they are visible. */
export const STACK_DEFAULTS: StackConfig = {
  leaseMs: DEFAULTS.leaseMs,
  renewMs: DEFAULTS.renewMs,
  marginMs: DEFAULTS.marginMs,
  invoices: DEFAULTS.invoices,
  chunkSize: DEFAULTS.chunkSize,
  chunkConcurrency: 1,
  distributedMapAboveChunks: 500,
  claimBudget: DEFAULTS.claimBudget,
  scheduleExpression: 'cron(30 1 * * ? *)',
  scheduleTimeZone: 'UTC',
  clockOffsetAlarmMs: 500,
  fencedRejectionsAlarmThreshold: 1,
  // One waiting claimant claims only after one rvn stayed unchanged a full lease, so it fails at most one claim per
  // lease it waits: 300 s / 10 s + 1 = 31 in 5 minutes
  // (and claimBudget + 1 = 31 in all). Above 40 means more than one claimant, or renewals failing en masse.
  conditionalCheckFailedAlarmThreshold: 40,
  billingDeadlineHour: 5,
  sweeperScheduleExpression: 'rate(1 minute)',
  sweeperStormShare: 0.5,
  sweeperStormMinimum: 3,
  sweeperMaxRequeues: 10,
};

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
] as const;
const STRING_KEYS = ['scheduleExpression', 'scheduleTimeZone', 'alarmEmail', 'sweeperScheduleExpression'] as const;
const KNOWN_KEYS: ReadonlySet<string> = new Set([...NUMBER_KEYS, ...STRING_KEYS]);

/** The core reports problems under the CLI's flag names; say them as the context keys the user wrote. */
const CLI_TO_CONTEXT: Record<string, string> = {
  'lease-ms': 'leaseMs',
  'renew-ms': 'renewMs',
  'margin-ms': 'marginMs',
  'claim-budget': 'claimBudget',
  'chunk-size': 'chunkSize',
  invoices: 'invoices',
};

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
  problems.push(...coreProblems(c));
  // How the chunks run on AWS (Map mode, concurrency, chunk time, history, payload): the figures it reads must be
  // valid (the core has already said which are not).
  const planned = [c.invoices, c.chunkSize, c.leaseMs, c.claimBudget].every((n) => Number.isSafeInteger(n) && n >= 1);
  if (planned) problems.push(...chunkMapProblems(c));
  else if (!Number.isSafeInteger(c.chunkConcurrency) || c.chunkConcurrency < 1 || c.chunkConcurrency > SFN_QUOTAS.distributedConcurrency) {
    problems.push(`chunkConcurrency must be an integer from 1 to ${SFN_QUOTAS.distributedConcurrency}, got ${c.chunkConcurrency}`);
  }
  const problem = scheduleProblem(c.scheduleExpression);
  if (problem) problems.push(problem);
  if (!isTimeZone(c.scheduleTimeZone))
    problems.push(`scheduleTimeZone must be an IANA time zone such as UTC or Europe/Paris, got ${JSON.stringify(c.scheduleTimeZone)}`);
  if (!Number.isSafeInteger(c.clockOffsetAlarmMs) || c.clockOffsetAlarmMs < 1) {
    problems.push(`clockOffsetAlarmMs must be a positive integer, got ${c.clockOffsetAlarmMs}`);
  } else if (c.clockOffsetAlarmMs >= c.marginMs) {
    // The margin absorbs clock error (Part 2, Part 3); an alarm at or past it would fire only after the margin is gone.
    problems.push(
      `clockOffsetAlarmMs (${c.clockOffsetAlarmMs}) must be less than marginMs (${c.marginMs}): the alarm must fire before clock error eats the margin`,
    );
  }
  for (const key of ['fencedRejectionsAlarmThreshold', 'conditionalCheckFailedAlarmThreshold'] as const) {
    if (!Number.isSafeInteger(c[key]) || c[key] < 1) problems.push(`${key} must be a positive integer, got ${c[key]}`);
  }
  if (!Number.isSafeInteger(c.billingDeadlineHour) || c.billingDeadlineHour < 0 || c.billingDeadlineHour > 23) {
    problems.push(`billingDeadlineHour must be an hour of the day from 0 to 23, got ${c.billingDeadlineHour}`);
  } else if (!problem) {
    const gap = deadlineGapMinutes(c.scheduleExpression, c.billingDeadlineHour);
    if (gap !== undefined && gap < 60) {
      problems.push(
        `billingDeadlineHour (${c.billingDeadlineHour}:00) must be at least an hour after the scheduled start (${gap} minutes is too little for a night's run)`,
      );
    }
  }
  const sweepProblem = scheduleProblem(c.sweeperScheduleExpression);
  if (sweepProblem) problems.push(sweepProblem.replace('scheduleExpression', 'sweeperScheduleExpression'));
  if (!(c.sweeperStormShare > 0 && c.sweeperStormShare <= 1)) problems.push(`sweeperStormShare must be in (0, 1], got ${c.sweeperStormShare}`);
  for (const key of ['sweeperStormMinimum', 'sweeperMaxRequeues'] as const) {
    if (!Number.isSafeInteger(c[key]) || c[key] < 1) problems.push(`${key} must be a positive integer, got ${c[key]}`);
  }
  if (c.alarmEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(c.alarmEmail)) {
    problems.push(`alarmEmail must be an e-mail address, got ${JSON.stringify(c.alarmEmail)}`);
  }
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

/** The core's lease and night checks (client-go's relation checks, Part 2/3), reworded to the context keys. */
function coreProblems(c: StackConfig): string[] {
  try {
    validateBillingConfig({
      leaseMs: c.leaseMs,
      renewMs: c.renewMs,
      marginMs: c.marginMs,
      claimBudget: c.claimBudget,
      invoices: c.invoices,
      chunkSize: c.chunkSize,
    });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => p.replace(/\b[a-z]+(?:-[a-z]+)*\b/g, (word) => CLI_TO_CONTEXT[word] ?? word));
  }
}

/** EventBridge Scheduler's recurring forms: cron(6 fields) or rate(N unit). `at(...)` is one-off, not nightly. */
function scheduleProblem(expression: string): string | undefined {
  const cron = /^cron\((.+)\)$/.exec(expression);
  if (cron) {
    const fields = cron[1].trim().split(/\s+/);
    return fields.length === 6
      ? undefined
      : `scheduleExpression cron(...) needs 6 fields (minutes hours day-of-month month day-of-week year), got ${fields.length} in ${expression}`;
  }
  if (/^rate\([1-9]\d* (minute|minutes|hour|hours|day|days)\)$/.test(expression)) return undefined;
  return `scheduleExpression must be cron(...) or rate(N unit), got ${JSON.stringify(expression)}`;
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

/** The settings the billing workflow takes (its `WorkflowSettings`). */
export function workflowSettings(c: StackConfig): WorkflowSettings {
  return {
    leaseMs: c.leaseMs,
    renewMs: c.renewMs,
    marginMs: c.marginMs,
    invoices: c.invoices,
    chunkSize: c.chunkSize,
    chunkConcurrency: c.chunkConcurrency,
    distributedMapAboveChunks: c.distributedMapAboveChunks,
    claimBudget: c.claimBudget,
    scheduleTimeZone: c.scheduleTimeZone,
  };
}

/**
 * Configuration, validated once, collecting every problem into one ConfigError (so bad input is refused
 * before anything is written). Defaults are the reference text's numbers.
 */
import { ConfigError } from './errors';

/** A lease's timing: every duration is timed on the holder's own monotonic clock. */
export interface LeaseConfig {
  /** How long a lease lasts without renewal. @default 10000 (a 10-second lease) */
  readonly leaseMs: number;
  /** How often the holder renews. @default 3000 (renewed every 3 seconds; at most lease/3) */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin. @default 2000 */
  readonly marginMs: number;
  /** How many leases a claimant waits on a live holder before giving up. @default 30 */
  readonly claimBudget: number;
}

/** The lease's defaults: a 10 s lease renewed every 3 s, a 2 s margin, a claim budget of 30 leases. */
export const LEASE_DEFAULTS: LeaseConfig = {
  leaseMs: 10_000,
  renewMs: 3_000,
  marginMs: 2_000,
  claimBudget: 30,
};

/** DynamoDB's limit is 100 actions per transaction; one is the ConditionCheck on the fence. */
export const MAX_PUTS_PER_TRANSACTION = 99;

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * A problem description for a bad job date, or undefined. Rejects 2026-02-30 as well as 2026-9-28.
 * @param date - the value to check, from any input
 */
export function dateProblem(date: unknown): string | undefined {
  if (typeof date !== 'string' || !DATE_RE.test(date)) return `date must be YYYY-MM-DD, got ${JSON.stringify(date)}`;
  const [y, m, d] = date.split('-').map(Number);
  const parsed = new Date(Date.UTC(y, m - 1, d));
  if (parsed.getUTCFullYear() !== y || parsed.getUTCMonth() !== m - 1 || parsed.getUTCDate() !== d) {
    return `date ${date} is not a calendar date`;
  }
  return undefined;
}

/**
 * The date, if it is a calendar date in YYYY-MM-DD form (a run's date: the keys of the run are built from it).
 * @param date - the value to check, from any input
 * @returns the date, typed
 * @throws ConfigError naming the problem otherwise (2026-02-30 is refused as well as 2026-9-28)
 */
export function validateDate(date: unknown): string {
  const problem = dateProblem(date);
  if (problem) throw new ConfigError([problem]);
  return date as string;
}

/**
 * The calendar date YYYY-MM-DD of the instant `at` in a time zone: a run's date, read in its schedule's zone
 * (lib/lambda/prepare.ts for a scheduled start, `fencepost run` for today).
 */
export function dateIn(at: Date, timeZone: string): string {
  let format = dateFormats.get(timeZone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    dateFormats.set(timeZone, format);
  }
  return format.format(at);
}

/** One formatter per time zone: making one costs many times what formatting a date does. */
const dateFormats = new Map<string, Intl.DateTimeFormat>();

function positiveInteger(problems: string[], name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) problems.push(`${name} must be a positive integer, got ${value}`);
}

/**
 * The relation checks client-go makes for its lease settings, in our words: every problem, or none. Each problem names
 * the settings as LeaseConfig does (leaseMs, renewMs, …); a layer with words of its own for them (the command's
 * flags, the functions' environment variables, FencedJob's props) says them in its words with `inWords`.
 * @returns one sentence per problem; empty when the settings are sound
 */
export function leaseProblems(c: LeaseConfig): string[] {
  const problems: string[] = [];
  positiveInteger(problems, 'leaseMs', c.leaseMs);
  positiveInteger(problems, 'renewMs', c.renewMs);
  positiveInteger(problems, 'claimBudget', c.claimBudget);
  if (!Number.isSafeInteger(c.marginMs) || c.marginMs < 0) problems.push(`marginMs must be a non-negative integer, got ${c.marginMs}`);
  if (problems.length === 0) {
    if (c.renewMs * 3 > c.leaseMs)
      problems.push(`renewMs (${c.renewMs}) must be at most leaseMs / 3 (${Math.floor(c.leaseMs / 3)}): the holder renews every lease/3`);
    if (c.marginMs >= c.leaseMs) problems.push(`marginMs (${c.marginMs}) must be less than leaseMs (${c.leaseMs})`);
    else if (c.leaseMs - c.marginMs <= c.renewMs) {
      problems.push(
        `leaseMs - marginMs (${c.leaseMs - c.marginMs}) must exceed renewMs (${c.renewMs}), or the stop time passes before the next renewal`,
      );
    }
  }
  return problems;
}

/**
 * A problem said in a layer's own words: every setting name in it (a whole word, such as `leaseMs`) that `words` has
 * is replaced by its word there (`--lease-ms`, `leaseDuration`, `FENCEPOST_LEASE_MS`).
 * @param problem - a problem that names settings as their config objects do
 * @param words - the layer's word for each setting it has one for
 */
export function inWords(problem: string, words: Readonly<Record<string, string>>): string {
  return problem.replace(/\b[a-z][A-Za-z]*\b/g, (name) => (Object.hasOwn(words, name) ? words[name] : name));
}

/**
 * Fill in the lease defaults and check the settings once, before anything is written.
 * @param input - the settings to override; absent (or undefined) fields take `LEASE_DEFAULTS`
 * @returns the complete settings
 * @throws ConfigError listing every problem at once
 */
export function validateLeaseConfig(input: Partial<LeaseConfig> = {}): LeaseConfig {
  const c: LeaseConfig = { ...LEASE_DEFAULTS, ...stripUndefined(input) };
  const problems = leaseProblems(c);
  if (problems.length > 0) throw new ConfigError(problems);
  return c;
}

/** The fields of `o` that are set: what a spread of defaults and `o` should take from it. */
export function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The context key the local runner (lib/local/workflow.ts) builds a job's app with. A local run has no Lambda cold start
 * and no Map Run, and the tests and the fault suite run short leases there on purpose (their lease losses are what
 * they check), so the constructs do not refuse a lease shorter than the worst gap between renewals in AWS
 * (lib/constructs/renewal-gap.ts). The template is the same; only that refusal is skipped.
 */
export const LOCAL_RUN_CONTEXT = 'fencepost:localRun';

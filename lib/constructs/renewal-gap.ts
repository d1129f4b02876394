/**
 * The worst gap between one holder's renewals in a fenced job's workflow (docs/DESIGN.md "The gap between
 * renewals"), and the rule that the lease covers it. Every task that acts for the holder (RaiseFence, each chunk,
 * Complete) renews first and then every renewInterval while it runs, but nothing renews between two tasks: a
 * task's last renewal, the retry wait before the next attempt, a Lambda's start and a Distributed Map Run's start
 * all fall between two renewals. A waiting claimant (a duplicate start) that sees the rvn unchanged for a lease
 * claims: a gap as long as the lease hands the run to it, and the holder ends Lost mid-run.
 *
 * The retry waits are read from the Retry blocks the workflow generates (ASL fields, as in the template).
 */

/** The context key the local runner synthesizes with (lib/core/config.ts LOCAL_RUN_CONTEXT): FencedJob skips the rule then. */
export { LOCAL_RUN_CONTEXT } from '../core/config';

/** One ASL retrier, as the template holds it (the fields that time its waits). */
export interface Retrier {
  readonly ErrorEquals: readonly string[];
  readonly IntervalSeconds?: number;
  readonly BackoffRate?: number;
  readonly MaxAttempts?: number;
  readonly MaxDelaySeconds?: number;
}

/**
 * Start-up costs that sit in a gap, in ms. A Lambda's cold start: AWS's Lambda guide ("Understanding the Lambda
 * execution environment lifecycle") gives "from under 100 ms to over 1 second"; the Step Functions transition and
 * the store's round trip are within it. A Distributed Map Run's start-up before its first child execution, and its
 * wind-down after the last before Complete: AWS publishes no figure; Map Runs are reported to take several seconds
 * around their children, taken here as 5 s.
 */
export const START_UP_MS = { lambda: 1_000, mapRun: 5_000 } as const;

/** ASL's defaults for a retrier's fields. */
const ASL_DEFAULTS = { IntervalSeconds: 1, BackoffRate: 2, MaxAttempts: 3 } as const;

/** The longest single wait a retrier can schedule: its last retry's, Interval × Rate^(MaxAttempts − 1), up to MaxDelaySeconds. */
function longestWaitMs(r: Retrier): number {
  const attempts = r.MaxAttempts ?? ASL_DEFAULTS.MaxAttempts;
  if (attempts <= 0) return 0;
  const full = (r.IntervalSeconds ?? ASL_DEFAULTS.IntervalSeconds) * (r.BackoffRate ?? ASL_DEFAULTS.BackoffRate) ** (attempts - 1);
  return Math.round(Math.min(full, r.MaxDelaySeconds ?? Infinity) * 1000);
}

/** The worst gap between two renewals of one holder, and what it is made of (all in ms). */
export interface RenewalGap {
  /** The sum. */
  readonly totalMs: number;
  /** A task's last renewal before it ended or died: it renews every renewInterval while it runs. */
  readonly renewMs: number;
  /** The longest wait the holder's tasks' Retry blocks schedule before one more attempt. */
  readonly retryWaitMs: number;
  /** The next attempt's Lambda start. */
  readonly lambdaStartMs: number;
  /** A Distributed Map Run's start-up (before the first chunk) or wind-down (before Complete); 0 inline. */
  readonly mapRunMs: number;
}

/**
 * The worst gap between one holder's renewals, with one failed attempt in it: the last renewal of a task that then
 * died (renewInterval before), the longest retry wait of any of the holder's tasks, a Lambda start, and, for a
 * Distributed Map, its Map Run's start-up. More failures in a row than one, each before its attempt renewed, is an
 * outage of Lambda or the lock table, which a lease is not meant to outlast (the fence keeps it safe).
 * @param holderRetriers - the Retry blocks of every task that acts for the holder, as generated
 */
export function worstRenewalGap(s: { readonly renewMs: number; readonly distributed: boolean }, holderRetriers: readonly Retrier[]): RenewalGap {
  const retryWaitMs = Math.max(0, ...holderRetriers.map(longestWaitMs));
  const mapRunMs = s.distributed ? START_UP_MS.mapRun : 0;
  const parts = { renewMs: s.renewMs, retryWaitMs, lambdaStartMs: START_UP_MS.lambda, mapRunMs };
  return { totalMs: parts.renewMs + parts.retryWaitMs + parts.lambdaStartMs + parts.mapRunMs, ...parts };
}

/**
 * The problem when lease − margin does not cover the worst gap (the stop-time rule's own allowance: a holder acts
 * only until sent_at + lease − margin), naming the settings and the numbers; undefined when it does.
 */
export function renewalGapProblem(s: { readonly leaseMs: number; readonly marginMs: number }, gap: RenewalGap): string | undefined {
  const covered = s.leaseMs - s.marginMs;
  if (covered >= gap.totalMs) return undefined;
  const parts = [
    `renewMs ${gap.renewMs} ms (a task's last renewal)`,
    `${gap.retryWaitMs} ms (the longest retry wait of the holder's tasks)`,
    `${gap.lambdaStartMs} ms (a Lambda cold start)`,
    ...(gap.mapRunMs > 0 ? [`${gap.mapRunMs} ms (the Distributed Map Run's start-up)`] : []),
  ];
  return (
    `leaseMs (${s.leaseMs}) - marginMs (${s.marginMs}) = ${covered} ms does not cover the worst gap between two renewals of the holder, ` +
    `${gap.totalMs} ms = ${parts.join(' + ')}: a waiting duplicate start would claim the run from a live holder; ` +
    `give a leaseMs of at least ${gap.totalMs + s.marginMs} ms (or a shorter renewMs)`
  );
}

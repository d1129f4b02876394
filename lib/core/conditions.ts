/**
 * Helpers shared by every store and the logic above them: deciding by REASON whether a failed write is worth sending
 * again (docs/DESIGN.md "Retry classification"), the one retry helper, and fresh rvns. Reading a DynamoDB failure's
 * item is the AWS stores' (lib/core/aws/conditions.ts).
 */
import { randomUUID } from 'node:crypto';

/** A fresh record version number: written by every claim, renewal and release. */
export function newRvn(): string {
  return randomUUID();
}

/** One entry of TransactionCanceledException.CancellationReasons, in the order of the request's TransactItems. */
export interface CancellationReason {
  /** ConditionalCheckFailed, TransactionConflict, ThrottlingError, …; 'None' (or absent) for an item that was fine. */
  readonly Code?: string;
  readonly Message?: string;
  /** The item as it was, in AttributeValue form, when the request asked for ALL_OLD on a failed condition. */
  readonly Item?: Record<string, unknown>;
}

/**
 * Reasons that say "the items were busy, not wrong": another transaction or write held one of our items
 * (TransactionConflict, even on an item we only ConditionCheck), or capacity ran short. Sending the same request
 * again can succeed. Everything else (ValidationError, ItemCollectionSizeLimitExceeded, ...) would fail again.
 */
const TRANSIENT_REASONS: ReadonlySet<string> = new Set(['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded']);

/**
 * What a cancelled transaction means, decided by its reasons, never by the exception's name or HTTP status (both
 * are TransactionCanceledException / 400 whatever the reason):
 *   condition  at least one ConditionalCheckFailed: the data decided. `failed` lists the positions; the caller
 *              reads them (the fence at 0 means fenced out; a Put means already recorded). A conflict elsewhere
 *              in the same answer does not make it worth resending unchanged.
 *   transient  every non-None reason is transient: send the same request again, after a backoff.
 *   permanent  anything else, including no reasons at all.
 */
export type Cancellation =
  { readonly kind: 'condition'; readonly failed: readonly number[] } | { readonly kind: 'transient' } | { readonly kind: 'permanent' };

/** Decide what a cancelled transaction means from its reasons (see Cancellation). */
export function classifyCancellation(reasons: readonly CancellationReason[] | undefined): Cancellation {
  const codes = (reasons ?? []).map((r) => r.Code ?? 'None');
  const failed = codes.flatMap((c, i) => (c === 'ConditionalCheckFailed' ? [i] : []));
  if (failed.length > 0) return { kind: 'condition', failed };
  const real = codes.filter((c) => c !== 'None');
  if (real.length > 0 && real.every((c) => TRANSIENT_REASONS.has(c))) return { kind: 'transient' };
  return { kind: 'permanent' };
}

/** The cancellation reasons of a TransactionCanceledException, or undefined for any other error. */
export function cancellationReasons(err: unknown): readonly CancellationReason[] | undefined {
  const e = err as { name?: string; CancellationReasons?: CancellationReason[] };
  return e?.name === 'TransactionCanceledException' ? (e.CancellationReasons ?? []) : undefined;
}

/**
 * Errors worth retrying: throttling, transient service errors, timeouts, dropped connections, a single-item write
 * that met an ongoing transaction (TransactionConflictException), and a cancelled transaction whose reasons are
 * all transient (classifyCancellation).
 */
export function isTransient(err: unknown): boolean {
  const e = err as { name?: string; code?: string; $retryable?: unknown; $metadata?: { httpStatusCode?: number } };
  const reasons = cancellationReasons(err);
  if (reasons !== undefined) return classifyCancellation(reasons).kind === 'transient';
  if (e?.$retryable) return true;
  const name = e?.name ?? '';
  if (
    /Throttl|ProvisionedThroughputExceeded|RequestLimitExceeded|InternalServerError|ServiceUnavailable|TransactionConflict|TransactionInProgress|TimeoutError|RequestTimeout/.test(
      name,
    )
  )
    return true;
  if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN'].includes(e?.code ?? '')) return true;
  const status = e?.$metadata?.httpStatusCode ?? 0;
  return status >= 500;
}

/** What a retry loop needs from outside, injected so tests are fast and deterministic. */
export interface Backoff {
  /** Wait, timed on the monotonic clock (Clock.sleep). */
  readonly sleep: (ms: number) => Promise<void>;
  /** Uniform in [0, 1): the jitter source. Default Math.random. */
  readonly random?: () => number;
}

/** The Backoff of a deps object: its clock's sleep and its jitter source (one definition for every caller). */
export function backoffOf(deps: { readonly clock: { sleep(ms: number): Promise<void> }; readonly random?: () => number }): Backoff {
  return { sleep: (ms) => deps.clock.sleep(ms), random: deps.random };
}

/** How a retry loop backs off: full jitter between 0 and min(cap, base * 2^retry). */
export interface BackoffPolicy {
  /** The first retry's ceiling, in milliseconds. */
  readonly baseMs: number;
  /** No wait is longer than this, in milliseconds. */
  readonly capMs: number;
  /** Retries after the first attempt. */
  readonly retries: number;
}

/** 25 ms doubling to at most 1 s, 8 retries: about 3 s of waiting at worst, well inside a lease. */
export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 25, capMs: 1000, retries: 8 };

/**
 * Exponential backoff with full jitter: a uniform wait in [0, min(cap, base * 2^retry)). Full jitter spreads the
 * writers that collided, so they do not collide again in lockstep (AWS Architecture Blog "Exponential Backoff And
 * Jitter"; AWS General Reference "Error retries and exponential backoff").
 */
export function fullJitterMs(retry: number, random: () => number, policy: Pick<BackoffPolicy, 'baseMs' | 'capMs'> = DEFAULT_BACKOFF): number {
  return random() * Math.min(policy.capMs, policy.baseMs * 2 ** retry);
}

/**
 * Run `attempt` until it succeeds, retrying only what `retryable` says (isTransient: DynamoDB's and S3's answers), with
 * full-jitter backoff. The attempt must be safe to send again (a conditional single-item write whose condition still
 * holds after it landed, or a whole transaction that was rolled back).
 */
export async function retryTransient<T>(
  backoff: Backoff,
  attempt: () => Promise<T>,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  retryable: (err: unknown) => boolean = isTransient,
): Promise<T> {
  const random = backoff.random ?? Math.random;
  for (let retry = 0; ; retry++) {
    try {
      return await attempt();
    } catch (err) {
      if (!retryable(err) || retry >= policy.retries) throw err;
      await backoff.sleep(fullJitterMs(retry, random, policy));
    }
  }
}

/**
 * What the in-memory stores share of DynamoDB's behaviour: errors named and shaped as the SDK shapes DynamoDB's (so
 * lib/core/conditions.ts isTransient and cancellationReasons read them the same way), and ClientRequestToken idempotency
 * (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
 */
import type { Clock } from '../core/clock';
import type { CancellationReason } from '../core/conditions';

/** An error named as DynamoDB names it, with the SDK's `$metadata` (a 400: the service answered, not a 5xx). */
export function dynamoError(name: string, message: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { name, $metadata: { httpStatusCode: 400 } }, extra);
}

/** TransactionCanceledException with a reason per action, in the request's order, as DynamoDB answers it. */
export function transactionCanceled(reasons: readonly CancellationReason[]): Error {
  const codes = reasons.map((r) => r.Code ?? 'None').join(', ');
  return dynamoError('TransactionCanceledException', `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes}]`, {
    CancellationReasons: reasons,
  });
}

/** How long DynamoDB keeps a ClientRequestToken after the first request that used it completed. */
const TOKEN_WINDOW_MS = 10 * 60_000;

/**
 * The ClientRequestTokens of one store: within 10 minutes (on the injected clock) of the success that used it, the
 * same token with the same request is that success replayed (nothing written again), with another request it is
 * IdempotentParameterMismatchException; while its first request is in flight it is TransactionInProgressException.
 * Only a success is remembered: a cancelled or failed request leaves its token free.
 */
export class RequestTokens {
  private readonly tokens = new Map<string, { readonly request: string; readonly completedAt?: number }>();

  constructor(private readonly clock: Clock) {}

  /**
   * @returns true when this request with this token already succeeded (answer ok, write nothing)
   * @throws IdempotentParameterMismatchException, TransactionInProgressException
   */
  replayed(token: string, request: string): boolean {
    const earlier = this.tokens.get(token);
    if (!earlier || (earlier.completedAt !== undefined && this.clock.monotonicMs() - earlier.completedAt >= TOKEN_WINDOW_MS)) return false;
    if (earlier.request !== request) throw dynamoError('IdempotentParameterMismatchException', 'the token was used with another request');
    if (earlier.completedAt === undefined) throw dynamoError('TransactionInProgressException', 'the transaction with this token is in flight');
    return true;
  }

  /** The request is in flight under its token. */
  begin(token: string, request: string): void {
    this.tokens.set(token, { request });
  }

  /** The request succeeded: its token answers it for 10 minutes from now. */
  succeeded(token: string, request: string): void {
    this.tokens.set(token, { request, completedAt: this.clock.monotonicMs() });
  }

  /** The request did not succeed: its token is free again. */
  failed(token: string): void {
    this.tokens.delete(token);
  }
}

/**
 * A deep copy of a stored item, as structuredClone makes it: what an item holds (strings, numbers, booleans, null, and
 * sets, lists and plain objects of them, keyed by strings) is copied here, at a fraction of structuredClone's cost (the
 * memory stores copy an item at every read and every write); anything else goes to structuredClone.
 */
export function copyOf<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Set) return new Set(Array.from(value, copyOf)) as T;
  if (Array.isArray(value)) return value.map(copyOf) as T;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  // A shallow copy (V8 copies an object's own fields at once), then a copy of each attribute that is itself an object.
  const out = { ...value } as Record<string, unknown>;
  for (const key of Object.keys(out)) if (typeof out[key] === 'object' && out[key] !== null) out[key] = copyOf(out[key]);
  return out as T;
}

/**
 * The generic fence on DynamoDB: one fence item, in any table, carrying `fence`, the
 * highest token it has accepted. ONE clause compares a token with it (FENCE_CLAUSE, lib/core/aws/job-store.ts: reject
 * lower, accept equal: the current holder writes many times with the same token).
 *
 *   raise        the new holder's FIRST act, before it reads or writes anything else: one conditional write (never
 *                raised, or not above our token) that sets fence = token and returns the old item;
 *   guard        the fence as something to write with (etcd's `Cmp`): a ConditionCheck the caller puts in any
 *                TransactWriteItems it builds, so its own writes land only while the fence still accepts the token
 *                (lib/core/batch.ts's writeFenced builds the usual ones: 1 guard + up to 99 puts each).
 *   HeldFence    the fence with a lease's token bound to it (`lease.fenced(fence)`, as etcd's `Mutex.IsOwner()` is
 *                built from the mutex's own key and revision): what a holder raises and writes with, so no caller
 *                carries a bare token from its lease to its writes. Fence's token-taking methods are internal.
 *
 * What a fence guarantees: once it is raised to N, no write guarded with a token below N lands, whatever its holder
 * believes. What it does not: it knows nothing of leases, so two writers with the SAME token both pass (hand a token
 * to one holder only: the lease's epoch does), and it guards only the writes that carry it.
 * A rejection by a fence means: you have lost the lock; stop and discard local state.
 */
import type { AttributeValue, TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { marshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { systemClock, type Clock } from '../clock';
import { backoffOf, cancellationReasons, retryTransient } from '../conditions';
import { failedItem } from './conditions';
import { FenceNotRaisedError, FencedOutError } from '../errors';
import { Attr } from '../schema';
import type { FenceItem, FenceStore } from '../store/jobs';
import { fenceCheck } from './job-store';
import { sendOnce } from '../effects';

/** Where a fence item lives, and what its raises and guards need. */
export interface FenceTarget {
  /** The store the fence item lives in: on DynamoDB `awsStores(...).jobs`, which fences an item of any table. */
  readonly fences: FenceStore;
  /** The table holding the fence item (any table: the item only needs its key and a `fence` number). */
  readonly table: string;
  /** The fence item's primary key: its partition key (and sort key, if the table has one), e.g. `{ pk: 'orders#7' }`. */
  readonly key: Readonly<Record<string, string | number>>;
  /** Times the retry backoff (docs/DESIGN.md "Retry classification"). @default systemClock */
  readonly clock?: Clock;
  /** Jitter source for the retry backoff. @default Math.random */
  readonly random?: () => number;
  /** The name FencedOutError reports for this fence. @default 'fence' */
  readonly resource?: string;
}

/**
 * One fence item, bound to its table and key. A holder raises it and guards its writes with it through the fence its
 * lease holds, `lease.fenced(fence)` (HeldFence), which carries the lease's token.
 *
 * Guarantees: a raise to `t` lands only if no token above `t` was raised before, and returns what it replaced; a
 * write carrying the guard at `t` lands only if the fence is still at most `t` when the transaction commits. Does not
 * guarantee anything about writes that do not carry the guard.
 */
export class Fence {
  /** What FencedOutError reports for this fence. */
  readonly resource: string;
  /**
   * Where the fence item lives, as the store names it.
   * @internal
   */
  readonly item: FenceItem;
  /**
   * The store its raise, read and fenced batches go to.
   * @internal
   */
  readonly store: FenceStore;
  /** The key in AttributeValue form, marshalled once: guard() runs once per transaction. */
  private readonly wireKey: Record<string, AttributeValue>;

  /** Where the fence item lives, and its clock (the system clock unless one was given). */
  readonly target: FenceTarget & { readonly clock: Clock };

  constructor(target: FenceTarget) {
    this.target = { ...target, clock: target.clock ?? systemClock };
    this.resource = target.resource ?? 'fence';
    this.item = { table: target.table, key: target.key };
    this.store = target.fences;
    this.wireKey = marshall(target.key);
  }

  /**
   * Raise the fence to `token`: the new holder's first act. One conditional
   * write, never raised or not above `token`; equal is accepted, so a retry after a lost answer is harmless.
   * @param token - the holder's fencing token (its lease's epoch)
   * @param set - other attributes to write in the same update (e.g. the holder's name)
   * @returns the item as it was before the raise (undefined if it did not exist)
   * @throws FencedOutError carrying the fence met, when a higher token was raised first
   * @internal a holder raises through its HeldFence (`lease.fenced(fence).raise()`)
   */
  async raise(
    token: number,
    set: Readonly<Record<string, NativeAttributeValue>> = {},
    check: () => void = () => undefined,
  ): Promise<Record<string, unknown> | undefined> {
    // Safe to send again (a transaction holding the item answers TransactionConflictException): equal is accepted.
    // The first send is the caller's act, checked by the caller; a retry comes after a backoff it never saw.
    let sends = 0;
    const out = await retryTransient(backoffOf(this.target), () => {
      if (sends++ > 0) check();
      return this.store.raiseFence(this.item, token, set);
    });
    if (!out.ok) throw new FencedOutError(this.resource, token, fenceOf(out.current));
    return out.old;
  }

  /**
   * The fence as something to write with (etcd's `IsOwner()` Cmp): a ConditionCheck, in the low-level AttributeValue
   * form, for the caller to put in its own TransactWriteItems. The transaction then commits only while the fence is
   * not above `token`; when it is, DynamoDB cancels the whole transaction with reason ConditionalCheckFailed at this
   * item's position and, with ReturnValuesOnConditionCheckFailure ALL_OLD, the fence item that won.
   * @param token - the holder's fencing token
   * @internal a holder guards through its HeldFence (`lease.fenced(fence).guard()`)
   */
  guard(token: number): TransactWriteItem {
    return fenceCheck(this.target.table, this.wireKey, token);
  }

  /**
   * What a failed TransactWriteItems that carried `guard(token)` at `position` means for the fence: a FencedOutError
   * (with the fence item that won) when the guard's condition failed, a FenceNotRaisedError when it failed on a fence
   * item that does not exist or has no fence (never raised), undefined when the error is anything else.
   * `throw fence.fencedOut(err, token) ?? err` keeps a caller's own transaction as typed as writeFenced.
   * @param position - where the guard sits in the transaction's TransactItems @default 0
   * @internal through the HeldFence that guarded the transaction (`held.fencedOut(err)`)
   */
  fencedOut(err: unknown, token: number, position = 0): FencedOutError | FenceNotRaisedError | undefined {
    const reason = cancellationReasons(err)?.[position];
    if (reason?.Code !== 'ConditionalCheckFailed') return undefined;
    const met = reason.Item ? fenceOf(failedItem(reason)) : undefined; // ALL_OLD: the fence item, if it exists
    if (met === undefined) return new FenceNotRaisedError(this.resource, token, { cause: err });
    return new FencedOutError(this.resource, token, met, { cause: err });
  }

  /** The fence item, read strongly consistent (undefined: never raised). */
  read(): Promise<Record<string, unknown> | undefined> {
    return this.store.readFence(this.item);
  }
}

/** A fence bound to one item: `fenceOn({ fences, table, key })`, then `lease.fenced(fence)` to raise it and write with it. */
export function fenceOn(target: FenceTarget): Fence {
  return new Fence(target);
}

/**
 * A fence as its holder writes with it: the fence and the token of the lease that handed it out
 * (`lease.fenced(fence)`). Raise it first, then put `guard()` in your own transactions, or give it to writeFenced.
 *
 * Guarantees what the fence does, for this token: `raise()` lands only if no higher token was raised first, and a
 * transaction carrying `guard()` commits only while the fence is still at most this token. It does not check the
 * lease's stop time: check the lease before each write (`lease.check()`, writeFenced's `check`).
 */
export interface HeldFence {
  /** The fence. */
  readonly fence: Fence;
  /** The fencing token this holder writes with: its lease's epoch. */
  readonly token: number;
  /**
   * Raise the fence to this token: the holder's first act, before it reads or writes anything else. One conditional
   * write (never raised, or not above the token); equal is accepted, so a retry after a lost answer is harmless.
   * @param set - other attributes to write in the same update (e.g. the holder's name)
   * @returns the item as it was before the raise (undefined if it did not exist)
   * @throws FencedOutError carrying the fence met, when a higher token was raised first
   */
  raise(set?: Readonly<Record<string, NativeAttributeValue>>): Promise<Record<string, unknown> | undefined>;
  /**
   * The holder's stop-time check (its lease's `check`). The first send of a raise or a fenced write is the caller's
   * act, to check before it (`lease.act`, writeFenced's `check`); every send after it that the library makes on its
   * own (a retry after a backoff, the batched writer's next transaction) runs this first: past the stop time it
   * throws, and nothing more is sent.
   */
  check(): void;
  /**
   * The ConditionCheck, in the low-level AttributeValue form, for your own TransactWriteItems: the transaction
   * commits only while the fence is not above this token; when it is, DynamoDB cancels the whole transaction with
   * reason ConditionalCheckFailed at this item's position and, with ReturnValuesOnConditionCheckFailure ALL_OLD, the
   * fence item that won.
   */
  guard(): TransactWriteItem;
  /**
   * What a failed TransactWriteItems that carried `guard()` at `position` means: a FencedOutError (with the fence
   * item that won) when the guard's condition failed, a FenceNotRaisedError when the fence was never raised,
   * undefined for any other error. `throw held.fencedOut(err) ?? err` keeps your own transaction typed.
   * @param position - where the guard sits in the transaction's TransactItems @default 0
   */
  fencedOut(err: unknown, position?: number): FencedOutError | FenceNotRaisedError | undefined;
  /**
   * A side effect the fence cannot reach (an email, a payment, a webhook), made once for the job: its intent recorded
   * through this fence, then `send(idempotencyKey)` after the stop-time check, then its answer recorded DONE. A later
   * holder skips an effect recorded DONE and sends one left at its intent again, with the same key (`sendOnce`).
   * @param effect - the effect's own id in the job (`email#ana`)
   */
  sendOnce(
    effect: string,
    send: (idempotencyKey: string) => Promise<string | void>,
    options?: {
      /** The table of the effects' records (partition key `pk`, a string). @defaultValue the fence item's table */
      readonly table?: string;
    },
  ): Promise<{
    /** The key the call was (or had been) sent with: the same for every holder. */
    readonly idempotencyKey: string;
    /** True when this holder made the call; false when an earlier holder's was recorded DONE and nothing was sent. */
    readonly sent: boolean;
    /** What the call answered, as recorded. */
    readonly result?: string;
  }>;
}

/**
 * `fence` held with `token`. A holder gets its HeldFence from its lease (`lease.fenced(fence)`), so the token is never
 * carried by hand; this is for the code that has only the token (the reference app's writer, tests of stale tokens).
 * @internal
 */
export function heldFence(fence: Fence, token: number, check: () => void = () => undefined): HeldFence {
  const held: HeldFence = {
    fence,
    token,
    check,
    raise: (set = {}) => fence.raise(token, set, check),
    guard: () => fence.guard(token),
    fencedOut: (err, position = 0) => fence.fencedOut(err, token, position),
    sendOnce: (effect, send, options) => sendOnce(held, effect, send, options),
  };
  return held;
}

/** The `fence` attribute of an item returned with a failed condition, if it has one. */
function fenceOf(item: Readonly<Record<string, unknown>> | undefined): number | undefined {
  return item?.[Attr.fence] === undefined ? undefined : Number(item[Attr.fence]);
}

/**
 * The epoch ledger's store (lib/election/epoch-fence.ts): the fence item
 * of one ledger and its entries, each method one store operation.
 *
 * A failed condition is not thrown: it is an outcome carrying the fence item as it was when the condition failed
 * (ALL_OLD), so the logic never needs a second read. Transient failures (throttling, a transaction cancelled for
 * TransactionConflict, timeouts) are thrown, for the one retry helper (lib/core/conditions.ts retryTransient).
 *
 * Implementations: lib/core/aws/ledger-store.ts (DynamoDB), lib/testing/ledger-store.ts (DynamoDB's rules, in memory);
 * the conformance suite test/store/ledger-store-conformance.test.ts runs on both.
 */

/** The fence item: the highest epoch that has written or bumped, and the last version written (0, 0 when new). */
export interface LedgerHead {
  /** The fence: the highest epoch that has written or bumped (0 for a new ledger). */
  readonly epoch: number;
  /** The last version written (0 for a new ledger). */
  readonly version: number;
}

/** One ledger entry as stored. */
export interface LedgerEntry {
  /** The entry's key: the ledger's key, `#`, and the version in 12 digits. */
  readonly pk: string;
  /** The writer's epoch, checked against the fence when it was appended. */
  readonly epoch: number;
  /** Its place in the ledger: 1, 2, 3, … with no gap. */
  readonly version: number;
  /** Who wrote it (the candidate or writer name). */
  readonly writer: string;
  /** The writer's wall clock when it sent the entry: informational, nothing decides on it. */
  readonly written_at: string;
  /** The writer's own fields. */
  readonly [field: string]: unknown;
}

/** What a raise answered: the head after it, or the fence item that refused it (its fence is above the epoch). */
export type RaiseOutcome = { readonly ok: true; readonly head: LedgerHead } | { readonly ok: false; readonly current: LedgerHead };

/** Why one action of a cancelled append failed, at its position: 0 the fence item's update, 1 the entry's put. */
export type ActionReason = 'None' | 'ConditionalCheckFailed';

/**
 * What an append answered: written, or cancelled by a condition with nothing written. `current` is the fence item as
 * it was, when the fence item's own condition failed (undefined when only the entry's did, or the item is absent).
 */
export type AppendOutcome =
  { readonly ok: true } | { readonly ok: false; readonly reasons: readonly [ActionReason, ActionReason]; readonly current: LedgerHead | undefined };

/** The ledgers of one table: fence items keyed by the ledger's key, entries keyed by `<key>#<version, 12 digits>`. */
export interface LedgerStore {
  /** A strongly consistent read of the fence item; epoch 0 and version 0 when there is none. */
  head(key: string): Promise<LedgerHead>;
  /** Raise the fence to `epoch`, only if it is not above it (raising to the epoch it has changes nothing). */
  raise(key: string, epoch: number): Promise<RaiseOutcome>;
  /**
   * Append `entry` in one transaction with the fence item's update: only if the fence is not above `entry.epoch`
   * and the head is at `entry.version - 1`, and only if the entry is absent; both or neither are written. Sent again
   * with the same `requestToken` within 10 minutes, an append that landed answers ok and writes nothing; the same
   * token with another request is an error.
   */
  append(key: string, entry: LedgerEntry, requestToken: string): Promise<AppendOutcome>;
  /** Every entry of the ledger, in version order (strongly consistent; for audits and tests, not the hot path). */
  entries(key: string): Promise<LedgerEntry[]>;
}

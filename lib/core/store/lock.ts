/**
 * The lock store: every atomic operation the lease, the election, the handover and the restore bump make on the lock
 * table (docs/DESIGN.md § Election, "The restore bump").
 *
 * Each method is one store operation: one consistent read, one conditional write, one transaction, or one page of a
 * scan; except a free claim of a key with no item (rare: once per key), which on DynamoDB is the failed write, a read
 * of the epoch floor, and the write that creates the item above it. A failed condition is an outcome, not an exception: `{ ok: false, current }` carries the item that won, as
 * the store had it (ALL_OLD), so the caller never needs a second read. Transient failures (throttling, a
 * transaction conflict, a timeout) are thrown, for the one retry helper (lib/core/conditions.ts retryTransient).
 *
 * Implementations: lib/core/aws/lock-store.ts (DynamoDB), lib/testing/lock-store.ts (in memory, AWS's rules).
 */

/** The lock item as stored: who holds the lease, for how long, the rvn of the last write, and the epoch. */
export interface LockItem {
  /** The lease key. */
  readonly pk: string;
  /** The holder's name, present only while the lease is held. */
  readonly holder?: string;
  /** The lease the holder declared: how long a claimant waits on an unchanged rvn. */
  readonly lease_ms?: number;
  /** Record version number: new on every claim, renewal and release. */
  readonly rvn?: string;
  /** +1 on every claim, never reset: the fencing token. A new item starts above the epoch floor. */
  readonly epoch?: number;
}

/**
 * The epoch floor's key: one reserved item of the lock table (never a lease: a claim of it is refused). Its epoch is
 * the floor every NEW lock item starts above (a key's first claim, a role's first join). The restore bump raises it
 * with every item, so a key the restored table lacks does not start again at 1 (docs/DESIGN.md "The restore bump").
 */
export const EPOCH_FLOOR_KEY = '#epoch-floor';

/** A conditional write's outcome: it landed (with the item as written, where the store returns it), or the item that won. */
export type WriteOutcome<T = LockItem> = { readonly ok: true; readonly item: T } | { readonly ok: false; readonly current?: LockItem };

/**
 * What a claim is conditional on:
 *   free        nobody holds it (never claimed, or released);
 *   rvn         the rvn seen is unchanged: nobody claimed, renewed or released since;
 *   epoch       the epoch seen is unchanged (undefined: never claimed): the handover's flip, which takes the lease
 *               over from a live holder whose renewals change only the rvn.
 */
export type ClaimOn = { readonly free: true } | { readonly rvn: string } | { readonly epoch: number | undefined };

/** What a claim writes: the holder, its declared lease, a new rvn, the informational wall time; the epoch goes +1. */
export interface ClaimWrite {
  /** Who claims: written as the item's holder. */
  readonly holder: string;
  /** The lease duration the claimant promises to renew within (what a waiter must see unchanged). */
  readonly leaseMs: number;
  /** The new record version: a fresh value every write, what a waiter watches for a change. */
  readonly rvn: string;
  /** Informational wall time (renewed_at); no code reads it. */
  readonly wallIso: string;
}

/** Who must still hold the lease for a renewal or release to land: the holder and the epoch it was granted. */
export interface Holding {
  /** The holder the claim wrote. */
  readonly holder: string;
  /** The epoch the claim was granted (the lease's fencing token). */
  readonly epoch: number;
}

/** The role item of an election: the last sequence handed out, and the live sequences. */
export interface RoleItem {
  /** The last sequence number handed out; absent before the first join. */
  readonly epoch?: number;
  /** The sequence numbers of the candidates still in the queue, lowest first. */
  readonly members: readonly number[];
}

/** A candidate joining an election: the role item's key and the counter it read, its own item's key and contents. */
export interface JoinRequest {
  /** The role item's key: one per election. */
  readonly roleKey: string;
  /** The counter as read (undefined: nobody ever joined). The join lands only if it is still this. */
  readonly last: number | undefined;
  /** The candidate's sequence number: the counter + 1, its place in the queue and its epoch if it leads. */
  readonly seq: number;
  /** The candidate's own item's key, the one its successor watches. */
  readonly candidateKey: string;
  /** The candidate's item as written: holder, lease and rvn, as a claim writes them. */
  readonly candidate: ClaimWrite;
}

/** What a removal from the queue is conditional on: the rvn a watcher saw unchanged, or still being ours. */
export type RemoveOn = { readonly rvn: string } | Holding;

/** One lock item as the restore bump sees it: its epoch and the bump runs already applied to it. */
export interface BumpView {
  /** The lock item's key. */
  readonly key: string;
  /** Its epoch now. */
  readonly epoch: number;
  /** The run ids of the bumps already applied to it: a rerun of one of them skips the item. */
  readonly bumpRuns: readonly string[];
}

/** One page of the lock table, and where the next page starts (absent: this was the last). */
export interface BumpPage {
  /** The page's lock items. */
  readonly items: readonly BumpView[];
  /** Where the next page starts, to pass to scanPage; absent on the last page. */
  readonly next?: string;
}

/**
 * The lock table's operations, each one atomic store operation, split by who uses them: the lease (LeaseStore), an
 * election's role and queue (RoleStore), the restore bump (RestoreStore). Guarantees: a write lands only on its
 * condition, and a failed condition returns the item that won. Does not retry; does not decide anything about time.
 */
export interface LeaseStore {
  /** A strongly consistent read of the lock item; undefined if the key was never written. */
  read(key: string): Promise<LockItem | undefined>;
  /**
   * Claim: set holder, lease, rvn, and the epoch +1, on condition `on`. A claim that creates the item (free, or the
   * flip of a key never claimed) starts it at the epoch floor + 1, reading the floor (consistently) only then.
   */
  claim(key: string, on: ClaimOn, write: ClaimWrite): Promise<WriteOutcome>;
  /** Renew: a new rvn, only while `holding` still holds it. */
  renew(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>>;
  /** Release: clear the holder and write a new rvn, only while `holding` still holds it. The item (its epoch) stays. */
  release(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>>;
}

/** An election's operations on the lock table: its role item and candidate queue (and the floor its first number starts above). */
export interface RoleStore {
  /** A strongly consistent read of an election's role item. */
  readRole(roleKey: string): Promise<RoleItem | undefined>;
  /**
   * One transaction: the role's counter goes from `last` to `seq` and `seq` joins its members, and the candidate item
   * is written (only if absent). Both or neither; `ok: false` when another candidate took the number. The role's
   * first join (`last` undefined) lands only if `seq` is above the epoch floor.
   */
  join(request: JoinRequest): Promise<{ readonly ok: boolean }>;
  /** One transaction: delete candidate `seq`'s item on `on`, and take `seq` out of the role's members. Both or neither. */
  removeCandidate(roleKey: string, candidateKey: string, seq: number, on: RemoveOn): Promise<{ readonly ok: boolean }>;
  /** A strongly consistent read of the epoch floor: 0 if it was never raised. */
  readFloor(): Promise<number>;
}

/** The restore bump's operations on the lock table: every item's epoch, and the floor new keys start above. */
export interface RestoreStore {
  /** One page of the lock table for the restore bump (strongly consistent), from `start` (a previous page's `next`). */
  scanPage(start?: string): Promise<BumpPage>;
  /** Add `by` to the item's epoch and record `runId`, once per run id; `ok: false` if this run already bumped it. */
  bump(key: string, by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }>;
  /** A strongly consistent read of the epoch floor: 0 if it was never raised. */
  readFloor(): Promise<number>;
  /** Add `by` to the epoch floor (created at `by` if absent) and record `runId`, once per run id; `ok: false` if this run already raised it. */
  raiseFloor(by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }>;
}

/** The whole lock table: what its DynamoDB and in-memory implementations hold (one table, three concerns). */
export interface LockStore extends LeaseStore, RoleStore, RestoreStore {}

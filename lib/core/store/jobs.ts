/**
 * The job store (issue 19, the storage seam): every atomic store operation the job/chunk protocol and the fenced
 * batch need, as plain values. One implementation talks to DynamoDB (lib/core/aws/job-store.ts, the only place with
 * their condition expressions), one keeps DynamoDB's rules in memory (lib/testing/job-store.ts); both pass
 * test/store/job-store-conformance.test.ts.
 *
 * A failed condition is not an exception: it comes back as `{ ok: false, current }`, the item that won, as ALL_OLD
 * gives it, so the logic needs no second read. Transient failures (throttling, TransactionConflict, timeouts) are
 * thrown, named as DynamoDB names them, so conditions.isTransient and the one retry helper (retryTransient) decide.
 */
import type { AttributeValue, NativeAttributeValue } from '../aws/document-client';
import type { JobState } from '../schema';

/** A job row as stored: its fence, its state, its owner, and (only while RUNNING) the sparse-index attributes. */
export interface JobRow {
  /** The job's key. */
  readonly pk: string;
  /** The highest token raised on it; absent before the first raise. */
  readonly fence?: number;
  /** Where its run stands; absent before the first raise. */
  readonly state?: JobState;
  /** The token of the holder running it (equal to the fence while RUNNING). */
  readonly owner_token?: number;
  /** That holder's name. */
  readonly owner?: string;
  /** How many chunks the run has. */
  readonly chunk_count?: number;
  /** The sparse index's partition key: present only while RUNNING, so only claimed rows are in the index. */
  readonly claim_shard?: string;
  /** The sparse index's sort key: the raise's wall time, informational; present only while RUNNING. */
  readonly claimed_since?: string;
  /** Re-queues the sweeper recorded on the run (lib/core/sweeper.ts `requeue`); absent until the first. */
  readonly requeues?: number;
}

/** A chunk's fence item (docs/DESIGN.md § Chunk fences). Never carries claim_shard or state: never in the sparse index. */
export interface ChunkFence {
  /** The chunk fence item's key (its job's key and the chunk's number). */
  readonly pk: string;
  /** The chunk's number, from 0. */
  readonly chunk: number;
  /** The highest token raised on the chunk. */
  readonly fence: number;
  /** The token of the holder that recorded this chunk done (after its manifest commit); absent until then. */
  readonly done_by?: number;
}

/** A conditional write's answer: done, with the item as it was before (ALL_OLD); or refused, with the item that won. */
export type Conditional<T> = { readonly ok: true; readonly old: T | undefined } | { readonly ok: false; readonly current: T | undefined };

/** Where a fence item lives: any table, any key (the item only needs its key and a `fence` number). */
export interface FenceItem {
  /** The table it is in. */
  readonly table: string;
  /** Its partition key (and sort key, if the table has one), e.g. `{ pk: 'orders#7' }`. */
  readonly key: Readonly<Record<string, string | number>>;
}

/**
 * An item in DynamoDB's wire form (`{ pk: { S: 'order#1' }, qty: { N: '3' } }`), the caller's own: the store
 * sends it as it is (no marshalling: bench/waste.ts) and reads only its key attribute.
 */
export type WireItem = Readonly<Record<string, AttributeValue>>;

/**
 * An item as plain document values (`{ pk: 'order#1', qty: 3 }`): the DynamoDB store marshals it
 * (util-dynamodb's marshall), the in-memory store keeps it as it is.
 */
export type DocumentItem = Readonly<Record<string, NativeAttributeValue>>;

/** One put of a fenced batch: lands only if no item with its key exists. Its item in wire form, or as a document. */
export type BatchPut = {
  readonly table: string;
  /** The item's partition key attribute. */
  readonly keyAttribute: string;
} & ({ readonly item: WireItem; readonly document?: undefined } | { readonly document: DocumentItem; readonly item?: undefined });

/**
 * What one fenced transaction did. Transient cancellations (every reason TransactionConflict or throttling) are
 * thrown instead, so the same request (with the same ClientRequestToken) can be sent again.
 *   recorded          the check passed and every put landed (or this token's earlier send did, within 10 minutes);
 *   fenced-out        the check failed: the fence item that won (ALL_OLD), nothing written;
 *   already-recorded  the check passed but these puts (positions in `puts`) found their key taken: nothing written.
 */
export type BatchOutcome =
  | { readonly kind: 'recorded' }
  | { readonly kind: 'fenced-out'; readonly current: Readonly<Record<string, unknown>> | undefined; readonly cause?: unknown }
  | { readonly kind: 'already-recorded'; readonly positions: readonly number[] };

/** One page of a query or scan, and where the next one starts (undefined: the last page). */
export interface Page<T> {
  /** The page's items. */
  readonly items: readonly T[];
  /** Where the next page starts, to pass back; absent on the last page. */
  readonly next?: string;
}

/** What raising a job row writes besides the fence. */
export interface RowRaise {
  /** The raising lease's token: the new fence and owner token. */
  readonly token: number;
  /** The raising holder's name. */
  readonly owner: string;
  /** How many chunks the run has. */
  readonly chunkCount: number;
  /** Informational (wall clock): the sweeper never compares it; also the sparse index's sort key. */
  readonly claimedSince: string;
  /** The sparse index's partition the row is claimed under: its job's (lib/core/job-keys.ts claimShard). */
  readonly shard: string;
}

/** What the sweeper saw of a row it re-queues: the write lands only on exactly that row. */
export interface RequeueSighting {
  /** The row's owner token when seen. */
  readonly ownerToken: number;
  /** The row's fence when seen. */
  readonly fence: number;
  /** Re-queues recorded on the row when seen (0: none, the attribute absent). */
  readonly requeues: number;
}

/**
 * A side effect's record (lib/core/effects.ts), one item keyed `pk` in a table of the caller's: INTENT once a holder
 * has recorded, through the fence, that it is about to make the call; DONE once the call has answered.
 */
export interface EffectRecord {
  /** `effect#` and the idempotency key. */
  readonly pk: string;
  /** INTENT: a holder may have called; DONE: the call answered, and what it answered is `result`. */
  readonly state: 'INTENT' | 'DONE';
  /** The effect's own id, as the job names it. */
  readonly effect: string;
  /** The key every holder sends with the call. */
  readonly idempotency_key: string;
  /** The token of the holder that recorded the intent. */
  readonly token: number;
  /** What the call answered, as the holder that made it recorded it (a provider's message id). */
  readonly result?: string;
  /** The token of the holder that recorded it DONE. */
  readonly done_by?: number;
}

/** The generic fence's operations: on any fence item, and the batch recorded under one. */
export interface FenceStore {
  /** One conditional write: fence = token (and `set`), if never raised or not above `token`. */
  raiseFence(item: FenceItem, token: number, set?: Readonly<Record<string, string | number>>): Promise<Conditional<Record<string, unknown>>>;
  /** The fence item, read strongly consistent (undefined: never raised). */
  readFence(item: FenceItem): Promise<Record<string, unknown> | undefined>;
  /**
   * One transaction: a check that `fence` accepts `token` (its fence not above it), then each put only if its key is absent,
   * all or nothing (at most 99 puts), idempotent under `requestToken` for 10 minutes.
   */
  recordBatch(fence: FenceItem, token: number, puts: readonly BatchPut[], requestToken: string): Promise<BatchOutcome>;
  /** A side effect's record (table, partition key `pk`), read strongly consistent (undefined: no intent recorded). */
  readEffect(table: string, key: string): Promise<EffectRecord | undefined>;
  /**
   * Record a side effect DONE, with what its call answered, if its intent is recorded (not fenced: the call was made,
   * whoever holds the lease now). Recording it DONE again changes nothing.
   * @returns false when no intent is recorded under `key` (nothing written)
   */
  markEffectDone(table: string, key: string, done: { readonly token: number; readonly result?: string; readonly wallIso: string }): Promise<boolean>;
}

/** The job table's operations: job rows, chunk fence items (by key), the sparse index of claimed rows. */
export interface JobStore extends FenceStore {
  /** The job table's name: where job rows and chunk fence items live. */
  readonly table: string;
  /** The job row, read strongly consistent. */
  readJob(jobId: string): Promise<JobRow | undefined>;
  /** Raise the job row: fence, RUNNING, owner, chunk count, into the sparse index; refused by a higher fence or DONE. */
  raiseJob(jobId: string, raise: RowRaise): Promise<Conditional<JobRow>>;
  /** Record a chunk done on its own fence item, if that fence is still at `token`. */
  markChunkDone(chunkKey: string, token: number): Promise<Conditional<ChunkFence>>;
  /** DONE, out of the sparse index, if the row's fence and owner are still `token`. */
  complete(jobId: string, token: number): Promise<Conditional<JobRow>>;
  /**
   * The sweeper's record of a re-queue: one more in `requeues` and nothing else (the row stays RUNNING and in the
   * index), if still RUNNING by the owner, at the fence and the count it saw.
   */
  requeue(jobId: string, seen: RequeueSighting): Promise<Conditional<JobRow>>;
  /** One page of one shard of the sparse index, one job's claims (eventually consistent: a GSI has no consistent read). */
  claimedPage(shard: string, start?: string): Promise<Page<JobRow>>;
  /** One page of a strongly consistent scan of the job table (the auditor's: holders and the sweeper never scan). */
  scanPage(start?: string): Promise<Page<Record<string, unknown>>>;
}

/**
 * The one description of the stores: table key schemas, the sparse GSI, attribute names and the manifest layout.
 * The local stack creates exactly this (lib/local/stack.ts), and the CDK stack provisions exactly this.
 */

/** Attribute names, named after the reference text's words. */
export const Attr = {
  pk: 'pk',
  // lock item
  holder: 'holder',
  leaseMs: 'lease_ms',
  rvn: 'rvn',
  epoch: 'epoch',
  renewedAt: 'renewed_at', // informational wall time; no code reads it
  // job (fence) row
  fence: 'fence',
  state: 'state',
  ownerToken: 'owner_token',
  owner: 'owner',
  chunkCount: 'chunk_count',
  claimShard: 'claim_shard', // present only while RUNNING: the sparse index's partition key
  claimedSince: 'claimed_since', // present only while RUNNING: the sparse index's sort key (informational wall time)
  requeues: 'requeues', // how many times the sweeper re-queued the run (the row stays RUNNING and indexed)
  // chunk fence item, beside the job row (docs/DESIGN.md § Chunk fences): pk, fence, chunk, done_by
  chunk: 'chunk', // present only on chunk fence items: the chunk number (never claim_shard: never in the sparse index)
  doneBy: 'done_by', // the token of the holder that recorded the chunk done, after its manifest commit
  // election (docs/DESIGN.md § Election): the role item's live sequence numbers; a candidate item is a lock item
  members: 'members',
  // epoch fence item and ledger entries (docs/DESIGN.md § Election): the last version written under the fence
  version: 'version',
  writer: 'writer',
  writtenAt: 'written_at', // informational wall time; only the test harness measures with it
  // a fenced record (lib/core/batch.ts callers): the token of the holder that wrote it, for audit
  token: 'token',
  // a side effect's record (lib/core/effects.ts): state INTENT, then DONE; the effect's own id, the key sent with it
  effect: 'effect',
  idempotencyKey: 'idempotency_key',
  intentAt: 'intent_at', // informational wall time
  doneAt: 'done_at', // informational wall time
  result: 'result',
} as const;

/** Where a job's run stands: RUNNING under a holder's token, or DONE. (QUEUED: not raised yet; the library never writes it, a row not yet raised has no state.) */
export type JobState = 'QUEUED' | 'RUNNING' | 'DONE';

/** A key attribute of a table or index: its name and DynamoDB type. */
export interface KeyAttribute {
  /** The attribute's name. */
  readonly name: string;
  /** S (string) or N (number). */
  readonly type: 'S' | 'N';
}

/** One table as the library expects it: what the local stack creates and the CDK constructs provision. */
export interface TableDescription {
  /** Appended to the deployment's prefix to make the table name. */
  readonly suffix: string;
  /** The table's only key (no sort key). */
  readonly partitionKey: KeyAttribute;
  /** A GSI holding only the items that carry its keys (the claimed job rows, for the sweeper). */
  readonly sparseIndex?: { readonly name: string; readonly partitionKey: KeyAttribute; readonly sortKey: KeyAttribute };
  /** Why the table exists, for the CDK construct's description and the docs. */
  readonly purpose: string;
}

/** Lock/epoch table: never TTL'd, items never deleted: the epoch is the fencing token. */
export const LOCK_TABLE: TableDescription = {
  suffix: 'locks',
  partitionKey: { name: Attr.pk, type: 'S' },
  purpose: 'lease items: holder, lease_ms, rvn, epoch. No TTL, never deleted: epochs are fencing tokens.',
};

/** Job (fence) table with the sparse GSI holding only claimed rows, for the orphan sweeper. */
export const JOB_TABLE: TableDescription = {
  suffix: 'jobs',
  partitionKey: { name: Attr.pk, type: 'S' },
  sparseIndex: {
    name: 'claimed',
    partitionKey: { name: Attr.claimShard, type: 'S' },
    sortKey: { name: Attr.claimedSince, type: 'S' },
  },
  purpose:
    'job rows: fence, state, owner_token; claim_shard/claimed_since only while RUNNING. Beside each, its chunk fence items (fence, done_by), never indexed.',
};

/** The library's own tables: what `createTables` (core/provision.ts) creates and FencedJob provisions. */
export const TABLES = [LOCK_TABLE, JOB_TABLE] as const;

/** The names of a deployment's two tables (a type, not an interface: it is a record of names, lib/local/workflow.ts). */
export type TableNames = {
  /** Lock items: one per lease key. */
  readonly locks: string;
  /** Job rows and chunk fence items. */
  readonly jobs: string;
};

export const DEFAULT_TABLE_PREFIX = 'fencepost-';
export const DEFAULT_BUCKET = 'fencepost-manifests';

/**
 * The table names for a prefix: `<prefix>locks` (the leases) and `<prefix>jobs` (the fences).
 * @param prefix - the deployment's prefix @defaultValue `fencepost-`
 */
export function tableNames(prefix: string = DEFAULT_TABLE_PREFIX): TableNames {
  return { locks: prefix + LOCK_TABLE.suffix, jobs: prefix + JOB_TABLE.suffix };
}

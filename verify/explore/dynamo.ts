/**
 * The explored worlds on the AWS stores: the same schedules, with lib/core/aws's stores in place of the in-memory ones,
 * so every condition expression that ships runs under the explorer's faults. The night world on the DynamoDB lock and
 * job stores; the workflow world's handlers on those and the S3 manifest store; the election world on the lock store,
 * the epoch ledger's store and the S3 manifest store. DynamoDB Local serves the tables, the local S3 endpoint
 * (lib/local/s3-server.ts) the bucket. The clock stays virtual: each store call is tracked by it (VirtualClock.track),
 * so the scheduler takes no step and moves no time while a request is on the wire, and the stores see the calls one
 * at a time, in the order the seed picked.
 *
 * Each schedule gets tables and a bucket of its own (created before, deleted after). What differs from the memory
 * stores: the sparse index is read consistently at once (DynamoDB Local's index does not lag, AWS's does: the memory
 * tier draws the lag); no transaction or conditional write is in flight while another is sent (the memory tier's
 * conflict and commit windows make conflicts and 409s of their own; here only the scheduler's); and the election
 * world's restore scans the lock table in DynamoDB's order (by the hash of the key), where the memory store's scan is
 * in key order, so the restore bump takes the items in another order. With those set alike (no index lag, no window,
 * no restore: `restores` off), a schedule's trace is the same on both stores, line for line
 * (test/store/explore-dynamo*.test.ts); with the restore on, the checks run on what the AWS stores did.
 *
 * The broken variants that reach behind the in-memory stores (epoch-deleted, requeue-before-start,
 * claim-on-wall-clock) are not run here. `fence-lt` is broken where it ships: the fence comparison is
 * rewritten in the requests sent to DynamoDB (`fence < :t`), so DynamoDB Local itself refuses the equal token.
 */
import { DeleteTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { VirtualClock } from '../../lib/core/clock';
import { DynamoJobStore, FENCE_CLAUSE } from '../../lib/core/aws/job-store';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';
import { createDescribedTables } from '../../lib/core/aws/provision';
import { scanAll } from '../../lib/core/aws/scan';
import { Attr, JOB_TABLE, LOCK_TABLE, type TableDescription } from '../../lib/core/schema';
import type { LockStore } from '../../lib/core/store/lock';
import { through } from '../../lib/testing/process';
import { electionWorld, type ElectionPlaced, type LockRestore } from './election-world';
import { ELECTION_MUTATIONS, MUTATIONS, type Mutation } from './mutations';
import { nightWorld, type NightPlaced, type NightStores } from './night-world';
import { WORKFLOW_WORLD_MUTATIONS, workflowWorld, type WorkflowPlaced, type WorkflowStores } from './workflow-world';
import { runWorld, type ScheduleResult } from '../../lib/testing/world';

/** The broken variants that run on any store (the others reach behind the in-memory stores' backs). */
export const DYNAMO_MUTATIONS: readonly Mutation[] = MUTATIONS.filter(
  (m) => m !== 'epoch-deleted' && m !== 'requeue-before-start' && m !== 'claim-on-wall-clock',
);

/** The workflow world's broken variants that run on any store (epoch-deleted and puts-unconditional reach behind the memory stores). */
export const WORKFLOW_DYNAMO_MUTATIONS: readonly string[] = WORKFLOW_WORLD_MUTATIONS.filter(
  (m) => m !== 'epoch-deleted' && m !== 'puts-unconditional',
);

/** The night's items: a table keyed as the job table is. */
const ITEMS_TABLE: TableDescription = { suffix: 'items', partitionKey: { name: Attr.pk, type: 'S' }, purpose: "the explored night's items" };

/** `store` with every call tracked by `clock`: virtual time stands still while the request is on the wire. */
function onClock<T extends object>(store: T, clock: VirtualClock): T {
  return through(store, (_method, _args, apply) => clock.track(apply()));
}

/** Every item of `table`, read consistently, page by page. */
async function dump(ddb: DynamoDBDocumentClient, table: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  for await (const item of scanAll(ddb, { TableName: table })) items.push(item);
  return items;
}

/** The fence comparison broken on the wire: every request's `fence <= :t` sent as `fence < :t`. */
const FENCE_LT = 'explore-fence-lt';
type Build = (args: { readonly request: { body?: unknown; headers: Record<string, string> } }) => Promise<unknown>;
const fenceLt =
  (next: Build): Build =>
  async (args) => {
    const { request } = args;
    // The JSON body is bytes by the build step.
    const body = request.body instanceof Uint8Array ? new TextDecoder().decode(request.body) : request.body;
    if (typeof body === 'string' && body.includes(FENCE_CLAUSE)) {
      request.body = Buffer.from(body.split(FENCE_CLAUSE).join(FENCE_CLAUSE.replace('<=', '<')), 'utf8');
      request.headers['content-length'] = String((request.body as Buffer).length);
    }
    return next(args);
  };

/** The clients a schedule on DynamoDB Local needs: the low-level one creates and deletes its tables; S3 for a bucket. */
export interface DynamoClients {
  readonly raw: DynamoDBClient;
  readonly ddb: DynamoDBDocumentClient;
  readonly s3: S3Client;
}

/** What a schedule on the AWS stores keeps after it ran (a failing one's tables, to look at). */
interface OnDynamo {
  readonly keep?: boolean;
}

/**
 * Run `schedule` on tables of its own under `prefix` (created before, deleted after unless `keep`), with the fence
 * comparison broken on the wire for `fence-lt` (then the world runs unbroken: the requests carry the bug).
 */
async function onTables(
  clients: DynamoClients,
  prefix: string,
  tables: readonly TableDescription[],
  mutation: string | undefined,
  keep: boolean | undefined,
  schedule: (mutation: string | undefined) => Promise<ScheduleResult>,
): Promise<ScheduleResult> {
  await createDescribedTables(clients.raw, prefix, tables);
  // The document client sends through the low-level client's middleware.
  const stack = clients.raw.middlewareStack as unknown as { add(m: typeof fenceLt, o: { step: 'build'; priority: 'low'; name: string }): void };
  if (mutation === 'fence-lt') stack.add(fenceLt, { step: 'build', priority: 'low', name: FENCE_LT });
  try {
    return await schedule(mutation === 'fence-lt' ? undefined : mutation);
  } finally {
    clients.raw.middlewareStack.remove(FENCE_LT);
    if (!keep) for (const t of tables) await clients.raw.send(new DeleteTableCommand({ TableName: prefix + t.suffix }));
  }
}

/** A bucket of its own for `schedule` (emptied and deleted after, unless `keep`). */
async function onBucket<T>(s3: S3Client, bucket: string, keep: boolean | undefined, schedule: () => Promise<T>): Promise<T> {
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  try {
    return await schedule();
  } finally {
    if (!keep) {
      // A schedule writes a manifest and a few chunk objects: one page of the listing holds them all.
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
      for (const o of listed.Contents ?? []) await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
      await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
    }
  }
}

/** The job store on `table`, a page of one row (as the memory tier's: every query runs its paging path), with `dump`. */
function jobStoreOn(clients: DynamoClients, table: string, clock: VirtualClock) {
  const jobs = new DynamoJobStore(clients.ddb, table, 1);
  return onClock(Object.assign(jobs, { dump: (t: string) => dump(clients.ddb, t) }), clock);
}

/**
 * Run one schedule of the night world on DynamoDB Local, on tables of its own under `prefix` (deleted after, unless
 * `keep`), and check it as the memory tier checks it.
 */
export function runNightOnDynamo(
  clients: DynamoClients,
  prefix: string,
  seed: number,
  mutation?: Mutation,
  options: OnDynamo & { readonly placed?: NightPlaced } = {},
): Promise<ScheduleResult> {
  const world = nightWorld((clock) => {
    const stores: NightStores = {
      locks: onClock(new DynamoLockStore(clients.ddb, prefix + LOCK_TABLE.suffix), clock),
      jobs: jobStoreOn(clients, prefix + JOB_TABLE.suffix, clock),
      items: prefix + ITEMS_TABLE.suffix,
      indexLagMs: 0,
    };
    return stores;
  });
  return onTables(clients, prefix, [LOCK_TABLE, JOB_TABLE, ITEMS_TABLE], mutation, options.keep, (m) => runWorld(world, seed, m, options.placed));
}

/**
 * Run one schedule of the workflow world on DynamoDB Local and the local S3 endpoint: its handlers' runtimes get the
 * lock and job stores on tables of their own under `prefix` and the manifest store on a bucket of its own
 * (`<prefix>manifests`), all deleted after unless `keep`.
 */
export function runWorkflowOnDynamo(
  clients: DynamoClients,
  prefix: string,
  seed: number,
  mutation?: string,
  options: OnDynamo & { readonly placed?: WorkflowPlaced } = {},
): Promise<ScheduleResult> {
  const bucket = `${prefix}manifests`;
  const world = workflowWorld((clock) => {
    const stores: WorkflowStores = {
      locks: onClock(new DynamoLockStore(clients.ddb, prefix + LOCK_TABLE.suffix), clock),
      jobs: jobStoreOn(clients, prefix + JOB_TABLE.suffix, clock),
      manifests: onClock(new S3ManifestStore(clients.s3, bucket), clock),
      items: prefix + ITEMS_TABLE.suffix,
      indexLagMs: 0,
    };
    return stores;
  });
  return onBucket(clients.s3, bucket, options.keep, () =>
    onTables(clients, prefix, [LOCK_TABLE, JOB_TABLE, ITEMS_TABLE], mutation, options.keep, (m) => runWorld(world, seed, m, options.placed)),
  );
}

/**
 * The election world's broken variants that run on any store and line for line: not epoch-deleted (it deletes the
 * memory store's items), nor the restore's (they run with the restore, which is not line for line: runElectionOnDynamo),
 * nor the ledger store's own (append-split, fence-gets-version: they write the memory ledger store's items).
 */
const MEMORY_ONLY: ReadonlySet<string> = new Set(['epoch-deleted', 'restore-no-bump', 'restore-no-floor', 'append-split', 'fence-gets-version']);
export const ELECTION_DYNAMO_MUTATIONS: readonly string[] = ELECTION_MUTATIONS.filter((m) => !MEMORY_ONLY.has(m));

/** Items per page of the restore bump's scan: 2, as the memory tier's, so the bump runs its paging path. */
const SCAN_LIMIT = 2;

/**
 * The lock table restored on DynamoDB Local as an operator restores one: a consistent scan of the table in use (the
 * backup), a new table `<prefix>locks-r<n>` with the backup's items put back (the restore), then used as it is. Every
 * request is tracked by the clock: no virtual time passes. `made` collects the new tables' names, to delete.
 */
function restoreOnDynamo(clients: DynamoClients, prefix: string, clock: VirtualClock, first: LockStore, made: string[]): LockRestore {
  const tableOf = new Map<LockStore, string>([[first, prefix + LOCK_TABLE.suffix]]);
  return {
    backup: (table, needs) =>
      clock.track(
        (async () => {
          const items = new Map((await dump(clients.ddb, tableOf.get(table)!)).map((i) => [String(i[Attr.pk]), i]));
          return needs.every((k) => items.has(k)) ? items : undefined;
        })(),
      ),
    restored: (backup) =>
      clock.track(
        (async () => {
          const suffix = `${LOCK_TABLE.suffix}-r${made.length + 1}`;
          made.push(prefix + suffix);
          await createDescribedTables(clients.raw, prefix, [{ ...LOCK_TABLE, suffix }]);
          for (const item of backup.values()) await clients.ddb.send(new PutCommand({ TableName: prefix + suffix, Item: item }));
          const store = onClock(new DynamoLockStore(clients.ddb, prefix + suffix, SCAN_LIMIT), clock);
          tableOf.set(store, prefix + suffix);
          return store;
        })(),
      ),
    // Each request is answered before the next is sent: none is in flight.
    settled: () => true,
    inUse: (restored) => restored,
  };
}

/**
 * Run one schedule of the election world on DynamoDB Local and the local S3 endpoint: the candidates' and writers'
 * lock table and the epoch ledgers (DynamoLedgerStore, on a table keyed as the job table is) on tables of their own
 * under `prefix`, the manifest on a bucket of its own (`<prefix>manifests`), all deleted after unless `keep`. With
 * `restores`, a schedule that draws a restore runs it (restoreOnDynamo); without, it runs without it, and runs line
 * for line as on the memory stores (a restored table's scan pages in DynamoDB's order, by the hash of the key, where
 * the memory store's pages by key).
 */
export async function runElectionOnDynamo(
  clients: DynamoClients,
  prefix: string,
  seed: number,
  mutation?: string,
  options: OnDynamo & { readonly placed?: ElectionPlaced; readonly restores?: boolean } = {},
): Promise<ScheduleResult> {
  const bucket = `${prefix}manifests`;
  const made: string[] = [];
  const world = electionWorld((clock) => {
    const locks = onClock(new DynamoLockStore(clients.ddb, prefix + LOCK_TABLE.suffix, SCAN_LIMIT), clock);
    return {
      locks,
      ...(options.restores ? { restore: restoreOnDynamo(clients, prefix, clock, locks, made) } : {}),
      ledgers: onClock(new DynamoLedgerStore(clients.ddb, prefix + JOB_TABLE.suffix), clock),
      bucket: onClock(new S3ManifestStore(clients.s3, bucket), clock),
    };
  });
  try {
    return await onBucket(clients.s3, bucket, options.keep, () =>
      onTables(clients, prefix, [LOCK_TABLE, JOB_TABLE], mutation, options.keep, (m) => runWorld(world, seed, m, options.placed)),
    );
  } finally {
    if (!options.keep) for (const t of made) await clients.raw.send(new DeleteTableCommand({ TableName: t }));
  }
}

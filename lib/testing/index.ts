/**
 * `fencepost/testing`: test your own job the way Fencepost tests itself, with no DynamoDB, no Java and no real time.
 *
 *   stores     the in-memory lock, job, manifest and ledger stores (DynamoDB's and S3's rules: conditions,
 *              transactions all or nothing, ClientRequestTokens, the sparse index), which pass the same conformance
 *              suites as the AWS stores; the PostgreSQL fence's twin (`MemoryPostgres`), which passes the PostgreSQL
 *              fence's on a real server. `memoryStores(clock)` builds the three a fenced job uses.
 *   clock      `VirtualClock`: time moves only when you `advance` it, and every timer of the library runs on it.
 *   explore    `exploreJob`: your job run by several workers on those stores and one virtual clock, under the seeded
 *              scheduler the repository's own explorer uses (pauses, crashes, lost and late answers at every store
 *              call, every plain write of your tables and every call on your fakes), with the built-in checks (no
 *              holder acts past its stop time, each item recorded with one content, the job finishes) and yours; a
 *              failing schedule names the seed that replays it.
 *              `exploreFencedJob`: your FencedJob's chunk function under the workflow FencedJob synthesizes for your
 *              job's shape, with its real handlers and the AWS faults around them (a trigger delivered twice, Lambda
 *              crashes and timeouts, a task timeout that leaves a zombie), on the same stores, clock and scheduler.
 *
 * @packageDocumentation
 */
import type { Clock } from '../core/clock';
import { createRequire } from 'node:module';
import type { LedgerStore } from '../core/store/ledger';
import type { PgPool, PgPoolClient } from '../postgres/driver';
import { MemoryLedgerStore } from './ledger-store';
import { MemoryPostgres, type Concurrency } from './postgres-fence';
import type { Isolation } from '../postgres/sql';
import type { ExploreJobResult } from './explore-job';
import type { ExploreFencedJobOptions } from './workflow/explore-fenced-job';

export { VirtualClock } from '../core/clock';
export { memoryStores, type MemoryStores } from './memory-stores';
export type { PlainTables } from './tables';
export { exploreJob, type ExploreJobOptions, type ExploreJobResult, type JobEnd, type JobViolation, type JobWorker } from './explore-job';
export type { ChunkKit, ExploreFencedJobOptions, FencedJobEnd } from './workflow/explore-fenced-job';
export type { FaultPlan, FaultKind, PlacedFault } from './scheduler';
export type { StoredItem } from './job-store';
export type { Concurrency } from './postgres-fence';
export type { Clock, ClockTimer } from '../core/clock';
// What exploreFencedJob's options name: the lease's settings, and the context your chunk work is given (as
// fencepost/lambda names it, with the core's types it names: the same types as the `fencepost` entry's).
export type { LeaseConfig } from '../core/config';
export type { FencedChunkContext } from '../lambda/chunk-handler';
export type { Environment } from '../lambda/runtime';
export type { Lease, LeaseDeps } from '../core/lease';
export type { Fence, FenceTarget, HeldFence } from '../core/fence';
export type { ManifestBody, ManifestChunk, ManifestDeps, ManifestPlace, ManifestWriter } from '../core/manifest';
export { FencedOutError, FenceNotRaisedError, FencepostError } from '../core/errors';
// The store interfaces the memory stores implement, and the items they speak in: the `store` namespace of `fencepost`.
export type * from '../core/store/stores';
export type * from '../core/store/lock';
export type * from '../core/store/jobs';
export type * from '../core/store/manifest';
export type * from '../core/store/ledger';
export type { PgClient, PgPool, PgPoolClient, PgResult } from '../postgres/driver';
export type { Isolation } from '../postgres/sql';
export type { JobState } from '../core/schema';

/**
 * The epoch ledgers of one table, in memory (for `EpochFence` of `fencepost/election`).
 * @param clock - times the request tokens' 10 minutes
 */
export function memoryLedgerStore(clock: Clock): LedgerStore {
  return new MemoryLedgerStore(clock);
}

/** The PostgreSQL fence's twin: a pool for `postgresFence({ pool })`, and what it has committed. */
export interface PostgresTwin extends PgPool<PgPoolClient & { insert(table: string, key: string, row?: Record<string, unknown>): Promise<void> }> {
  /** The caller's committed rows of `table` (written with the client's `insert`), each with its key. */
  rows(table: string): Record<string, unknown>[];
  /** A fence row's committed values, oldest first, each with the commit that wrote it. */
  fenceHistory(key: string, table?: string): { readonly fence: number; readonly seq: number }[];
}

/**
 * An in-memory PostgreSQL for the PostgreSQL fence: it runs the fence's own statements as PostgreSQL does (row locks at
 * READ COMMITTED, snapshots at REPEATABLE READ and SERIALIZABLE) or as Aurora DSQL does (no locks, a conflict at
 * COMMIT), and your writes through the client's `insert(table, key, row)`; any other SQL is refused.
 */
export function memoryPostgres(options: { readonly concurrency?: Concurrency; readonly defaultIsolation?: Isolation } = {}): PostgresTwin {
  return new MemoryPostgres(options);
}

// The FencedJob's world loads the CDK (aws-cdk-lib, a peer) and the Lambda handlers: only when a test explores one.
const onDemand = createRequire(__filename);

/**
 * Explore your FencedJob's chunk function: `schedules` schedules from `seed`, each the workflow FencedJob synthesizes
 * for your job's shape (built in this process, with aws-cdk-lib), run with its real handlers around your work on fresh
 * in-memory stores, one virtual clock and fresh fakes, under seeded faults; each schedule checked by the workflow's
 * own checks, the checks of your acts and items, and yours.
 * @returns what broke, with the seed that replays it; empty `violations` when every schedule passed
 */
export async function exploreFencedJob<F = undefined>(options: ExploreFencedJobOptions<F>): Promise<ExploreJobResult> {
  const world = onDemand('./workflow/explore-fenced-job') as typeof import('./workflow/explore-fenced-job');
  return world.exploreFencedJob(options);
}

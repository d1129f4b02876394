/**
 * Fencepost: leases, fencing tokens and fenced writes on DynamoDB and S3, for any job that must run once in effect.
 *
 * The pieces, and what each guarantees (docs/DESIGN.md "Where each rule lives"):
 *
 *   lease     `withLease`: a clock-free claim that hands out a fencing token (the lease's epoch) higher than every
 *             earlier one for the key. It does NOT stop an earlier holder that is paused and wakes up believing it
 *             still holds the lease: only a fence does.
 *   fence     `fenceOn(...)`, held through the lease (`lease.fenced(fence)`, the lease's token bound to it): `raise()`
 *             first, then write with `guard()` in your own transactions (or `writeFenced`, any number of plain items):
 *             a write carrying a token below the fence's is refused by the store, whatever its holder believes.
 *   manifest  the same fence on S3: objects under token keys, one manifest committed with If-Match.
 *   sweeper   liveness only: re-queues jobs whose holder is gone; the fence keeps the data safe when it is wrong.
 *   restore   `bumpEpochs`: after a point-in-time restore of the lock table, every epoch is raised above any the
 *             restore may have rolled back.
 *
 * Stores: every function is given the stores it uses (`awsStores(clients, names)` builds the DynamoDB and S3 ones
 * from the clients `awsClients` / `localClients` make; `createTables` creates the two tables). Everything is injected
 * (stores, clock, events): nothing here knows Lambda, CDK or a CLI.
 *
 * @packageDocumentation
 */

// The lease (lib/core/with-lease.ts, lib/core/lease.ts) and its configuration
export { withLease } from './with-lease';
export { Lease, type LeaseDeps } from './lease';
export { LEASE_DEFAULTS, type LeaseConfig } from './config';

// The fence (lib/core/fence.ts) and the fenced batch built on its guard (lib/core/batch.ts)
export { Fence, fenceOn, type FenceTarget, type HeldFence } from './fence';
export { writeFenced, type BatchResult, type FencedWriteOptions } from './batch';

// The same fence on S3 (lib/core/manifest.ts)
export { ManifestWriter, readManifest, type ManifestBody, type ManifestChunk, type ManifestDeps, type ManifestPlace } from './manifest';

// Liveness and repair: the orphan sweeper (lib/core/sweeper.ts) and the restore bump (lib/core/restore.ts)
export { Sweeper, type SweepReport, type SweeperConfig, type SweeperDeps } from './sweeper';
export { bumpEpochs, type BumpReport } from './restore';

// Errors: what a holder catches
export {
  ClaimBudgetExhaustedError,
  ConfigError,
  FencedOutError,
  FenceNotRaisedError,
  FencepostError,
  LeaseLostError,
  StopTimePassedError,
} from './errors';

// The stores: built once from the clients (awsStores), injected into every function; the interfaces and their AWS
// implementations in the `store` namespace (lib/core/stores.ts), for a store of your own
export { awsStores } from './aws/stores';
export * as store from './stores';

// Clocks, clients, tables
export { systemClock, type Clock } from './clock';
export { awsClients, localClients, type Clients } from './aws/clients';
export { tableNames, type TableNames } from './schema';

/**
 * Fencepost: leases, fencing tokens and fenced writes on DynamoDB and S3, for any job that must run once in effect.
 *
 * The pieces, and what each guarantees (reference Parts 2 to 6; docs/DESIGN.md "Where each rule lives"):
 *
 *   lease     `claim` / `withLease`: a clock-free claim that hands out a fencing token higher than every earlier
 *             one for the key. It does NOT stop an earlier holder that is paused and wakes up believing it still
 *             holds the lease: only a fence does.
 *   fence     `fenceOn(...)`: `raise(token)` first, then write with `guard(token)` in your own transactions (or
 *             `writeBatch`): a write carrying a token below the fence's is refused by the store, whatever its
 *             holder believes.
 *   manifest  the same fence on S3: objects under token keys, one manifest committed with If-Match.
 *   job       a fenced job's run (`runJob`, or its pieces `raiseRun`, `chunkFence`, `markChunkDone`, `completeRun`):
 *             the job row and every chunk fence raised first, each chunk written through its own fence, DONE last.
 *   sweeper   liveness only: re-queues jobs whose holder is gone; the fence keeps the data safe when it is wrong.
 *   election  `Election.campaign`: candidates queue, the lowest leads with its sequence number as epoch, each
 *             watches only its predecessor. It does NOT guarantee one leader: write through an `EpochFence`.
 *   handover  `handover`: the single writer of a role changes with a gap (lease + margin), never an overlap, and
 *             the new writer's epoch is bumped in its store before its first write.
 *
 * Everything is injected (clients, clock, events): nothing here knows Lambda, CDK or a CLI.
 *
 * @packageDocumentation
 */

// The lease (core/lease.ts, core/with-lease.ts)
export {
  claim,
  claimRvnFor,
  Lease,
  nextClaimStep,
  pollMsOf,
  readLock,
  releaseClaimed,
  resume,
  sight,
  tryClaim,
  type ClaimStep,
  type LeaseDeps,
  type LockItem,
  type Sighting,
  type Watch,
} from './lease';
export { releaseQuietly, withLease } from './with-lease';

// The lock store seam (core/store/lock.ts): its DynamoDB implementation and the in-memory one that keeps its rules
export { EPOCH_FLOOR_KEY } from './store/lock';
export type { BumpPage, BumpView, ClaimOn, ClaimWrite, Holding, JoinRequest, LockStore, RemoveOn, RoleItem, WriteOutcome } from './store/lock';
export { AwsLockStore, lockStoreOf, type LockStoreSource } from './aws/lock-store';
export { MemoryLockStore, type MemoryLockStoreOptions } from './memory/lock-store';

// The fence (core/fence.ts) and the fenced batch built on its guard (core/batch.ts)
export { FENCE_CLAUSE, Fence, fenceOn, jobFence, type ChunkFence, type FenceDeps, type FenceTarget, type JobRow } from './fence';
export { fencedTransaction } from './aws/fence';
export type { DocumentClient } from './aws/document-client';
// The job store the job/chunk protocol and the fenced batch talk to (core/store/jobs.ts; DynamoDB: core/aws/job-store.ts)
export type { BatchOutcome, BatchPut, Conditional, FenceItem, FenceStore, JobStore, Page, RowRaise, WireItem } from './store/jobs';
export { writeBatch, type BatchFence, type BatchResult, type FencedPut } from './batch';
// The batched writer for users (plain document items, any number), and what it throws when the fence was never raised
export { writeFenced, type FencedWriteOptions } from './batch';
export { FenceNotRaisedError } from './errors';
export type { DocumentItem } from './store/jobs';

// A fenced job's run: its keys, its fences raised first, its chunks, its completion, the direct engine (core/job.ts)
export { JOB_NAME_PATTERN, chunkFenceKey, jobKeys, type JobKeys } from './job-keys';
export {
  chunkFence,
  completeRun,
  markChunkDone,
  outcomeOf,
  raiseRun,
  readRun,
  resumeManifest,
  runChunk,
  runJob,
  type CheckPoint,
  type ChunkContext,
  type ChunkWork,
  type DirectRun,
  type JobRun,
  type Outcome,
  type RaisedRun,
  type RunDeps,
  type RunHooks,
  type RunSummary,
} from './job';

// The same fence on S3 (core/manifest.ts)
export {
  ManifestWriter,
  chunkObjectKey,
  readManifest,
  type ManifestBody,
  type ManifestChunk,
  type ManifestDeps,
  type ManifestPlace,
} from './manifest';
export type { ManifestStore, PutOutcome, StoredObject } from './store/manifest';
export type { ManifestStoreSource } from './aws/manifest-store';

// Liveness and repair: the orphan sweeper (core/sweeper.ts) and the restore bump (core/restore.ts)
export {
  SWEEPER_DEFAULTS,
  Sweeper,
  decide,
  isOrphan,
  isStorm,
  requeue,
  sightClaimed,
  type ClaimSighting,
  type SweepReport,
  type SweeperConfig,
  type SweeperDeps,
} from './sweeper';
export { DEFAULT_BUMP, bumpEpochs, type BumpChange, type BumpReport, type FloorChange } from './restore';

// Leader election and single-writer handover, fenced at the resource by epoch (core/election.ts, core/handover.ts,
// core/epoch-fence.ts; docs/ELECTION.md)
export {
  Election,
  Leadership,
  candidateKey,
  ledgerKey,
  nameProblems,
  observeRole,
  roleKey,
  type CampaignOptions,
  type Departure,
  type ElectionReads,
  type LeaderView,
} from './election';
export { HANDOVER_DEFAULTS, Writer, handover, handoverProblems, writerLedgerKey, type HandoverConfig } from './handover';
export { EpochFence, LedgerWriter, entryKey, ledgerViolations, type EpochFenceTarget, type LedgerEntry, type LedgerHead } from './epoch-fence';
export type { ActionReason, AppendOutcome, LedgerStore, RaiseOutcome } from './store/ledger';
export type { LedgerStoreSource } from './aws/ledger-store';

// Clocks, configuration, errors, events
export { systemClock, VirtualClock, type Clock, type ClockTimer } from './clock';
export { LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION, dateProblem, leaseProblems, validateDate, validateLeaseConfig, type LeaseConfig } from './config';
export { METRICS_NAMESPACE, Metric, serviceName } from './observability';
export {
  AlreadyDoneError,
  ClaimBudgetExhaustedError,
  ConfigError,
  FencedOutError,
  FencepostError,
  InfrastructureError,
  LeaseLostError,
  NightIncompleteError,
  StopTimePassedError,
  VersionConflictError,
  type FencedResource,
} from './errors';
export { Events, type EventFields, type EventListener, type EventName, type EventStamp, type FencepostEvent, type SweepFields } from './events';

// Reading a cancelled transaction by its reasons (core/conditions.ts), for callers that send their own with a guard
export {
  DEFAULT_BACKOFF,
  cancellationReasons,
  classifyCancellation,
  isTransient,
  retryTransient,
  type Backoff,
  type BackoffPolicy,
  type Cancellation,
  type CancellationReason,
} from './conditions';

// The stores: clients, and the one description of the tables (core/aws/clients.ts, core/schema.ts)
export { awsClients, localClients, type Clients, type Endpoints } from './aws/clients';
export {
  Attr,
  CLAIM_SHARD,
  INVOICE_TABLE,
  JOB_TABLE,
  LOCK_TABLE,
  tableNames,
  type KeyAttribute,
  type TableDescription,
  type TableNames,
} from './schema';

// The auditor's generic checks, for any fenced job: its fence items, its manifest, the sparse index, its lock (core/audit.ts)
export {
  checkChunkFences,
  checkChunksDone,
  checkEpoch,
  checkManifest,
  checkSparseIndex,
  readFencedJob,
  scanAll,
  verdict,
  type AuditCheck,
  type FencedJobDeps,
  type FencedJobRef,
  type FencedJobState,
} from './audit';

/**
 * The repository's own barrel for its reference apps (under apps/), which may import only this and the
 * package's entries (test/unit/layers.test.ts): what they use of the core beyond the public entry (lib/core/index.ts), the
 * job engine, the auditor's checks, the schema. Not in the package's exports map: a user cannot import it, and its
 * names may change without notice.
 */
export * from './index';
// The store namespace's names, unqualified, for the repository's own layers.
export * from './stores';

// A fenced job's run: its keys, its fences raised first, its chunks, its completion, the direct engine (lib/core/job.ts)
export { chunkFenceKey, jobKeys } from './job-keys';
export {
  completeRun,
  raiseRun,
  runChunk,
  runJob,
  type ChunkWork,
  type JobRun,
  type Outcome,
  type RunDeps,
  type RunHooks,
  type RunSummary,
} from './job';
export { jobFence, type FenceDeps } from './fence';
// The raw fenced batch (wire-form puts, at most 99): the reference app's, which predates writeFenced
export { fencedTransaction, writeBatch, type FencedPut } from './batch';
export { heldFence } from './aws/fence';
export { chunkObjectKey } from './manifest';

// Configuration, events, metrics, retries, the schema
export { MAX_PUTS_PER_TRANSACTION, dateProblem, inWords, leaseProblems } from './config';
export { Events, type EventListener } from './events';
export { Metric } from './observability';
export { retryTransient } from './conditions';
export { Attr, DEFAULT_TABLE_PREFIX, JOB_TABLE, LOCK_TABLE, type KeyAttribute, type TableDescription } from './schema';

// The auditor's generic checks, for any fenced job (lib/core/audit.ts)
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
  type FencedJobState,
} from './audit';

/**
 * The stores a fenced job is given: built once where the process starts (awsStores on DynamoDB and S3, or the
 * in-memory ones in tests) and injected into every layer, which names only the stores it uses. No layer below that
 * sees a client or a table name.
 */
import type { JobStore } from './jobs';
import type { LockStore } from './lock';
import type { ManifestStore } from './manifest';

/** One store per table or bucket of a fenced job. */
export interface Stores {
  /** The lock table: leases, election roles, the restore bump. */
  readonly locks: LockStore;
  /** The job table: job rows, chunk fence items, the sparse index of claimed rows. */
  readonly jobs: JobStore;
  /** The manifest bucket. @defaultValue none: a job without a manifest (DynamoDB only) */
  readonly manifests?: ManifestStore;
}

/** The stores of a fenced job in memory: one place builds them, for `fencepost/testing`'s users and for `exploreJob`. */
import type { Clock } from '../core/clock';
import type { JobStore } from '../core/store/jobs';
import type { LockStore } from '../core/store/lock';
import type { ManifestStore } from '../core/store/manifest';
import { MemoryJobStore, type StoredItem } from './job-store';
import { MemoryLockStore } from './lock-store';
import { MemoryManifestStore } from './manifest-store';

/** The stores of a fenced job, in memory. */
export interface MemoryStores {
  /** The lock table's store: leases, election roles. */
  readonly locks: LockStore;
  /** The job table's store (the table `jobs`), which also holds the items of any other table by its name. */
  readonly jobs: JobStore & {
    /** Every item of a table as stored, for a test's checks. */
    dump(table: string): StoredItem[];
  };
  /** The manifest bucket's store. */
  readonly manifests: ManifestStore;
}

/**
 * The stores of a fenced job in memory, for a test: the lock store, the job store (its table named `jobs`; your own
 * items' tables live in it too, by name) and the manifest store.
 * @param clock - times the job store's request tokens (their 10 minutes): the test's VirtualClock
 */
export function memoryStores(clock: Clock): MemoryStores {
  return { locks: new MemoryLockStore(), jobs: new MemoryJobStore({ clock, jobs: 'jobs' }), manifests: new MemoryManifestStore() };
}

/** The stores of a fenced job in memory: one place builds them, for `fencepost/testing`'s users and for `exploreJob`. */
import type { Clock } from '../core/clock';
import type { JobStore } from '../core/store/jobs';
import type { LockStore } from '../core/store/lock';
import type { ManifestStore } from '../core/store/manifest';
import { MemoryJobStore, type StoredItem } from './job-store';
import { MemoryLockStore } from './lock-store';
import { MemoryManifestStore } from './manifest-store';
import { plainTables, type PlainTables } from './tables';

/** The stores of a fenced job, in memory. */
export interface MemoryStores {
  /** The lock table's store: leases, election roles. */
  readonly locks: LockStore;
  /** The job table's store (the table `jobs`), which also holds the items of any other table by its name. */
  readonly jobs: JobStore & {
    /** Every item of a table as stored, for a test's checks. */
    dump(table: string): StoredItem[];
  };
  /** Your own tables' plain (unfenced) reads and writes, on the job store's items: what `dump` and the fenced batch see. */
  readonly tables: PlainTables;
  /** The manifest bucket's store. */
  readonly manifests: ManifestStore;
}

/**
 * The stores of a fenced job in memory, for a test: the lock store, the job store (its table named `jobs`; your own
 * items' tables live in it too, by name), plain access to your own tables, and the manifest store.
 * @param clock - times the job store's request tokens (their 10 minutes): the test's VirtualClock
 * @param options - `keys`: each of your tables' partition key attribute, for a plain put (`pk` for a table not named)
 */
export function memoryStores(clock: Clock, options: { readonly keys?: Readonly<Record<string, string>> } = {}): MemoryStores {
  const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
  return { locks: new MemoryLockStore(), jobs, tables: plainTables(jobs, options.keys), manifests: new MemoryManifestStore() };
}

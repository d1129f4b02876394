/**
 * The stores as one explored schedule's actors see them. A world is given a `Broken` for each schedule: the plain
 * one (`plainStores`: every actor sees the stores themselves), or a variant that changes what some actors see, which
 * is how the repository proves its checks catch a rule broken on purpose. `restore` undoes a variant that patched a
 * shared class, before the checks run.
 */
import type { Clock } from '../core/clock';
import type { LeaseConfig } from '../core/config';
import type { JobStore, RequeueSighting } from '../core/store/jobs';
import type { LockStore } from '../core/store/lock';
import type { Actor } from './scheduler';

/** The stores as one schedule sees them, with a variant (if any) applied, and how to undo a patch. */
export interface Broken {
  /** The lock store as the sweeper sees it. */
  readonly locks: LockStore;
  /** The lock store one holder sees, given its clock (its own wall reading) and its lease. */
  locksFor(clock: Clock, lease: LeaseConfig): LockStore;
  /** The job store one holder sees; `steps` wraps a store so its calls are step boundaries of that holder. */
  jobsFor(actor: Actor, steps: (inner: JobStore) => JobStore): JobStore;
  /**
   * What one sweeper process uses: its job store and the `start` it passes to `sweep`, given the plain store, how
   * its calls become its step boundaries, and its StartExecution (a step boundary already).
   */
  sweeperFor(
    actor: Actor,
    steps: <T extends object>(inner: T) => T,
    jobs: JobStore,
    startExecution: StartRun,
  ): { readonly jobs: JobStore; readonly start: StartRun };
  restore(): void;
}

/** Starts a new run of a job's date for an orphan: the run's name comes from the fence the sweeper saw. */
type StartRun = (jobId: string, orphan: Pick<RequeueSighting, 'fence'>) => Promise<void>;

/** The stores themselves, for every actor: no variant. */
export function plainStores(stores: { readonly locks: LockStore; readonly jobs: JobStore }): Broken {
  const { locks, jobs } = stores;
  return {
    locks,
    locksFor: () => locks,
    jobsFor: () => jobs,
    sweeperFor: (_actor, steps, inner, startExecution) => ({ jobs: steps(inner), start: startExecution }),
    restore: () => undefined,
  };
}

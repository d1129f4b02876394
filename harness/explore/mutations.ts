/**
 * Deliberately broken variants of the rules, applied by the harness only (never the product code), to prove the
 * exploration's checks catch them (issue 19 item 4, "Prove it finds bugs"):
 *   fence-below      the store accepts a batch whose token is BELOW the fence (the fence comparison broken);
 *   no-stop-check    the lease's stop-time check does nothing (Lease.prototype.check patched for the schedule);
 *   epoch-deleted    releasing the lease deletes the lock item, so its epoch starts again from 1;
 *   raise-after      a holder raises each chunk fence only after its first write into the chunk;
 *   requeue-before-start  the sweeper's old order (issue 18 defect 1): record the re-queue by taking the row OUT of
 *                    the sparse index (state QUEUED, claim_shard removed), and only THEN start the new run.
 */
import { Lease } from '../../core/lease';
import type { MemoryLockStore } from '../../core/memory/lock-store';
import { Attr } from '../../core/schema';
import type { Conditional, FenceItem, JobRow, JobStore, RequeueSighting } from '../../core/store/jobs';
import type { LockStore } from '../../core/store/lock';
import type { Actor } from './scheduler';

export const MUTATIONS = ['fence-below', 'no-stop-check', 'epoch-deleted', 'raise-after', 'requeue-before-start'] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** The stores as one schedule sees them, with the mutation (if any) applied, and how to undo a patch. */
export interface Broken {
  readonly locks: LockStore;
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
    startExecution: (jobId: string) => Promise<void>,
  ): { readonly jobs: JobStore; readonly start: (jobId: string) => Promise<void> };
  restore(): void;
}

const override = <T extends object>(target: T, methods: Partial<T>): T =>
  new Proxy(target, { get: (t, prop, receiver) => (prop in methods ? methods[prop as keyof T] : Reflect.get(t, prop, receiver)) as unknown });

export function applyMutation(mutation: Mutation | undefined, stores: { readonly locks: LockStore; readonly jobs: JobStore }): Broken {
  const { locks, jobs } = stores;
  const plain: Broken = {
    locks,
    jobsFor: () => jobs,
    sweeperFor: (_actor, steps, inner, startExecution) => ({ jobs: steps(inner), start: startExecution }),
    restore: () => undefined,
  };
  switch (mutation) {
    case undefined:
      return plain;
    case 'fence-below':
      return {
        ...plain,
        jobsFor: () =>
          override(jobs, {
            // Checks the fence against the fence's own value: a token below it passes.
            recordBatch: async (fence, token, puts, requestToken) => {
              const current = Number((await jobs.readFence(fence))?.fence ?? token);
              return jobs.recordBatch(fence, Math.max(token, current), puts, requestToken);
            },
          }),
      };
    case 'no-stop-check': {
      const check = Object.getOwnPropertyDescriptor(Lease.prototype, 'check')!;
      Lease.prototype.check = () => undefined;
      return { ...plain, restore: () => Object.defineProperty(Lease.prototype, 'check', check) };
    }
    case 'epoch-deleted':
      return {
        ...plain,
        locks: override(locks, {
          release: async (key, holding, rvn, wallIso) => {
            const out = await locks.release(key, holding, rvn, wallIso);
            // The in-memory store keeps its items in a private map: the variant reaches behind it.
            if (out.ok) (locks as unknown as { items: Map<string, unknown> }).items.delete(key);
            return out;
          },
        } satisfies Partial<MemoryLockStore>),
      };
    case 'raise-after':
      return {
        ...plain,
        jobsFor: (_actor, steps) => {
          const stepped = steps(jobs);
          const deferred = new Map<string, { item: FenceItem; token: number }>();
          return override(jobs, {
            // A chunk fence's raise is answered as done but deferred to after the holder's first write there.
            raiseFence: async (item, token, set) => {
              if (!String(item.key.pk).includes('#chunk#')) return jobs.raiseFence(item, token, set);
              deferred.set(String(item.key.pk), { item, token });
              return { ok: true, old: await jobs.readFence(item) };
            },
            recordBatch: async (fence, token, puts, requestToken) => {
              const out = await jobs.recordBatch(fence, token, puts, requestToken);
              const late = deferred.get(String(fence.key.pk));
              if (late) {
                deferred.delete(String(fence.key.pk));
                await stepped.raiseFence(late.item, late.token);
              }
              return out;
            },
          });
        },
      };
    case 'requeue-before-start':
      return {
        ...plain,
        sweeperFor: (_actor, steps, inner, startExecution) => {
          // The old write: QUEUED and out of the sparse index, on the row as sighted. The in-memory store keeps its
          // conditional update private: the variant reaches behind it (the index follows the write there).
          const update = (inner as unknown as { update: Update }).update.bind(inner);
          const old = steps({
            requeueOut: async (jobId: string, seen: RequeueSighting) =>
              update(
                'jobs',
                { [Attr.pk]: jobId },
                (row) =>
                  row?.state === 'RUNNING' &&
                  row.owner_token === seen.ownerToken &&
                  row.fence === seen.fence &&
                  (row.requeues ?? 0) === seen.requeues,
                { [Attr.state]: 'QUEUED', [Attr.requeues]: seen.requeues + 1 },
                [Attr.claimShard, Attr.claimedSince],
              ),
          });
          return {
            // `sweep` calls start first: the broken order defers it to after the write.
            start: async () => undefined,
            jobs: override(steps(inner), {
              requeue: async (jobId, seen) => {
                const out = await old.requeueOut(jobId, seen);
                if (out.ok) await startExecution(jobId);
                return out;
              },
            }),
          };
        },
      };
  }
}

type Update = (
  table: string,
  key: Record<string, unknown>,
  condition: (old: Partial<JobRow> | undefined) => boolean,
  set: Record<string, unknown>,
  remove: readonly string[],
) => Conditional<JobRow>;

/**
 * Deliberately broken variants of the rules, applied by the harness only (never the product code), to prove the
 * exploration's checks catch them (issue 19 item 4, "Prove it finds bugs"):
 *   fence-below      the store accepts a batch whose token is BELOW the fence (the fence comparison broken);
 *   no-stop-check    the lease's stop-time check does nothing (Lease.prototype.check patched for the schedule);
 *   epoch-deleted    releasing the lease deletes the lock item, so its epoch starts again from 1;
 *   raise-after      a holder raises each chunk fence only after its first write into the chunk.
 */
import { Lease } from '../../core/lease';
import type { MemoryLockStore } from '../../core/memory/lock-store';
import type { FenceItem, JobStore } from '../../core/store/jobs';
import type { LockStore } from '../../core/store/lock';
import type { Actor } from './scheduler';

export const MUTATIONS = ['fence-below', 'no-stop-check', 'epoch-deleted', 'raise-after'] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** The stores as one schedule sees them, with the mutation (if any) applied, and how to undo a patch. */
export interface Broken {
  readonly locks: LockStore;
  /** The job store one holder sees; `steps` wraps a store so its calls are step boundaries of that holder. */
  jobsFor(actor: Actor, steps: (inner: JobStore) => JobStore): JobStore;
  restore(): void;
}

const override = <T extends object>(target: T, methods: Partial<T>): T =>
  new Proxy(target, { get: (t, prop, receiver) => (prop in methods ? methods[prop as keyof T] : Reflect.get(t, prop, receiver)) as unknown });

export function applyMutation(mutation: Mutation | undefined, stores: { readonly locks: LockStore; readonly jobs: JobStore }): Broken {
  const { locks, jobs } = stores;
  const plain: Broken = { locks, jobsFor: () => jobs, restore: () => undefined };
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
  }
}

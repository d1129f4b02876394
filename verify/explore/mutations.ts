/**
 * Deliberately broken variants of the rules, applied by the harness only (never the product code), to prove the
 * exploration's checks catch them (issue 19 item 4, "Prove it finds bugs"):
 *   fence-below      the store accepts a batch whose token is BELOW the fence (the fence comparison broken);
 *   no-stop-check    the lease's stop-time check does nothing (Lease.prototype.check patched for the schedule);
 *   epoch-deleted    releasing the lease deletes the lock item, so its epoch starts again from 1;
 *   raise-after      a holder raises each chunk fence only after its first write into the chunk;
 *   requeue-before-start  the sweeper's old order (issue 18 defect 1): record the re-queue by taking the row OUT of
 *                    the sparse index (state QUEUED, claim_shard removed), and only THEN start the new run;
 *   claim-on-wall-clock   the naive lease, timed by wall clocks: `lease_until` written from the writer's wall clock,
 *                    the claim conditional on `attribute_not_exists(holder) OR lease_until < :claimant_now_minus_margin`,
 *                    instead of a full lease's wait on an unchanged rvn;
 *   fence-lt         THE fence comparison (lib/core/aws/job-store.ts FENCE_CLAUSE, `fence <= :t`) written `fence < :t`:
 *                    the batch's check and the raises refuse a token equal to the fence.
 */
import type { Clock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import { Lease, pollMsOf } from '../../lib/core/lease';
import { transactionCanceled } from '../../lib/testing/dynamo-rules';
import type { MemoryLockStore } from '../../lib/testing/lock-store';
import { Attr } from '../../lib/core/schema';
import type { Conditional, FenceItem, JobRow, JobStore, RequeueSighting } from '../../lib/core/store/jobs';
import type { ClaimOn, LockItem, LockStore } from '../../lib/core/store/lock';
import type { Actor } from './scheduler';

export const MUTATIONS = [
  'fence-below',
  'no-stop-check',
  'epoch-deleted',
  'raise-after',
  'requeue-before-start',
  'claim-on-wall-clock',
  'fence-lt',
] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** The stores as one schedule sees them, with the mutation (if any) applied, and how to undo a patch. */
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

/** Starts a night's new run for an orphan: the run's name comes from the fence the sweeper saw. */
type StartRun = (jobId: string, orphan: Pick<RequeueSighting, 'fence'>) => Promise<void>;

const override = <T extends object>(target: T, methods: Partial<T>): T =>
  new Proxy(target, { get: (t, prop, receiver) => (prop in methods ? methods[prop as keyof T] : Reflect.get(t, prop, receiver)) as unknown });

export function applyMutation(mutation: Mutation | undefined, stores: { readonly locks: LockStore; readonly jobs: JobStore }): Broken {
  const { locks, jobs } = stores;
  const plain: Broken = {
    locks,
    locksFor: () => locks,
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
    case 'epoch-deleted': {
      const deleting = override(locks, {
        release: async (key, holding, rvn, wallIso) => {
          const out = await locks.release(key, holding, rvn, wallIso);
          // The in-memory store keeps its items in a private map: the variant reaches behind it.
          if (out.ok) (locks as unknown as { items: Map<string, unknown> }).items.delete(key);
          return out;
        },
      } satisfies Partial<MemoryLockStore>);
      return { ...plain, locks: deleting, locksFor: () => deleting };
    }
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
                if (out.ok) await startExecution(jobId, seen);
                return out;
              },
            }),
          };
        },
      };
    case 'claim-on-wall-clock': {
      // The in-memory store keeps its items private: the variant keeps lease_until on them, behind its back.
      const items = (locks as unknown as { items: Map<string, Record<string, unknown>> }).items;
      const until = (key: string) => Number(items.get(key)?.lease_until ?? 0);
      const write = (key: string, ms: number) => void (items.get(key) && (items.get(key)!.lease_until = ms));
      return {
        ...plain,
        locksFor: (clock, lease) => {
          // The claimant's now, minus the margin, against the writer's lease_until: two clocks compared.
          const over = (key: string, claimantWallMs: number) => until(key) < claimantWallMs - lease.marginMs;
          return override(locks, {
            // A lease over on our wall clock reads as free: the naive claimant claims at once.
            read: async (key) => {
              const item = await locks.read(key);
              if (item?.holder === undefined || !over(key, clock.wallMs())) return item;
              const free: Record<string, unknown> = { ...item };
              delete free.holder;
              return free as unknown as LockItem;
            },
            claim: async (key, _on, w) => {
              const item = items.get(key);
              if (item?.holder !== undefined && !over(key, Date.parse(w.wallIso))) {
                // Refused: the naive claimant polls again a poll period later (the real loop would retry at once).
                await clock.sleep(pollMsOf(lease));
                return { ok: false, current: await locks.read(key) };
              }
              const on: ClaimOn = item?.holder === undefined ? { free: true } : { rvn: String(item.rvn) };
              const out = await locks.claim(key, on, w);
              if (out.ok) write(key, Date.parse(w.wallIso) + lease.leaseMs);
              return out;
            },
            renew: async (key, holding, rvn, wallIso) => {
              const out = await locks.renew(key, holding, rvn, wallIso);
              if (out.ok) write(key, Date.parse(wallIso) + lease.leaseMs);
              return out;
            },
            release: async (key, holding, rvn, wallIso) => {
              const out = await locks.release(key, holding, rvn, wallIso);
              if (out.ok) write(key, 0);
              return out;
            },
          } satisfies Partial<LockStore>);
        },
      };
    }
    case 'fence-lt': {
      // `fence < :t` differs from `fence <= :t` only at equality: refuse exactly that, as the store would refuse it.
      const equal = (item: { readonly [Attr.fence]?: unknown } | undefined, token: number) =>
        item?.[Attr.fence] !== undefined && Number(item[Attr.fence]) === token;
      return {
        ...plain,
        jobsFor: () =>
          override(jobs, {
            recordBatch: async (fence, token, puts, requestToken) => {
              const current = await jobs.readFence(fence);
              if (!equal(current, token)) return jobs.recordBatch(fence, token, puts, requestToken);
              const reasons = [{ Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: current }];
              return { kind: 'fenced-out', current, cause: transactionCanceled([...reasons, ...puts.map(() => ({ Code: 'None' }))]) };
            },
            raiseFence: async (item, token, set) => {
              const current = await jobs.readFence(item);
              return equal(current, token) ? { ok: false, current } : jobs.raiseFence(item, token, set);
            },
            raiseJob: async (jobId, r) => {
              const current = await jobs.readJob(jobId);
              return equal(current, r.token) ? { ok: false, current } : jobs.raiseJob(jobId, r);
            },
          }),
      };
    }
  }
}

type Update = (
  table: string,
  key: Record<string, unknown>,
  condition: (old: Partial<JobRow> | undefined) => boolean,
  set: Record<string, unknown>,
  remove: readonly string[],
) => Conditional<JobRow>;

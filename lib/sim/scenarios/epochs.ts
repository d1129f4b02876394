/**
 * TTL on the lock item resets the epoch, on the
 * REAL code (issue 19, item 5): the claims are lib/core/lease.ts `claim` (clock-free) on the in-memory lock store, each
 * holder's first act is lib/core/job.ts `raiseRun` on the in-memory job store, releases are `Lease.release` (clear holder,
 * keep the item). The TTL delete is the world's: the item is gone, so the next claim finds no epoch to count from.
 *
 *   A claims the free lock (epoch 1), raises the fence, and dies holding it; D watches A's rvn a full lease and
 *   claims (2); D releases; A2 claims the free lock (3) and releases; then, with TTL on, the item is deleted and E's
 *   claim starts again at 1: a token the fence has seen, so E's raise is refused. Without TTL, E gets 4.
 */
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import { FencedOutError } from '../../core/errors';
import type { FencepostEvent } from '../../core/events';
import { jobKeys } from '../../core/job-keys';
import { raiseRun } from '../../core/job';
import { claim, type Lease } from '../../core/lease';
import { MemoryLockStore } from '../../testing/lock-store';
import type { SimRow } from '../engine';
import { RealWorld, ReplaceableLockStore, type RealWorker } from '../real';
import { Checks, type Scenario } from '../scenario';

const DATE = '2026-09-28';

/** The schedule: who starts claiming when, and when the holders that release do. */
const SCHEDULE = {
  aAt: 0,
  dAt: 500,
  dReleasesAt: 15_000,
  a2At: 16_000,
  a2ReleasesAt: 20_000,
  /** With TTL on, the item is deleted at (TTL's delete comes days after expiry; here, soon after the release). */
  ttlDeleteAt: 25_000,
  eAt: 26_000,
} as const;

function describe(e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined {
  switch (e.event) {
    case 'claim':
      return {
        event: 'claims the lock item: epoch = if_not_exists(epoch, 0) + 1',
        token: e.token,
        note: `rvn watched unchanged ${e.waitedMs / 1000} s`,
      };
    case 'fence-raised':
      return { event: 'raises the fence first', token: e.token, fence: e.token, note: `was ${e.previousFence ?? 'unset'}` };
    case 'released':
      return { event: 'releases: clears holder, keeps the item', token: e.token };
    default:
      return undefined;
  }
}

/** One run of the epochs' story, with or without TTL on the lock item. */
async function playEpochs(ttl: boolean) {
  const config: LeaseConfig = { ...LEASE_DEFAULTS };
  let table: ReplaceableLockStore | undefined;
  const world = new RealWorld(0, config.leaseMs, describe, (clock) => {
    table = new ReplaceableLockStore(new MemoryLockStore({ clock }));
    return table.store;
  });
  const keys = jobKeys('billing');
  const epochs: number[] = [];
  const refused: { who: string; token: number; fence: number | undefined }[] = [];
  const leases = new Map<string, Lease>();

  /** Claim (clock-free), then raise the fence first; a refused raise is the fence seeing a token again. */
  const holder = (w: RealWorker) => async () => {
    const lease = await claim(w.deps, keys.lock(DATE), w.name, config);
    epochs.push(lease.token);
    leases.set(w.name, lease);
    try {
      await raiseRun(w.deps, { keys, date: DATE, chunks: 1 }, lease);
    } catch (err) {
      if (!(err instanceof FencedOutError)) throw err;
      refused.push({ who: w.name, token: lease.token, fence: err.fence });
      world.log(w.name, 'raise REFUSED by the fence: this epoch was handed out before', { token: lease.token, fence: err.fence, note: err.message });
    }
  };
  const [A, D, A2, E] = ['A', 'D', 'A2', 'E'].map((n) => world.worker(n));
  const release = (w: RealWorker) => () => void leases.get(w.name)?.release();
  world.at(SCHEDULE.aAt, () => void holder(A)());
  world.at(SCHEDULE.aAt + 1, () => A.crash()); // dies holding it, renewing nothing
  world.at(SCHEDULE.dAt, () => void holder(D)());
  world.at(SCHEDULE.dReleasesAt, release(D));
  world.at(SCHEDULE.a2At, () => void holder(A2)());
  world.at(SCHEDULE.a2ReleasesAt, release(A2));
  if (ttl)
    world.at(SCHEDULE.ttlDeleteAt, () => {
      table!.replace(new MemoryLockStore({ clock: world.clock })); // the item is gone, epoch and all
      world.log('lock item', 'TTL deletes the item', { note: 'the epoch is gone with it' });
    });
  world.at(SCHEDULE.eAt, () => void holder(E)());
  await world.clock.runUntilIdle();
  const row = await world.jobs.readJob(keys.job(DATE));
  return { world, epochs, refused, fence: row?.fence };
}

export const ttlEpochsScenario: Scenario = {
  name: 'ttl-epochs',
  title: "TTL on the lock item resets the epoch: 1, 2, 3, then 1 again; the never-TTL'd item goes on to 4",
  claim:
    'never put TTL on an item that carries the epoch (a deleted item starts again at 1, a token the fence already saw); release by clearing holder (on the real lease and fence)',
  async run() {
    const withTtl = await playEpochs(true);
    const never = await playEpochs(false);
    const rows = [
      ...withTtl.world.rows.map((r) => ({ ...r, actor: `${r.actor} [TTL]` })),
      ...never.world.rows.map((r) => ({ ...r, actor: `${r.actor} [no TTL]` })),
    ].sort((x, y) => x.t - y.t);
    // Every claim adds 1 to the item's epoch; the TTL delete takes the item, so the claim after it counts from 0 again.
    const claims = 4;
    const beforeDelete = [SCHEDULE.aAt, SCHEDULE.dAt, SCHEDULE.a2At].filter((t) => t < SCHEDULE.ttlDeleteAt).length;
    const counted = Array.from({ length: claims }, (_, k) => k + 1);
    const reset = [...counted.slice(0, beforeDelete), ...counted.slice(0, claims - beforeDelete)];
    const checks = new Checks()
      .eq('epochs with TTL on the item', reset.join(','), withTtl.epochs.join(','))
      .eq("epochs on the never-TTL'd item", counted.join(','), never.epochs.join(','))
      .eq('the fence refuses the repeated epoch (raises refused)', 1, withTtl.refused.length)
      .eq('with TTL, the fence stays at', beforeDelete, withTtl.fence)
      .eq('without TTL, the fence reaches', claims, never.fence);
    const marks = withTtl.world.marks.concat(
      withTtl.world.events.flatMap((x) =>
        x.e.event === 'fence-raised' ? [{ lane: 'store', kind: 'fence' as const, from: x.t, label: `fence ${x.e.token}` }] : [],
      ),
      withTtl.refused.map((r) => ({ lane: 'store', kind: 'refused' as const, from: SCHEDULE.eAt, label: `${r.who} ${r.token} refused` })),
    );
    return { name: this.name, title: this.title, claim: this.claim, rows, marks, checks: checks.list };
  },
};

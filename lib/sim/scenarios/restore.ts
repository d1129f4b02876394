/**
 * A restore of the lock table on the
 * REAL code (issue 19, item 5): the claims are lib/core/lease.ts `claim`, each holder raises the fences first with
 * lib/core/job.ts `raiseRun` and writes with lib/core/batch.ts `writeBatch` through the chunk's fence, and the bump is
 * lib/core/restore.ts `bumpEpochs` (what `fencepost bump-epochs` runs), all on the in-memory stores. The restore itself is
 * the world's: the lock table swapped for the items as the backup had them.
 *
 *   A and B each claim the night's lock and release it; a backup of the lock table is taken (the epoch is 2); C
 *   claims (3) and raises the fences. The table is restored from the backup: D's claim gets 3 again, C's token, and
 *   the fence, which accepts equal tokens, lets both write. With the bump run after the restore, D gets
 *   2 + 1,000,000 + 1 and C's next write is refused.
 */
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import { writeBatch } from '../../core/batch';
import { FencedOutError } from '../../core/errors';
import type { FencepostEvent } from '../../core/events';
import { jobKeys } from '../../core/job-keys';
import { chunkFence, raiseRun } from '../../core/job';
import { claim, type Lease } from '../../core/lease';
import { MemoryLockStore } from '../../testing/lock-store';
import { bumpEpochs, DEFAULT_BUMP } from '../../core/restore';
import type { SimRow, TimelineMark } from '../engine';
import { RealWorld, ReplaceableLockStore, type RealWorker } from '../real';
import { Checks, type Scenario } from '../scenario';

const DATE = '2026-09-28';
const KEYS = jobKeys('billing');
const RUN = { keys: KEYS, date: DATE, chunks: 1 } as const;

/** The schedule (ms): who claims when, the backup, the restore, C's write after D's raise. */
const SCHEDULE = {
  holders: [
    { name: 'A', claimAt: 0, releaseAt: 10_000 },
    { name: 'B', claimAt: 10_000, releaseAt: 20_000 },
  ],
  backupAt: 30_000,
  cAt: 40_200,
  restoreAt: 45_000,
  dAt: 45_500,
  cWritesAt: 46_000,
} as const;

function describe(e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined {
  switch (e.event) {
    case 'claim':
      return { event: 'claims the lock item', token: e.token };
    case 'fence-raised':
      return { event: 'raises the fences first', token: e.token, fence: e.token, note: `was ${e.previousFence ?? 'unset'}` };
    case 'released':
      return { event: 'releases: clears holder, keeps the item', token: e.token };
    case 'batch-committed':
      return { event: `writes a batch of ${e.recorded}`, token: e.token, note: 'the fence accepted it' };
    case 'batch-rejected':
      return { event: 'batch REFUSED by the fence', token: e.token, fence: e.fence, note: 'nothing written' };
    default:
      return undefined;
  }
}

/** One run: restored without a bump (`bump` 0) or with it. */
async function playRestore(bump: number) {
  const config: LeaseConfig = { ...LEASE_DEFAULTS };
  let table: ReplaceableLockStore | undefined;
  const world = new RealWorld(0, config.leaseMs, describe, (clock) => {
    table = new ReplaceableLockStore(new MemoryLockStore({ clock }));
    return table.store;
  });
  const tokens: Record<string, number> = {};
  const leases = new Map<string, Lease>();
  let backupEpoch: number | undefined;
  const jobDeps = (w: RealWorker) => ({ ...w.deps, random: () => 0.5 });
  const take = async (w: RealWorker) => {
    const lease = await claim(w.deps, KEYS.lock(DATE), w.name, config);
    tokens[w.name] = lease.token;
    leases.set(w.name, lease);
    await raiseRun(jobDeps(w), RUN, lease);
  };
  /** One batch through the chunk's fence, with the holder's token. */
  const write = async (w: RealWorker, n: number) => {
    const lease = leases.get(w.name)!;
    const puts = [{ table: 'invoices', item: { pk: { S: `inv#${DATE}#${w.name}-${n}` } } }];
    try {
      const out = await writeBatch(lease.fenced(chunkFence(jobDeps(w), RUN, 0)), puts);
      w.events.emit('batch-committed', {
        token: lease.token,
        chunk: 0,
        batch: n,
        recorded: out.recorded.length,
        alreadyRecorded: 0,
        transactions: out.transactions,
        first: 0,
      });
      return true;
    } catch (err) {
      if (!(err instanceof FencedOutError)) throw err;
      w.events.emit('batch-rejected', { token: lease.token, chunk: 0, batch: n, fence: err.fence });
      return false;
    }
  };
  for (const h of SCHEDULE.holders) {
    const w = world.worker(h.name);
    world.at(h.claimAt, () => void take(w));
    world.at(h.releaseAt, () => void leases.get(h.name)?.release());
  }
  world.at(SCHEDULE.backupAt, () => {
    void world.locks.read(KEYS.lock(DATE)).then((item) => {
      backupEpoch = item?.epoch === undefined ? undefined : Number(item.epoch);
      world.log('lock table', 'a backup is taken', { note: `the item's epoch is ${backupEpoch}` });
    });
  });
  const [C, D, operator] = ['C', 'D', 'operator'].map((n) => world.worker(n));
  world.at(SCHEDULE.cAt, () => void take(C));
  world.at(SCHEDULE.restoreAt, () => {
    // The items as the backup had them: the same claims and releases, replayed on an empty table.
    const restored = new MemoryLockStore({ clock: world.clock });
    table!.replace(restored);
    world.log('lock table', 'restored from the backup', { note: `epoch back to ${backupEpoch}` });
    void (async () => {
      for (let e = 0; e < (backupEpoch ?? 0); e++) {
        const out = await restored.claim(KEYS.lock(DATE), { free: true }, { holder: 'backup', leaseMs: config.leaseMs, rvn: `r${e}`, wallIso: '' });
        if (out.ok) await restored.release(KEYS.lock(DATE), { holder: 'backup', epoch: Number(out.item.epoch) }, `r${e}x`, '');
      }
      if (bump === 0) return;
      const report = await bumpEpochs({ locks: operator.locks }, { by: bump, runId: 'restore-1', dryRun: false });
      world.log('operator', `bump-epochs: every epoch + ${bump.toLocaleString('en-US')}`, {
        note: report.changed.map((c) => `${c.from} → ${c.to}`).join(', '),
      });
    })();
  });
  world.at(SCHEDULE.dAt, () => void take(D));
  const results: Record<string, boolean> = {};
  world.at(SCHEDULE.cWritesAt, () => void write(C, 1).then((ok) => (results.C = ok)));
  await world.clock.runUntilIdle(); // C and D renew nothing: no heartbeat keeps the world busy
  return { world, tokens, backupEpoch: backupEpoch ?? NaN, cWrote: results.C };
}

export const restoreScenario: Scenario = {
  name: 'restore',
  title: 'A restore of the lock table on the real code hands out C\u2019s token again; bump-epochs gives backup + 1,000,000 + 1',
  claim: 'every restore must jump the epochs (fencepost bump-epochs), or tokens repeat and the fence cannot tell two holders apart',
  async run() {
    const plain = await playRestore(0);
    const bumped = await playRestore(DEFAULT_BUMP);
    const rows = [
      ...plain.world.rows.map((r) => ({ ...r, actor: `${r.actor} [no bump]` })),
      ...bumped.world.rows.map((r) => ({ ...r, actor: `${r.actor} [bump]` })),
    ].sort((a, b) => a.t - b.t);
    // Every claim adds 1 to the item's epoch: A and B before the backup, C after it.
    const atBackup = SCHEDULE.holders.filter((h) => h.claimAt < SCHEDULE.backupAt).length;
    const checks = new Checks()
      .eq('the backup holds epoch', atBackup, plain.backupEpoch)
      .eq("C's token", atBackup + 1, plain.tokens.C)
      .eq('no bump: D gets C\u2019s token again', plain.tokens.C, plain.tokens.D)
      .eq("no bump: the fence accepts C's write after D's raise (equal tokens)", true, plain.cWrote)
      .eq(`with the bump: D's token = ${atBackup} + ${DEFAULT_BUMP.toLocaleString('en-US')} + 1`, atBackup + DEFAULT_BUMP + 1, bumped.tokens.D)
      .eq("with the bump the fence refuses C's write", false, bumped.cWrote);
    const marks: TimelineMark[] = [...bumped.world.marks];
    for (const x of bumped.world.events) {
      if (x.e.event === 'fence-raised') marks.push({ lane: 'store', kind: 'fence', from: x.t, label: `fence ${x.e.token}` });
      if (x.e.event === 'batch-rejected') marks.push({ lane: 'store', kind: 'refused', from: x.t, label: `${x.e.worker} ${x.e.token} refused` });
    }
    return { name: this.name, title: this.title, claim: this.claim, rows, marks, checks: checks.list };
  },
};

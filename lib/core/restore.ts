/**
 * The restore bump (docs/DESIGN.md "The restore bump").
 *
 * The rule: a token is never handed out twice, and a claim hands out the lock item's epoch + 1. A point-in-time
 * restore of the lock table returns every epoch to its old value, and the next claim would then hand out a token the
 * stores have already seen (the fences would refuse its holder: safe, but the run is stuck). Before a restored table
 * is used, every epoch jumps by a large amount (DEFAULT_BUMP), so every future token is above every old one.
 *
 * A key the backup lacks (first claimed after the backup was taken: a run's lock, a role's first campaign) has no
 * item to bump, and would start again at 1. So the bump also raises the epoch floor (EPOCH_FLOOR_KEY, one reserved
 * item) by the same amount, FIRST, and every item created after starts above it (etcd's --bump-revision: keys
 * created after the restore are above the bump too). A run that dies between the floor and the items leaves the
 * items unbumped; the same run id again skips the floor and bumps them.
 *
 * Each item's bump is one conditional write that records the run id in the item (`bump_runs`), so a run can be
 * repeated or resumed after a crash without bumping any item twice. Nothing is deleted; holders are left as they
 * are (a restored holder's renewals now fail on the epoch, and a claimant waits out its lease as usual).
 */
import { EPOCH_FLOOR_KEY, type RestoreStore } from './store/lock';

/** The default bump: far above any token the runs since a backup can have handed out. */
export const DEFAULT_BUMP = 1_000_000;

/** What a bump run did: the floor, every item scanned, the epochs it moved, the items an earlier try of the same run had bumped. */
export interface BumpReport {
  /** The run's id: a retry with the same id skips the items this run already bumped. */
  readonly runId: string;
  /** How much each epoch, and the floor, was raised by. */
  readonly by: number;
  /** True when nothing was written: the report says what a real run would do. */
  readonly dryRun: boolean;
  /** The epoch floor, before and after the bump: every lock item created after starts above `to`. */
  readonly floor: {
    readonly from: number;
    readonly to: number;
    /** Already raised by this run id (a repeated or resumed run): `from` and `to` are the floor as it is. */
    readonly alreadyRaised: boolean;
  };
  /** Lock items scanned (the floor item is not one). */
  readonly scanned: number;
  /** Each lock item's epoch this run moved, before and after. */
  readonly changed: { readonly key: string; readonly from: number; readonly to: number }[];
  /** Already bumped by this run id (a repeated or resumed run). */
  readonly alreadyBumped: string[];
}

/**
 * Raise the epoch floor, then bump every lock item's epoch, by `by`, once per run id, so no token handed out after a
 * restore repeats one the stores have seen, on a key the restored table holds or on one it lacks. Guarantees: the
 * floor and each item are raised at most once per run id, however often the run is repeated or resumed.
 * Does not guarantee anything about holders that keep writing with a restored token until the bump: run it before
 * the restored table is used.
 */
export async function bumpEpochs(deps: { readonly locks: RestoreStore }, opts: { by: number; runId: string; dryRun: boolean }): Promise<BumpReport> {
  const store = deps.locks;
  const report: { -readonly [K in keyof BumpReport]: BumpReport[K] } = {
    runId: opts.runId,
    by: opts.by,
    dryRun: opts.dryRun,
    floor: opts.dryRun ? { from: 0, to: opts.by, alreadyRaised: false } : await raiseFloor(store, opts.by, opts.runId),
    scanned: 0,
    changed: [],
    alreadyBumped: [],
  };
  let start: string | undefined;
  do {
    const page = await store.scanPage(start);
    for (const item of page.items) {
      if (item.key === EPOCH_FLOOR_KEY) {
        // A dry run reports the floor as the scan found it (a never-raised floor has no item: from 0).
        if (opts.dryRun) {
          const alreadyRaised = item.bumpRuns.includes(opts.runId);
          report.floor = { from: item.epoch, to: alreadyRaised ? item.epoch : item.epoch + opts.by, alreadyRaised };
        }
        continue;
      }
      report.scanned++;
      if (item.bumpRuns.includes(opts.runId)) {
        report.alreadyBumped.push(item.key);
        continue;
      }
      if (opts.dryRun) {
        report.changed.push({ key: item.key, from: item.epoch, to: item.epoch + opts.by });
        continue;
      }
      // One conditional write per item, recording the run id: a repeat or a resumed run never bumps twice.
      const out = await store.bump(item.key, opts.by, opts.runId);
      if (out.ok) report.changed.push({ key: item.key, from: out.from, to: out.from + opts.by });
      else report.alreadyBumped.push(item.key);
    }
    start = page.next;
  } while (start !== undefined);
  return report;
}

/** The floor first: from this write on, every item created starts above every epoch the restored table may repeat. */
async function raiseFloor(store: RestoreStore, by: number, runId: string): Promise<BumpReport['floor']> {
  const out = await store.raiseFloor(by, runId);
  if (out.ok) return { from: out.from, to: out.from + by, alreadyRaised: false };
  const floor = await store.readFloor();
  return { from: floor, to: floor, alreadyRaised: true };
}

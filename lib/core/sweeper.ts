/**
 * The orphan sweeper (docs/DESIGN.md "The sweeper"): finds job rows still RUNNING whose holder is
 * gone, and re-queues them.
 *
 * It is liveness only. The fence keeps the data safe even when the sweeper is wrong: a wrongly re-queued job is
 * taken by a new holder with a higher token, and the old holder's writes are then refused by the fence.
 *
 *   1. read ONLY the sparse index: claimed rows are the only rows in it (never scan the job table);
 *   2. for each, ask the authority (the lock item) whether a lease is alive, without comparing clocks:
 *      a first sighting notes the lock's rvn (or that it is free); a second sighting at least one full lease
 *      later, on the sweeper's own monotonic clock, that finds the same rvn (or the lock still free) means
 *      nobody renewed in a whole lease: an orphan. A holder caught between its claim and its fence raise is
 *      never swept: its renewals change the rvn;
 *   3. never storm: if more than a set share of the claimed rows look dead at once, the likely cause is our own
 *      renewal path failing, not the holders: re-queue none, report a storm (metric + alarm);
 *   4. otherwise re-queue at a bounded rate: START the new run first, THEN record the re-queue with one
 *      conditional write (state = RUNNING AND owner_token = :seen AND fence = :seen AND requeues = :seen) that
 *      only counts it. The row stays RUNNING, the dead holder's, in the index, until the new run's raise takes it
 *      over (a higher fence). So whichever step dies (this sweeper, or the new run before its raise), the next
 *      sweeps see the row unchanged for a full lease again and start another run; a new holder that raised in
 *      between makes the write fail and do nothing (docs/DESIGN.md "Crash answers");
 *   5. never loop on a poison run: an orphan already re-queued `maxRequeuesPerRun` times is given up, not re-queued.
 *      Giving up writes nothing: the row stays RUNNING in the index with its count, every later sweep that finds it an
 *      orphan names it again (`givenUp`, the RunsGivenUp metric in AWS), and a person re-arms it by removing its
 *      `requeues` (docs/DESIGN.md "A poison run").
 * It reads and writes job rows only. Chunk fence items (docs/DESIGN.md § Chunk fences) never carry claim_shard, so
 * they are never in the index; a re-queue leaves them as they are, and the next holder raises the job row first and
 * then every chunk fence, learning the progress from them.
 */
import type { Clock } from './clock';
import { LEASE_DEFAULTS } from './config';
import type { Events } from './events';
import { claimedRows } from './fence';
import { claimShard } from './job-keys';
import { readLock } from './lease';
import type { JobStore } from './store/jobs';
import type { LeaseStore } from './store/lock';
import type { SweepReport } from './sweep-report';

export type { SweepReport } from './sweep-report';

/** The sweeper's settings: how long a lease to wait between sightings, and the storm rule's bounds. */
export interface SweeperConfig {
  /** The lease to wait between two sightings when the lock item does not declare one. @default 10000 */
  readonly leaseMs: number;
  /** Above this share of claimed rows looking dead at once, re-queue none (a storm). @default 0.5 */
  readonly stormShare: number;
  /** A storm needs at least this many dead-looking rows (one dead job of one is not a storm). @default 3 */
  readonly stormMinimum: number;
  /** At most this many re-queues per sweep. @default 10 */
  readonly maxRequeuesPerSweep: number;
  /**
   * A run re-queued this many times is given up: its runs keep failing (a missing grant, a bug, out of memory), so
   * the sweeper stops starting them and names the run in every sweep until a person re-arms it. @default 5
   */
  readonly maxRequeuesPerRun: number;
}

/**
 * The one place the sweeper's defaults are written: the CLI's options and help, the sweeper Lambda's fallbacks and the
 * stacks' configurations (and so cdk.json) all read them from here.
 */
export const SWEEPER_DEFAULTS: SweeperConfig = {
  leaseMs: LEASE_DEFAULTS.leaseMs,
  stormShare: 0.5,
  stormMinimum: 3,
  maxRequeuesPerSweep: 10,
  maxRequeuesPerRun: 5,
};

/**
 * What the sweeper reads and writes: one job's shard of the job table's sparse index and its rows, the lock table;
 * its clock times the wait.
 */
export interface SweeperDeps {
  /** The job it sweeps, by name: it reads only that job's claimed rows (jobs sharing a job table each have a sweeper). */
  readonly job: string;
  /** The job table's store: its sparse `claimed` index and its rows. */
  readonly jobs: JobStore;
  /** The lock table's store: the lock items the sweeper sights. */
  readonly locks: LeaseStore;
  /** Times the full lease between two sightings, on its monotonic clock. */
  readonly clock: Clock;
  /**
   * Where sightings, orphans and storms are reported. @defaultValue no reporting
   * @internal
   */
  readonly events?: Events;
}

/** One look at one claimed row and its lock. JSON-safe: the cloud passes it through a Wait state. */
export interface ClaimSighting {
  readonly jobId: string;
  readonly ownerToken: number;
  readonly fence: number;
  /** Re-queues recorded on the row: a row re-queued since the first sighting is not the same row. */
  readonly requeues: number;
  /** The lock's rvn while held; undefined when the lock was free. */
  readonly rvn: string | undefined;
  readonly held: boolean;
  /** The lease the lock item declares (or the configured one): how long the second sighting must wait. */
  readonly leaseMs: number;
}

/** 1.–2. One pass over the job's shard of the sparse index: every claimed row of the job with its lock's current rvn. */
export async function sightClaimed(
  deps: SweeperDeps,
  config: Pick<SweeperConfig, 'leaseMs'>,
): Promise<{ sightings: ClaimSighting[]; itemsRead: number }> {
  const sightings: ClaimSighting[] = [];
  let itemsRead = 0;
  for await (const row of claimedRows(deps.jobs, claimShard(deps.job))) {
    itemsRead += 2; // the index row and its lock item
    // The job row and its lock share the key (<name>#<date>, lib/core/job-keys.ts): a row's key is its lock's key.
    const lock = await readLock(deps, row.pk);
    sightings.push({
      jobId: row.pk,
      ownerToken: Number(row.owner_token),
      fence: Number(row.fence),
      requeues: Number(row.requeues ?? 0),
      held: lock?.holder !== undefined,
      rvn: lock?.holder !== undefined ? lock.rvn : undefined,
      leaseMs: lock?.lease_ms ?? config.leaseMs,
    });
  }
  return { sightings, itemsRead };
}

/** Orphan: the same row (owner, fence, re-queues) and the same lock state, a full lease apart. */
export function isOrphan(first: ClaimSighting, second: ClaimSighting): boolean {
  return (
    first.ownerToken === second.ownerToken &&
    first.fence === second.fence &&
    first.requeues === second.requeues &&
    first.held === second.held &&
    first.rvn === second.rvn
  );
}

/** 3. The storm rule: too many dead-looking rows at once means the renewal path, not the holders, is failing. */
function isStorm(orphans: number, claimed: number, config: Pick<SweeperConfig, 'stormShare' | 'stormMinimum'>): boolean {
  return orphans >= config.stormMinimum && orphans > claimed * config.stormShare;
}

/**
 * 4. Record one orphan's re-queue: one conditional write on exactly what was sighted, that adds one to `requeues`
 * and nothing else. The row stays RUNNING and in the sparse index (invariant 3), the dead holder's, so a new run
 * that dies before its raise leaves it for the next sweeps. Call it after the orphan's new run was started: a
 * sweeper that dies between the two then leaves the row as it was. False if the row moved on (a new holder raised,
 * the run is DONE, or another sweep recorded it first).
 * Internal, as the job store it takes is.
 * @internal
 */
export async function requeue(
  deps: Pick<SweeperDeps, 'jobs'>,
  orphan: Pick<ClaimSighting, 'jobId' | 'ownerToken' | 'fence' | 'requeues'>,
): Promise<boolean> {
  const out = await deps.jobs.requeue(orphan.jobId, orphan);
  return out.ok;
}

/** 5. An orphan re-queued `maxRequeuesPerRun` times already: its runs keep failing, so it is given up. */
function isGivenUp(orphan: Pick<ClaimSighting, 'requeues'>, config: Pick<SweeperConfig, 'maxRequeuesPerRun'>): boolean {
  return orphan.requeues >= config.maxRequeuesPerRun;
}

/**
 * The decision of a sweep, given the first sightings and the second ones made at least a lease later (and the
 * number of claimed rows in all): which rows are orphans, which of them are given up, whether the rest are a storm,
 * and which to re-queue now. A given-up run counts toward neither side of the storm rule: it is known dead, and
 * says nothing about the renewal path.
 */
export function decide(first: readonly ClaimSighting[], second: readonly ClaimSighting[], claimed: number, config: SweeperConfig) {
  const before = new Map(first.map((s) => [s.jobId, s]));
  const orphans = second.filter((s) => before.has(s.jobId) && isOrphan(before.get(s.jobId)!, s));
  const alive = second.filter((s) => before.has(s.jobId) && !isOrphan(before.get(s.jobId)!, s)).length;
  const givenUp = orphans.filter((o) => isGivenUp(o, config));
  const live = orphans.filter((o) => !isGivenUp(o, config));
  const storm = isStorm(live.length, claimed - givenUp.length, config);
  const now = storm ? [] : live.slice(0, config.maxRequeuesPerSweep);
  return { orphans, alive, storm, givenUp, requeueNow: now, deferred: storm ? 0 : live.length - now.length };
}

/**
 * The local sweeper: keeps its first sightings in memory between sweeps and times "a full lease later" on its own
 * monotonic clock. (The cloud keeps them in the state machine's data across a Wait state instead.)
 */
export class Sweeper {
  private readonly seen = new Map<string, { sighting: ClaimSighting; atMs: number }>();

  constructor(
    private readonly deps: SweeperDeps,
    private readonly config: SweeperConfig = SWEEPER_DEFAULTS,
  ) {}

  /**
   * One sweep. For each orphan it re-queues, `start` (the new run) is called BEFORE the write that records it; if it
   * throws, the sweep stops there with the row untouched and rethrows.
   * @param start - starts the orphan's new run; a later sweep that finds the row unchanged calls it again
   */
  sweep(start?: (jobId: string) => Promise<void> | void): Promise<SweepReport>;
  /** @internal */
  sweep(start?: (jobId: string, orphan: ClaimSighting) => Promise<void> | void): Promise<SweepReport>;
  async sweep(start?: (jobId: string, orphan: ClaimSighting) => Promise<void> | void): Promise<SweepReport> {
    const now = () => this.deps.clock.monotonicMs();
    const { sightings, itemsRead } = await sightClaimed(this.deps, this.config);
    const due: ClaimSighting[] = [];
    const firsts: ClaimSighting[] = [];
    let pending = 0;
    let skippedAlive = 0;
    const current = new Set(sightings.map((s) => s.jobId));
    for (const id of this.seen.keys()) if (!current.has(id)) this.seen.delete(id); // left the index: done
    for (const s of sightings) {
      const earlier = this.seen.get(s.jobId);
      if (!earlier || !isOrphan(earlier.sighting, s)) {
        if (earlier) skippedAlive++;
        this.seen.set(s.jobId, { sighting: s, atMs: now() }); // first sighting (or a fresh one after a change)
        pending++;
      } else if (now() - earlier.atMs >= earlier.sighting.leaseMs) {
        due.push(s);
        firsts.push(earlier.sighting);
      } else {
        pending++; // unchanged, but not yet a full lease: look again next sweep
      }
    }
    const d = decide(firsts, due, sightings.length, this.config);
    // Given up: kept in `seen`, so every later sweep finds it due again and names it; nothing is written.
    for (const o of d.givenUp) this.deps.events?.emit('given-up', { jobId: o.jobId, ownerToken: o.ownerToken, fence: o.fence, requeues: o.requeues });
    const requeued: string[] = [];
    let lostRaces = 0;
    for (const o of d.requeueNow) {
      await start?.(o.jobId, o); // first the run, then the record: see requeue
      if (await requeue(this.deps, o)) {
        requeued.push(o.jobId);
        this.seen.delete(o.jobId);
        this.deps.events?.emit('requeued', { jobId: o.jobId, ownerToken: o.ownerToken, fence: o.fence });
      } else {
        lostRaces++;
        this.seen.delete(o.jobId);
      }
    }
    const storm = d.storm;
    const report: SweepReport = {
      claimed: sightings.length,
      orphans: d.orphans.length,
      requeued,
      lostRaces,
      skippedAlive: skippedAlive + d.alive,
      pending,
      storm,
      deferred: d.deferred,
      givenUp: d.givenUp.map((o) => o.jobId),
      itemsRead,
    };
    this.deps.events?.emit(storm ? 'sweeper-storm' : 'swept', { ...report, requeued: requeued.length, givenUp: report.givenUp.length });
    return report;
  }
}

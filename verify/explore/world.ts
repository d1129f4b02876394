/**
 * One explored schedule (issue 19 item 4): the REAL core (lib/core/job.ts runJob, lib/core/sweeper.ts Sweeper, the lease, the
 * fenced batch) on the in-memory stores and one VirtualClock, interleaved at every store call by the seeded
 * scheduler (scheduler.ts), then checked from the stores' final state and the trace.
 *
 * The world: one night of a small generic job, `chunks` chunks of `items` items written `batch` at a time with the
 * real fenced batch (writeBatch). Actors: holder-1 starts the night at 0; holder-2, a duplicate trigger, starts it
 * again later; the sweeper sweeps every `sweepPeriodMs` and starts a new holder for each night it re-queues (its
 * StartExecution is a step boundary, named as the cloud's sweeper names it, and idempotent by name as AWS's is); a
 * crashed sweeper is replaced by a fresh one after a seeded delay. Each actor reads its own wall clock, which the
 * scheduler can step or make run fast or slow; the monotonic time stays shared and true.
 *
 * Not explored here: the workflow's Lambda handlers under Step Functions' semantics, election and handover, the
 * manifest and the epoch ledger (docs/TESTING.md).
 */
import { type Clock, VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS, type LeaseConfig } from '../../lib/core/config';
import { Events } from '../../lib/core/events';
import { writeBatch } from '../../lib/core/batch';
import { jobKeys } from '../../lib/core/job-keys';
import { runJob, type ChunkWork } from '../../lib/core/job';
import { pollMsOf } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import type { JobStore } from '../../lib/core/store/jobs';
import type { LockStore, WriteOutcome } from '../../lib/core/store/lock';
import { Sweeper, SWEEPER_DEFAULTS } from '../../lib/core/sweeper';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import { prng } from '../../lib/core/prng';
import { requeueRunName } from '../../lib/lambda/sweep-verify';
import { type Mutation, applyMutation } from './mutations';
import { Actor, type Restart, Scheduler } from './scheduler';
import { type Accepted, acceptedChecks, doneChecks, epochChecks, recordingBatches } from './checks';

/** The world's settings: the night's size, the lease, the sweeper, the faults. */
const EXPLORE_SETTINGS = {
  chunks: 3,
  items: 4,
  batch: 2,
  /** The work before each batch (computing it) takes this long on the holder's clock: a night is not instant. */
  batchWorkMs: 1_000,
  lease: { ...LEASE_DEFAULTS, claimBudget: 4 } satisfies LeaseConfig,
  sweepPeriodMs: 5_000,
  /** The duplicate trigger starts within this long after the first (EventBridge's duplicates come close together). */
  duplicateWithinMs: 5_000,
  /** Each schedule's sparse index lags its table by up to a seeded share of this (each change a seeded part of that). */
  maxIndexLagMs: 3_000,
  /** A crashed sweeper is replaced by a fresh one within this long. */
  sweeperRestartWithinMs: 10_000,
  faults: {
    chance: 0.15,
    budget: 4,
    maxPauseMs: 20_000,
    windowMs: 40_000,
    // Exaggerated (an NTP step is rarely seconds, a drift rarely 1%) so a night of a minute meets them.
    wall: { maxStepMs: 15_000, maxRateError: 0.5 },
    twice: ['startExecution'],
    // Steering (docs/TESTING.md): a pause weighs 4 at the fenced write, right after a passed stop-time check (the
    // gap that makes a stale holder); StartExecution's second delivery weighs 3; a lock read (a claimant's poll,
    // twenty a lease) is faulted at a quarter of the chance.
    emphasis: [
      { methods: ['recordBatch'], kind: 'pause', weight: 4 },
      { methods: ['startExecution'], kind: 'twice', weight: 3 },
    ],
    seldomAt: { methods: ['read'], share: 0.25 },
  },
} as const;

/**
 * How long after the last fault's effect ended the night must be DONE: a sweep to see the orphan, a full lease and
 * a sweep more to see it unchanged, the new holder's wait of a full lease on the dead holder's rvn (to the poll after
 * it), the longest retry backoff still running, and the index's lag (the orphaned row reaches the sparse index up to
 * one lag late), and the night's own work (store calls take no virtual time; computing each batch does).
 */
function livenessBoundMs(s: typeof EXPLORE_SETTINGS = EXPLORE_SETTINGS): number {
  const backoff = DEFAULT_BACKOFF.capMs * DEFAULT_BACKOFF.retries;
  const night = s.chunks * Math.ceil(s.items / s.batch) * s.batchWorkMs;
  return 2 * s.sweepPeriodMs + 2 * s.lease.leaseMs + pollMsOf(s.lease) + backoff + s.maxIndexLagMs + night;
}

/** The index lag's stream: a seed far from the schedules' own seeds. */
const LAG_STREAM = 0x5eed_0000;

/** What one schedule did and what its checks found. */
export interface ScheduleResult {
  readonly seed: number;
  readonly trace: readonly string[];
  readonly violations: readonly string[];
  /** Each injected fault, as `kind method@step`. */
  readonly crashPoints: readonly string[];
  /** The night's final state (absent: never raised, as when every holder died before its raise). */
  readonly state: string | undefined;
}

const DATE = '2026-09-28';
const ITEMS = 'items';

/** Run one schedule from its seed (optionally with a broken variant of a rule) and check it. */
export async function runSchedule(seed: number, mutation?: Mutation): Promise<ScheduleResult> {
  const s = EXPLORE_SETTINGS;
  const random = prng(seed);
  const clock = new VirtualClock();
  const scheduler = new Scheduler(clock, random, s.faults, (actor) => restart(actor));
  // The index's lag draws from its own stream of the seed, so the scheduler's draws stay as they were.
  const lagRandom = prng(seed + LAG_STREAM);
  const indexLagMs = Math.floor(lagRandom() * s.maxIndexLagMs);
  const jobs: JobStore = new MemoryJobStore({ clock, jobs: 'jobs', indexLagMs, random: lagRandom });
  const locks: LockStore = new MemoryLockStore({ clock });
  const keys = jobKeys('explore');
  const jobId = keys.job(DATE);
  const violations: string[] = [];
  const accepted: Accepted[] = [];
  const seenRequests = new Set<string>();
  /** Each successful claim: who, which key, its epoch, and when the store applied it. */
  const grants: { actor: string; key: string; epoch: number; atMs: number }[] = [];
  /** Each act a holder made right after its stop-time check passed: its token, and when. */
  const acts: { actor: string; token: number; atMs: number; step: string }[] = [];
  const actors: Actor[] = [];
  let doneAt: number | undefined;
  const broken = applyMutation(mutation, { locks, jobs });

  // Every accepted batch with its token and the fence's value as it stood (checks.ts).
  const batchLog = { accepted, seenRequests, violations, log: (line: string) => scheduler.log(line) };
  const observeJobs = (actor: Actor, inner: JobStore): JobStore => recordingBatches(actor.name, inner, jobs, batchLog);

  const work =
    (actor: Actor, actorClock: Clock): ChunkWork<number> =>
    async ({ lease, fence, chunk }) => {
      for (let from = 0; from < s.items; from += s.batch) {
        await actorClock.sleep(s.batchWorkMs);
        lease.check();
        // The check's promise: no act once the holder's own clock reached its stop time.
        if (clock.monotonicMs() >= lease.stopAtMs)
          violations.push(`${actor.name} acted at ${clock.monotonicMs()} ms, past its stop time ${lease.stopAtMs} ms`);
        acts.push({ actor: actor.name, token: lease.token, atMs: clock.monotonicMs(), step: `chunk ${chunk} batch ${from / s.batch}` });
        const puts = Array.from({ length: Math.min(s.batch, s.items - from) }, (_, i) => ({
          table: ITEMS,
          item: { pk: { S: `item#${chunk}#${from + i}` }, token: { N: String(lease.token) } },
        }));
        await writeBatch(fence, puts);
      }
      return chunk;
    };

  const tokenOf = (name: string): number => grants.filter((g) => g.actor === name).at(-1)?.epoch ?? NaN;
  const startHolder = (name: string): Actor => {
    const actor = new Actor(name, clock);
    actors.push(actor);
    const actorClock = actor;
    const jobStore = scheduler.wrap(
      observeJobs(
        actor,
        broken.jobsFor(actor, (inner) => scheduler.wrap(inner, actor)),
      ),
      actor,
      (method, _args, result) => {
        if (method === 'complete' && (result as { ok: boolean }).ok) doneAt ??= clock.monotonicMs();
      },
    );
    const lockStore = scheduler.wrap(broken.locksFor(actorClock, s.lease), actor, (method, args, result) => {
      const out = result as WriteOutcome;
      if (method === 'claim' && out.ok) grants.push({ actor: name, key: String(args[0]), epoch: Number(out.item.epoch), atMs: clock.monotonicMs() });
    });
    scheduler.log(`${name} starts`);
    runJob(
      {
        locks: lockStore,
        jobs: jobStore,
        clock: actorClock,
        events: new Events(name, actorClock),
        random,
      },
      {
        keys,
        date: DATE,
        chunks: s.chunks,
        holder: name,
        config: s.lease,
        hooks: { afterCheck: (p) => void acts.push({ actor: name, token: tokenOf(name), atMs: clock.monotonicMs(), step: p.step }) },
      },
      work(actor, actorClock),
    ).then(
      (summary) => {
        actor.outcome = summary.outcome;
        scheduler.log(`${name} ends ${summary.outcome}${summary.token === undefined ? '' : ` token ${summary.token}`}`);
      },
      (err: Error) => {
        actor.outcome = `error ${err.name}`;
        scheduler.log(`${name} ends with ${err.name}: ${err.message}`);
      },
    );
    return actor;
  };

  // The sweeper: one process sweeping every period; for each night it re-queues it starts a new holder (its
  // StartExecution, a step boundary of its own) and then records the re-queue. A crashed sweeper is replaced, after
  // a seeded delay, by a fresh Sweeper with no memory of its sightings, as a restarted process would be.
  // StartExecution as AWS answers it: a new name starts a run; the same name and input again (a retry after a lost
  // response, or the request delivered twice) starts nothing: the same execution while it is open,
  // ExecutionAlreadyExists once it closed, which the sweeper's startRun takes as its own earlier start
  // (lib/lambda/runtime.ts). Each run is named as the cloud's sweeper names it (requeueRunName: the night, the fence
  // seen, the sweep); a sweep that failed is retried under the same name, as Step Functions' Retry reruns the step.
  let holders = 0;
  let sweepers = 0;
  let sweeping = true;
  let sweeperActor: Actor | undefined;
  const executions = new Map<string, Actor>();
  const startSweeper = (): void => {
    const actor = new Actor(`sweeper-${++sweepers}`, clock);
    sweeperActor = actor;
    const actorClock = actor;
    let sweepName = '';
    let sweeps = 0;
    const sfn = scheduler.wrap(
      {
        startExecution: async (name: string) => {
          const open = executions.get(name);
          if (open !== undefined) {
            scheduler.log(`${actor.name} start ${name}: exists (${open.name}, ${open.outcome}), nothing started`);
            return;
          }
          scheduler.log(`${actor.name} starts a new run ${name}`);
          executions.set(name, startHolder(`holder-${++holders}`));
        },
      },
      actor,
    );
    const sweepSide = broken.sweeperFor(
      actor,
      (inner) => scheduler.wrap(inner, actor),
      jobs,
      (_id, orphan) => sfn.startExecution(requeueRunName(DATE, orphan.fence, sweepName)),
    );
    const sweeper = new Sweeper(
      {
        job: keys.name,
        jobs: sweepSide.jobs,
        locks: scheduler.wrap(broken.locks, actor),
        clock: actorClock,
      },
      { ...SWEEPER_DEFAULTS, leaseMs: s.lease.leaseMs },
    );
    let failed = false;
    const sweepLoop = (): void => {
      if (!sweeping) return;
      if (!failed) sweepName = `${actor.name}#${++sweeps}`;
      sweeper
        .sweep(sweepSide.start)
        .then(
          (report) => {
            failed = false;
            report.requeued.forEach((id) => scheduler.log(`${actor.name} recorded the re-queue of ${id}`));
          },
          (err: Error) => {
            failed = true;
            scheduler.log(`${actor.name}: sweep ${sweepName} failed: ${err.name}`);
          },
        )
        .finally(() => actorClock.after(s.sweepPeriodMs, sweepLoop));
    };
    scheduler.log(`${actor.name} starts`);
    actorClock.after(s.sweepPeriodMs, sweepLoop);
  };
  const restart: Restart = (actor) => {
    if (actor !== sweeperActor || !sweeping) return undefined;
    const delay = Math.floor(random() * s.sweeperRestartWithinMs);
    clock.after(delay, startSweeper);
    return delay;
  };

  scheduler.log(`the sparse index lags by up to ${indexLagMs} ms`);
  startHolder(`holder-${++holders}`);
  const duplicateAt = Math.floor(random() * s.duplicateWithinMs);
  clock.after(duplicateAt, () => startHolder(`holder-${++holders}`));
  startSweeper();

  const settled = () => actors.every((a) => a.crashed || a.outcome !== 'running');
  const horizon = s.faults.windowMs + s.faults.maxPauseMs + livenessBoundMs(s);
  // A schedule takes a few hundred turns; a broken variant that loops without time passing stops at the limit.
  await scheduler.run(() => doneAt !== undefined && settled(), horizon, 20_000);
  sweeping = false;
  broken.restore();

  // Safety, from the trace and the stores' final state.
  violations.push(...acceptedChecks(accepted));
  // Two holders at once: an act by a holder after a newer token was granted. The lease's promise (lib/core/lease.ts
  // Lease): while check() passes, no other claim can have been granted; the claim waits a full lease on the rvn.
  for (const a of acts) {
    const newer = grants.find((g) => g.key === jobId && g.epoch > a.token && g.atMs <= a.atMs);
    if (newer)
      violations.push(
        `two holders at once: ${a.actor} acted (${a.step}) at ${a.atMs} ms with token ${a.token}, after ${newer.actor} was granted token ${newer.epoch} at ${newer.atMs} ms`,
      );
  }
  violations.push(...epochChecks(grants));
  violations.push(
    ...(await doneChecks(
      jobs as MemoryJobStore,
      { jobId, date: DATE, chunks: s.chunks, items: s.items, itemsTable: ITEMS, jobsTable: 'jobs' },
      keys,
    )),
  );
  const row = await jobs.readJob(jobId);
  // Liveness: a night that was raised is DONE within the bound once the faults stopped.
  if (row !== undefined) {
    const deadline = Math.max(0, scheduler.faultsEndMs) + livenessBoundMs(s);
    if (doneAt === undefined)
      violations.push(`the night is ${row.state} at ${clock.monotonicMs()} ms, never DONE (faults ended at ${scheduler.faultsEndMs} ms)`);
    else if (doneAt > deadline) violations.push(`the night was DONE at ${doneAt} ms, after the bound ${deadline} ms`);
  }
  scheduler.log(`end: night ${row?.state ?? 'never raised'}`);
  return {
    seed,
    trace: scheduler.trace,
    violations,
    crashPoints: scheduler.faults.map((f) => `${f.kind} ${f.point}`),
    state: row?.state,
  };
}

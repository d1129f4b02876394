/**
 * The night world (issue 19 item 4): the REAL core (lib/core/job.ts runJob, lib/core/sweeper.ts Sweeper, the lease, the
 * fenced batch) on the in-memory stores and one VirtualClock, interleaved at every store call by the seeded
 * scheduler (scheduler.ts), then checked from the stores' final state and the trace. Read top to bottom: its
 * settings, its setup, its actors, its checks; world.ts runs it.
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
import '../../lib/testing/quiet-lambda'; // first: before lib/lambda loads Powertools
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
import type { LockStore } from '../../lib/core/store/lock';
import { Sweeper, SWEEPER_DEFAULTS } from '../../lib/core/sweeper';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import { prng } from '../../lib/core/prng';
import { requeueRunName } from '../../lib/lambda/sweep-verify';
import { type Broken, type Mutation, type NightMutation, applyMutation } from './mutations';
import { Actor, type Placed, Scheduler } from '../../lib/testing/scheduler';
import { type Accepted, doneChecks, holderChecks, recordingBatches } from '../../lib/testing/checks';
import { CallLog, FenceHistory, HOLDER_ACTS, LockHistory, rateErrorCovered, twoHoldersChecks } from '../../lib/testing/history';
import { type Check, runWorld, type ScheduleResult, type World, type WorldState } from '../../lib/testing/world';

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
  /**
   * The share of schedules where yesterday's night runs too, from the start: two claimed rows in the job's shard of
   * the sparse index, so the sweeper's query pages (a page is one row) and each of its passes meets two nights.
   */
  twoNightsShare: 0.25,
  faults: {
    chance: 0.15,
    budget: 5,
    maxPauseMs: 20_000,
    // An answer up to 10 s late: longer than the margin (2 s), so a stop time counted from the answer overruns.
    lateMs: 10_000,
    windowMs: 40_000,
    // Exaggerated (an NTP step is rarely seconds, a drift rarely 1%) so a night of a minute meets them.
    wall: { maxStepMs: 15_000, maxRateError: 0.5 },
    // The SDK resends a request whose answer it lost: any write can land twice, and the code sees the second answer
    // (a conditional write's own first landing makes its resend fail its condition).
    twice: ['startExecution', 'claim', 'renew', 'release', 'raiseJob', 'raiseFence', 'recordBatch', 'markChunkDone', 'complete', 'requeue'],
    // Each process's monotonic clock runs fast or slow by up to half of what the margin covers.
    monoRate: rateErrorCovered(LEASE_DEFAULTS) / 2,
    // Steering (docs/TESTING.md): a pause weighs 6 at the fenced write, right after a passed stop-time check (the
    // gap that makes a stale holder); a delay 4 at the lease's calls; a wall step 3 at a claim and at a lock read (a
    // claimant's wall clock far from the holder's, before it judges the lease); at the sweeper's StartExecution, its
    // second delivery 3 and a crash 8 (the crash between the two steps of a re-queue: start, then record). The chance
    // of a fault: 6 times at a StartExecution (a few a night, each after a full lease of sightings), 4 times at a
    // holder's first claim (its answer starts the stop time), twice at a fenced write, a quarter at a lock read (a
    // claimant's poll, twenty a lease) and at the sweeper's query (two pages a pass, every pass). Five faults a
    // schedule, so one is still left by the time a sweeper re-queues.
    emphasis: [
      { methods: ['recordBatch'], kind: 'pause', weight: 6 },
      { methods: ['claim', 'renew'], kind: 'late', weight: 4 },
      { methods: ['claim'], kind: 'wall-step', weight: 3 },
      { methods: ['read'], kind: 'wall-step', weight: 3 },
      { methods: ['startExecution'], kind: 'twice', weight: 3 },
      { methods: ['startExecution'], kind: 'crash', weight: 8 },
    ],
    chanceAt: [
      { methods: ['read'], share: 0.25 },
      { methods: ['claimedPage'], share: 0.25 },
      { methods: ['claim'], share: 4, first: true },
      { methods: ['startExecution'], share: 6 },
      { methods: ['recordBatch'], share: 2 },
    ],
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
  // Every wait is timed on its process's clock: one running slow stretches it by up to 1 / (1 - monoRate).
  return (2 * s.sweepPeriodMs + 2 * s.lease.leaseMs + pollMsOf(s.lease) + backoff + s.maxIndexLagMs + night) / (1 - s.faults.monoRate);
}

/** The index lag's stream and the clocks' rates' stream: seeds far from the schedules' own seeds. */
const LAG_STREAM = 0x5eed_0000;
const RATE_STREAM = 0x5eed_1000;
/** Whether yesterday's night runs too: a stream of its own, so no other draw moves. */
const NIGHTS_STREAM = 0x5eed_2000;

/** Tonight's night, and yesterday's (in the schedules where it runs too). */
const DATE = '2026-09-28';
const YESTERDAY = '2026-09-27';

/**
 * The stores one schedule runs on: the in-memory ones (with the sparse index's lag and a page of one row, so every
 * query runs its pagination path), or lib/core/aws's on DynamoDB Local (dynamo.ts), the same schedules over every
 * shipped condition expression.
 */
export interface NightStores {
  readonly locks: LockStore;
  /** The job table's store, and every item a table holds (the checks count the night's items). */
  readonly jobs: JobStore & { dump(table: string): readonly unknown[] | Promise<readonly unknown[]> };
  /** The table the night's items are written to. */
  readonly items: string;
  /** How far the sparse index lags its table at most (0: DynamoDB Local's, read at once). */
  readonly indexLagMs: number;
}

/** Builds one schedule's stores on its clock, given the sparse index's lag drawn for it (a memory store's only). */
export type NightStoresOf = (clock: VirtualClock, lag: { readonly indexLagMs: number; readonly random: () => number }) => NightStores;

const memoryStores: NightStoresOf = (clock, lag) => ({
  locks: new MemoryLockStore({ clock }),
  jobs: new MemoryJobStore({ clock, jobs: 'jobs', indexLagMs: lag.indexLagMs, random: lag.random, pageSize: 1 }),
  items: 'items',
  indexLagMs: lag.indexLagMs,
});

/** Faults placed by a test, when the duplicate trigger comes (absent: it does not), and whether yesterday runs too. */
export interface NightPlaced extends Placed {
  readonly duplicateAtMs?: number;
  /** @default false */
  readonly yesterday?: boolean;
}

/** One night of the job: its row, the holders started for it, when its complete took effect. */
interface Night {
  readonly date: string;
  readonly jobId: string;
  readonly holders: Actor[];
  doneAt: number | undefined;
}

// ─── Setup: one schedule's state ─────────────────────────────────────────────────────────────────────────────────

/** One schedule of the night: its clock, streams, scheduler and stores, and what the actors record for the checks. */
interface NightState extends WorldState {
  readonly random: () => number;
  readonly clock: VirtualClock;
  /** How a crashed actor is restarted (the sweeper, by a fresh one), set as each starts. */
  readonly restarts: Map<Actor, () => number | undefined>;
  readonly indexLagMs: number;
  /** Draws each process's monotonic rate error as it starts. */
  readonly rates: () => number;
  readonly jobs: NightStores['jobs'];
  readonly items: string;
  readonly keys: ReturnType<typeof jobKeys>;
  /** Tonight's night first, then yesterday's if it runs too. */
  readonly nights: readonly Night[];
  readonly broken: Broken;
  /** Every accepted batch with its token and the fence's value as it stood (checks.ts). */
  readonly accepted: Accepted[];
  readonly seenRequests: Set<string>;
  /** Each holder's store calls as it sent them, and when their answers came (history.ts). */
  readonly calls: CallLog;
  /** Every lock write the lock store applied (history.ts). */
  readonly lockWrites: LockHistory;
  /** Every fence raised and batch accepted that the job store applied (history.ts). */
  readonly fenceWrites: FenceHistory;
  readonly placed: NightPlaced | undefined;
}

function setup(storesOf: NightStoresOf, seed: number, mutation: string | undefined, placed?: NightPlaced): NightState {
  const s = EXPLORE_SETTINGS;
  const random = prng(seed);
  const clock = new VirtualClock();
  const restarts = new Map<Actor, () => number | undefined>();
  const scheduler = new Scheduler(clock, random, s.faults, (actor) => restarts.get(actor)?.(), undefined, placed);
  // The index's lag draws from its own stream of the seed, so the scheduler's draws stay as they were.
  const lagRandom = prng(seed + LAG_STREAM);
  const indexLagMs = Math.floor(lagRandom() * s.maxIndexLagMs);
  const stores = storesOf(clock, { indexLagMs, random: lagRandom });
  const fenceWrites = new FenceHistory(clock);
  const jobs = fenceWrites.observe(stores.jobs);
  const lockWrites = new LockHistory(clock);
  const locks: LockStore = lockWrites.observe(stores.locks);
  const keys = jobKeys('explore');
  const yesterday = placed ? placed.yesterday === true : prng(seed + NIGHTS_STREAM)() < s.twoNightsShare;
  const night = (date: string): Night => ({ date, jobId: keys.job(date), holders: [], doneAt: undefined });
  return {
    random,
    clock,
    scheduler,
    restarts,
    indexLagMs: stores.indexLagMs,
    rates: prng(seed + RATE_STREAM),
    jobs,
    items: stores.items,
    keys,
    nights: yesterday ? [night(DATE), night(YESTERDAY)] : [night(DATE)],
    broken: applyMutation(mutation as Mutation | NightMutation | undefined, { locks, jobs }),
    violations: [],
    accepted: [],
    seenRequests: new Set(),
    calls: new CallLog(clock),
    lockWrites,
    fenceWrites,
    placed,
  };
}

// ─── Actors: the holders, the duplicate trigger, the sweeper ─────────────────────────────────────────────────────

function actors(w: NightState): void {
  const s = EXPLORE_SETTINGS;
  const { clock, scheduler, random, jobs, keys, broken, violations } = w;

  // Every accepted batch with its token and the fence's value as it stood (checks.ts).
  const batchLog = { accepted: w.accepted, seenRequests: w.seenRequests, violations, log: (line: string) => scheduler.log(line), logRefused: true };
  const observeJobs = (actor: Actor, inner: JobStore): JobStore => recordingBatches(actor.name, inner, jobs, batchLog);

  const work =
    (actorClock: Clock, night: Night): ChunkWork<number> =>
    async ({ lease, fence, chunk }) => {
      for (let from = 0; from < s.items; from += s.batch) {
        await actorClock.sleep(s.batchWorkMs);
        lease.check();
        const puts = Array.from({ length: Math.min(s.batch, s.items - from) }, (_, i) => ({
          table: w.items,
          item: { pk: { S: `${itemPrefix(night)}${chunk}#${from + i}` }, token: { N: String(lease.token) } },
        }));
        await writeBatch(fence, puts);
      }
      return chunk;
    };

  const [tonight] = w.nights;
  const startHolder = (name: string, night: Night = tonight): Actor => {
    const actor = scheduler.actor(name, w.rates);
    night.holders.push(actor);
    const actorClock = actor;
    // Outermost, the observer: what the holder's code sent, and when its answers came (history.ts).
    const jobStore = w.calls.observe(
      actor,
      scheduler.wrap(
        observeJobs(
          actor,
          broken.jobsFor(actor, (inner) => scheduler.wrap(inner, actor)),
        ),
        actor,
        (method, _args, result) => {
          if (method === 'complete' && (result as { ok: boolean }).ok) night.doneAt ??= clock.monotonicMs();
        },
      ),
    );
    const lockStore = w.calls.observe(actor, scheduler.wrap(broken.locksFor(actorClock, s.lease), actor));
    scheduler.log(`${name} starts${night === tonight ? '' : ` ${night.date}`}`);
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
        date: night.date,
        chunks: s.chunks,
        holder: name,
        config: s.lease,
      },
      work(actorClock, night),
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
  const executions = new Map<string, Actor>();
  const startSweeper = (): void => {
    const actor = scheduler.actor(`sweeper-${++sweepers}`, w.rates);
    const actorClock = actor;
    w.restarts.set(actor, () => {
      const delay = Math.floor(random() * s.sweeperRestartWithinMs);
      clock.after(delay, startSweeper);
      return delay;
    });
    let sweepName = '';
    let sweeps = 0;
    const sfn = scheduler.wrap(
      {
        startExecution: async (name: string, night: Night) => {
          const open = executions.get(name);
          if (open !== undefined) {
            scheduler.log(`${actor.name} start ${name}: exists (${open.name}, ${open.outcome}), nothing started`);
            return;
          }
          scheduler.log(`${actor.name} starts a new run ${name}`);
          executions.set(name, startHolder(`holder-${++holders}`, night));
        },
      },
      actor,
    );
    const sweepSide = broken.sweeperFor(
      actor,
      (inner) => scheduler.wrap(inner, actor),
      jobs,
      (jobId, orphan) => {
        const night = w.nights.find((n) => n.jobId === jobId)!;
        return sfn.startExecution(requeueRunName(night.date, orphan.fence, sweepName), night);
      },
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

  scheduler.log(`the sparse index lags by up to ${w.indexLagMs} ms`);
  startHolder(`holder-${++holders}`);
  for (const night of w.nights.slice(1)) startHolder(`holder-${++holders}`, night);
  // Drawn after the first holder started (its start draws too), as it always was: a schedule replays from its seed.
  const duplicateAt = w.placed ? w.placed.duplicateAtMs : Math.floor(random() * s.duplicateWithinMs);
  if (duplicateAt !== undefined) clock.after(duplicateAt, () => startHolder(`holder-${++holders}`));
  startSweeper();
}

// ─── Checks: safety, from the trace and the stores' final state, then liveness ───────────────────────────────────

/** The night's items' keys begin with this. */
const itemPrefix = (night: Night) => `item#${night.date}#`;

/** Each night's findings, for a check of one night: the first night's as they are, the others' named by their date. */
async function eachNight(w: NightState, check: (night: Night) => readonly string[] | Promise<readonly string[]>): Promise<string[]> {
  const out: string[] = [];
  for (const night of w.nights) out.push(...(await check(night)).map((v) => (night === w.nights[0] ? v : `${night.date}: ${v}`)));
  return out;
}

/** Liveness: a night that was raised is DONE within the bound once the faults stopped. */
async function doneInTime(w: NightState, night: Night): Promise<string[]> {
  const row = await w.jobs.readJob(night.jobId);
  if (row === undefined) return []; // never raised: no sweep can see it (counted as neverRaised)
  const deadline = Math.max(0, w.scheduler.faultsEndMs) + livenessBoundMs();
  if (night.doneAt === undefined)
    return [`the night is ${row.state} at ${w.clock.monotonicMs()} ms, never DONE (faults ended at ${w.scheduler.faultsEndMs} ms)`];
  if (night.doneAt > deadline) return [`the night was DONE at ${night.doneAt} ms, after the bound ${deadline} ms`];
  return [];
}

/** The calls sent by the holders of `night`: another night's tokens are of another lock. */
const callsOf = (w: NightState, night: Night) => w.calls.calls.filter((c) => night.holders.some((h) => h.name === c.actor));

const checks: readonly Check<NightState>[] = [
  ...holderChecks<NightState>(
    () => ({ lease: EXPLORE_SETTINGS.lease, monoRate: EXPLORE_SETTINGS.faults.monoRate }),
    (w) => eachNight(w, (night) => twoHoldersChecks(callsOf(w, night), w.lockWrites, night.jobId, HOLDER_ACTS)),
  ),
  {
    name: 'a DONE night is whole',
    check: (w) =>
      eachNight(w, (night) =>
        doneChecks(
          w.jobs,
          {
            jobId: night.jobId,
            date: night.date,
            chunks: EXPLORE_SETTINGS.chunks,
            items: { count: EXPLORE_SETTINGS.chunks * EXPLORE_SETTINGS.items, itemsTable: w.items, itemPrefix: itemPrefix(night) },
            jobsTable: w.jobs.table,
          },
          w.keys,
        ),
      ),
  },
  { name: 'liveness: a raised night is DONE within the bound', check: (w) => eachNight(w, (night) => doneInTime(w, night)) },
];

// ─── The world ───────────────────────────────────────────────────────────────────────────────────────────────────

/** The night world on the stores `storesOf` builds: in memory (NIGHT_WORLD), or on DynamoDB Local (dynamo.ts). */
export const nightWorld = (storesOf: NightStoresOf): World<NightState, NightPlaced> => ({
  setup: (seed, mutation, placed) => setup(storesOf, seed, mutation, placed),
  actors,
  // Every night is DONE and every holder has ended (or crashed).
  done: (w) => w.nights.every((n) => n.doneAt !== undefined && n.holders.every((a) => a.crashed || a.outcome !== 'running')),
  horizonMs: () => EXPLORE_SETTINGS.faults.windowMs + EXPLORE_SETTINGS.faults.maxPauseMs + livenessBoundMs(),
  // A schedule takes a few hundred turns (under 250 in 300 seeds, and in 100 of each mutation).
  maxTurns: 20_000,
  checks,
  end: async (w) => {
    const states = await Promise.all(w.nights.map(async (n) => (await w.jobs.readJob(n.jobId))?.state));
    const [tonight, ...earlier] = states.map((state) => state ?? 'never raised');
    return { line: `end: night ${tonight}${earlier.map((e, i) => `, ${w.nights[i + 1].date} ${e}`).join('')}`, state: states[0] };
  },
});

export const NIGHT_WORLD = nightWorld(memoryStores);

/** Run one schedule of the night world from its seed (optionally with a broken variant of a rule, or placed faults) and check it. */
export const runSchedule = (seed: number, mutation?: Mutation | NightMutation, placed?: NightPlaced): Promise<ScheduleResult> =>
  runWorld(NIGHT_WORLD, seed, mutation, placed);

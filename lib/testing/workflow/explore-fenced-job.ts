/**
 * Explore your FencedJob's chunk function the way Fencepost explores its own: the workflow FencedJob synthesizes for
 * your job's shape (built in this process, bundling skipped), interpreted on virtual time with its real handlers
 * (claim, raise, the chunk handler around your work, complete, release, the orphan sweeper), on the in-memory stores,
 * under the seeded faults of AWS that the repository's workflow world injects: a daily trigger delivered twice or
 * late, Lambda crashes, timeouts, throttles and lost answers, a task timeout that leaves a zombie holder, a Map that
 * stops its other iterations, and at every store call, every plain write of your tables and every call on your fakes,
 * a pause (the gap right after a passed check, where a stale holder is made), a crash, a lost or late answer.
 *
 * What it checks: every check of the repository's workflow world (no batch below its fence, each item recorded once,
 * never two holders at once, epochs never repeat, no act past the holder's stop time, no claim while another lease
 * runs, a DONE run has every chunk recorded done, the run is DONE and every execution closed once the faults end),
 * and for your code: no plain write or fake call sent past its holder's stop time after another holder claimed (acts.ts),
 * every item recorded through a fence recorded with one content (a redo must write what the first wrote), and your own
 * check over what the stores and your fakes hold at the end. It has no global state and no real timer.
 */
import type { Clock } from '../../core/clock';
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import { publicContext, type FencedChunkContext } from '../../lambda/chunk-handler';
import { actsPastStopTime } from '../acts';
import { explored, type ExploreJobResult } from '../explore-job';
import { rateErrorCovered } from '../history';
import { ActLog, oneContent, steeredPlan } from '../kit';
import type { FaultPlan, PlacedFault } from '../scheduler';
import type { PlainTables } from '../tables';
import { runWorld } from '../world';
import { executionOf, fencedJobWorld, memoryWorkflowStores, WORKFLOW_FAULTS, type JobRun, type WorkflowJob } from './workflow-world';

/** What your chunk work is given beside its context, in an explored run: your fakes and tables, its clock. */
export interface ChunkKit<F> {
  /** The invocation running the chunk (a Lambda process of its own): `exec-a/RunChunk#7`. */
  readonly name: string;
  /** The schedule's fakes: each method call a step of this invocation, answered through a promise. */
  readonly fakes: F;
  /** Your own tables, written plainly (not fenced): each call a step of this invocation. */
  readonly tables: PlainTables;
  /** The invocation's clock: sleep on it to make your work take time (renewals and takeovers happen during it). */
  readonly clock: Clock;
}

/** What your check is given once a schedule has run. */
export interface FencedJobEnd<F> {
  /** The job table's name in the memory stores: where fences and job rows are. */
  readonly jobsTable: string;
  /** Every item of a table, as stored (your items' table, or `jobsTable`). */
  items(table: string): Record<string, unknown>[];
  /** The schedule's fakes, as the invocations left them. */
  readonly fakes: F;
  /** The run's job row's state at the end (`DONE` once the run completed), or undefined if it was never raised. */
  readonly state: string | undefined;
}

/** What to explore. */
export interface ExploreFencedJobOptions<F> {
  /**
   * Your chunk function's work, as you give it to `fencedChunkHandler`, with the kit as its second argument: write
   * `fencedChunkHandler((chunk) => work(chunk, production))` in the function, and give the same `work` here.
   */
  readonly work: (chunk: FencedChunkContext, kit: ChunkKit<F>) => Promise<object>;
  /** FencedJob's `chunks`. @defaultValue 3 */
  readonly chunks?: number;
  /**
   * The lease FencedJob is built with. The quarter of the schedules that run the job as a Distributed Map take a
   * 14 s lease with a 3 s margin when lease − margin does not cover a Map Run's start-up (11 s).
   * @defaultValue LEASE_DEFAULTS with a claim budget of 4
   */
  readonly lease?: Partial<LeaseConfig>;
  /** The chunk function's own environment variables (`chunk.env`). @defaultValue none */
  readonly environment?: Readonly<Record<string, string>>;
  /** The chunk function's timeout, in seconds. @defaultValue 60 */
  readonly chunkTimeoutS?: number;
  /** The longest one chunk's work sleeps on the kit's clock: the liveness bound counts it. @defaultValue 0 */
  readonly chunkWorkMs?: number;
  /**
   * The fakes one schedule shares between its invocations (a pretend provider that records its calls). Called once
   * for each schedule, and once more before the first, to learn the names of the methods the faults steer at.
   */
  readonly fakes?: () => F;
  /** Your invariants over the end of a schedule: one sentence per violation. */
  readonly check?: (end: FencedJobEnd<F>) => readonly string[];
  /** Each of your tables' partition key attribute, for a plain put (`pk` for a table not named). */
  readonly keys?: Readonly<Record<string, string>>;
  /** The faults at store calls, over the workflow world's. */
  readonly faults?: Partial<FaultPlan>;
  /**
   * Faults placed instead of drawn, to make a case happen in every schedule: each lands on the nth call of its method
   * (a store method, `tables.put`, `fakes.send`) by the invocations its `actor` names (`/RunChunk/`: every chunk
   * invocation). With them no fault is drawn, at a store call or around the Lambdas, and the trigger comes once.
   */
  readonly placed?: readonly PlacedFault[];
  /** The first seed; schedule i runs seed + i. @defaultValue 1 */
  readonly seed?: number;
  /** How many schedules to run. @defaultValue 100 */
  readonly schedules?: number;
}

/** A Distributed Map Run's start-up the lease − margin must cover (lib/constructs/renewal-gap.ts). */
const DISTRIBUTED_LEASE = { leaseMs: 14_000, marginMs: 3_000 } as const;
const MAP_RUN_COVER_MS = 11_000;

/** One schedule's run of your job: the kit's logs, your fakes. */
interface UserRun<F> extends JobRun {
  readonly fakes: F;
  readonly acts: ActLog;
  /** Items sent again with another content, seen as they were sent. */
  readonly sentAgain: string[];
}

/**
 * Run `schedules` schedules of your FencedJob from `seed`, each with fresh stores, clock and fakes, and check each.
 * @returns what broke, with the seed that replays it; empty `violations` when every schedule passed
 */
export async function exploreFencedJob<F = undefined>(options: ExploreFencedJobOptions<F>): Promise<ExploreJobResult> {
  const world = fencedJobWorld(memoryWorkflowStores(options.keys), { job: userJob(options) });
  return explored(options.seed ?? 1, options.schedules ?? 100, 'exploreFencedJob', async (seed) => {
    const r = await runWorld(world, seed, undefined, options.placed && { faults: options.placed });
    return { trace: r.trace, violations: r.violations, faults: r.crashPoints.map((p) => p.replace(/@.*$/, '')) };
  });
}

/** Your job as the workflow world runs it. */
function userJob<F>(options: ExploreFencedJobOptions<F>): WorkflowJob<UserRun<F>> {
  const lease: LeaseConfig = { ...LEASE_DEFAULTS, claimBudget: 4, ...options.lease };
  const distributedLease = lease.leaseMs - lease.marginMs >= MAP_RUN_COVER_MS ? lease : { ...lease, ...DISTRIBUTED_LEASE };
  // Each invocation's monotonic clock runs fast or slow by up to half of what the tighter margin covers.
  const monoRate = Math.min(rateErrorCovered(lease), rateErrorCovered(distributedLease)) / 2;
  return {
    chunks: options.chunks ?? 3,
    lease,
    distributedLease,
    chunkTimeoutS: options.chunkTimeoutS ?? 60,
    environment: options.environment ?? {},
    chunkWorkMs: options.chunkWorkMs ?? 0,
    faults: steeredPlan({ ...WORKFLOW_FAULTS, monoRate }, options.fakes?.(), options.faults),
    run: ({ scheduler, clock, tables }) => {
      const fakes = options.fakes?.() as F;
      const acts = new ActLog(scheduler, clock);
      const sentAgain: string[] = [];
      if (tables === undefined) throw new Error('exploreFencedJob runs on the memory stores, which have plain tables');
      return {
        fakes,
        acts,
        sentAgain,
        jobs: oneContent(sentAgain),
        work: (c, invocation) =>
          options.work(publicContext(c), {
            name: invocation.name,
            fakes: acts.fakesFor(fakes, invocation),
            tables: acts.tablesFor(tables, invocation),
            clock: invocation,
          }),
      };
    },
    checks: [
      {
        name: 'no plain write or fake call past its stop time',
        // An invocation acts for its execution, the lease's holder.
        check: (w) => actsPastStopTime(w.run.acts.acts, w.calls.calls, w.lockWrites, executionOf),
      },
      { name: 'each item recorded with one content', check: (w) => w.run.sentAgain },
      {
        name: 'your check',
        check: async (w) =>
          options.check?.({
            jobsTable: w.jobs.table,
            items: (table) => w.jobs.dump(table) as Record<string, unknown>[],
            fakes: w.run.fakes,
            state: (await w.jobs.readJob(w.jobId))?.state,
          }) ?? [],
      },
    ],
  };
}

/**
 * The run of a fenced job, once for every job (docs/DESIGN.md § Chunk fences): a run
 * is one job on one date, cut into chunks, each chunk fenced by its own item beside the run's job row.
 *
 *   raiseRun     the holder's first act: the job row FIRST (it refuses a DONE run, and enters the sparse index in
 *                the same write, so the sweeper can find every claim), then every chunk fence, then the manifest
 *                if the job has one. Nothing is written into any chunk before every fence answered.
 *   chunkFence   a chunk's fence, as a `Fence`; the chunk's work gets it held with the lease's token (`lease.fenced`).
 *   runChunk     the caller's work on one chunk, then the chunk recorded done on its own fence item.
 *   completeRun  once every chunk fence item says done: the manifest DONE (if any), then the job row DONE, which
 *                leaves the sparse index in the same write.
 *   runJob       the direct engine: all of the above in this process, under a lease it claims and renews.
 *
 * The FencedJob workflow (lib/constructs/) runs the same steps as Lambdas (lib/lambda/raise.ts, lib/lambda/complete.ts and the chunk
 * function's fencedChunkHandler), through these same functions: one place for each rule.
 *
 * What it guarantees is what the fences guarantee: once a newer holder has raised them, no guarded write of an older
 * holder lands, and DONE never stands over a chunk not recorded done. What it does not: the lease keeps overlap
 * rare, never absent, so chunk work must write through the chunk's fence and be safe to redo.
 */
import type { Clock } from './clock';
import type { LeaseConfig } from './config';
import { AlreadyDoneError, ClaimBudgetExhaustedError, FencedOutError, LeaseLostError, StopTimePassedError } from './errors';
import type { Events } from './events';
import * as fences from './fence';
import type { Fence, HeldFence, JobRow } from './fence';
import type { JobStore } from './store/jobs';
import type { LeaseStore } from './store/lock';
import type { ManifestStore } from './store/manifest';
import type { JobKeys } from './job-keys';
import { claim, type Lease } from './lease';
import { ManifestWriter, type ManifestDeps } from './manifest';
import { releaseQuietly } from './with-lease';

/**
 * Where a holder has just passed its stop-time check and is about to act: the gap a pause can land in.
 * The run's own point is `complete`; a job names its own (e.g. `batch`, `chunk-commit`).
 */
export interface CheckPoint {
  /** Which act follows: `complete`, or one of the job's own. */
  readonly step: string;
  /** The chunk the act is in, if any. */
  readonly chunk?: number;
  /** The batch within the chunk, if any. */
  readonly batch?: number;
}

/** Hooks into a run, between a passed check and the act it guards. */
export interface RunHooks {
  /** Called right after a passed check, before the act. Fault injection uses it to stop the process there. */
  afterCheck?(point: CheckPoint): void | Promise<void>;
}

/**
 * How a run ended for one holder. `another-holder`: it never claimed, because another holder stayed alive through its
 * whole claim budget on a holder whose run is RUNNING (runningUnder): a duplicate start, not a failure.
 */
export type Outcome = 'completed' | 'already-done' | 'lost-lease' | 'fenced-out' | 'another-holder';

/**
 * The outcome a holder reports for an error that means "stop, someone else owns the run"; undefined otherwise.
 * @param err - what the run threw
 */
export function outcomeOf(err: unknown): Exclude<Outcome, 'completed'> | undefined {
  if (err instanceof AlreadyDoneError) return 'already-done';
  if (err instanceof FencedOutError) return 'fenced-out';
  if (err instanceof LeaseLostError || err instanceof StopTimePassedError) return 'lost-lease';
  return undefined;
}

/**
 * Is the run RUNNING under the lock's current holder? True when the job row is RUNNING and its fence is the lock's
 * epoch: the live holder raised it, so it is the one running it. A waiter whose claim budget ran out on such a holder
 * has met a duplicate start; any other run (no row, QUEUED, a fence from an earlier holder) is not being run
 * by the one keeping the lease alive, and that is a real problem (docs/DESIGN.md "A duplicate start on a long run").
 * @param row - the job row, read after the budget ran out
 * @param lockEpoch - the lock's epoch as the waiter last saw it
 */
export function runningUnder(row: Pick<fences.JobRow, 'state' | 'fence'> | undefined, lockEpoch: number | undefined): boolean {
  return row?.state === 'RUNNING' && lockEpoch !== undefined && row.fence === lockEpoch;
}

/** What a run needs, injected: the stores of its lock table, job table and (if any) manifest bucket, the clock, the events. */
export interface RunDeps {
  /** The lock table's store: the lease is claimed and renewed there. */
  readonly locks: LeaseStore;
  /** The job table's store: job rows and chunk fence items. */
  readonly jobs: JobStore;
  /** The manifest bucket's store. @default none: a job without a manifest (DynamoDB only) */
  readonly manifests?: ManifestStore;
  /** Times the lease, the stop time and the retry backoffs. */
  readonly clock: Clock;
  /** Where the run's milestones go (fence-raised, completed, already-done, …). */
  readonly events: Events;
  /** Jitter source for the retry backoffs. @default Math.random */
  readonly random?: () => number;
}

/** Which run: the job's keys, the date, and how many chunks it has. */
export interface JobRun {
  /** The job's keys (jobKeys(name)). */
  readonly keys: JobKeys;
  /** The run's date, YYYY-MM-DD (validateDate). */
  readonly date: string;
  /** Chunks in the run: the raise raises this many chunk fences. */
  readonly chunks: number;
}

/** What the raise learnt. */
export interface RaisedRun {
  /** The job row as it was before the raise (undefined: the first raise). */
  readonly previous: JobRow | undefined;
  /** The chunks an earlier holder recorded done: skip them. */
  readonly chunksDone: readonly number[];
  /** The chunks still to do, in order. */
  readonly chunksToDo: readonly number[];
  /** The manifest, raised to the holder's token (absent for a job without one). */
  readonly manifest?: ManifestWriter;
}

/** What one chunk's work is given. */
export interface ChunkContext {
  /** The lease: `check()` (or `act`) before every write. */
  readonly lease: Lease;
  /** The chunk's own fence, held with the lease's token: `fence.guard()` in every transaction that writes the chunk. */
  readonly fence: HeldFence;
  /** The run's manifest, when the job has one: commit the chunk's object there. */
  readonly manifest?: ManifestWriter;
  /** The chunk's number, from 0. */
  readonly chunk: number;
  /** The run's hooks, for the job's own check points. */
  readonly hooks?: RunHooks;
}

/** A job's work on one chunk. It must write through `fence` and be safe to redo (a new holder redoes the chunk). */
export type ChunkWork<R> = (context: ChunkContext) => Promise<R>;

const manifestDepsOf = (deps: RunDeps): ManifestDeps | undefined =>
  deps.manifests ? { manifests: deps.manifests, clock: deps.clock, random: deps.random } : undefined;

/**
 * The fence of one chunk of a run: its own item beside the job row (`<jobId>#chunk#07`).
 * @param deps - the store, the job table, the clock
 * @param run - which run
 * @param chunk - the chunk's number, from 0
 */
export function chunkFence(deps: fences.FenceDeps, run: Pick<JobRun, 'keys' | 'date'>, chunk: number): Fence {
  return fences.jobFence(deps, run.keys.chunkFence(run.date, chunk));
}

/**
 * The job row of a run, read strongly consistent (undefined: never raised).
 * @param deps - the store and the job table
 * @param run - which run
 */
function readRun(deps: Pick<RunDeps, 'jobs'>, run: Pick<JobRun, 'keys' | 'date'>): Promise<JobRow | undefined> {
  return fences.readJob(deps, run.keys.job(run.date));
}

/**
 * Raise the fence first: 1. the job row (refusing a DONE run; entering the sparse index in the same
 * write), 2. every chunk fence, learning from the old items which chunks an earlier holder recorded done, 3. the
 * manifest, if the job has one. Checks the stop time before each step. Emits `fence-raised` and `manifest-raised`.
 * @param lease - the holder's lease: its token is raised, its holder named on the row
 * @throws AlreadyDoneError for a DONE run; FencedOutError when a higher token got there first
 */
export async function raiseRun(deps: RunDeps, run: JobRun, lease: Lease): Promise<RaisedRun> {
  // The stop time before every write, the job row's and each chunk fence's: a raise of many chunks takes longer
  // than a stop time, and the holder renews meanwhile (its heartbeat) or stops there.
  const { job: previous, chunksDone } = await fences.raise(deps, run.keys.job(run.date), lease.token, lease.holder, run.chunks, () => lease.check());
  const done = [...chunksDone].sort((a, b) => a - b);
  deps.events.emit('fence-raised', {
    token: lease.token,
    previousFence: previous?.fence,
    previousState: previous?.state,
    chunkFences: run.chunks,
    chunksDone: done,
  });
  let manifest: ManifestWriter | undefined;
  const manifestDeps = manifestDepsOf(deps);
  if (manifestDeps) {
    lease.check();
    ({ writer: manifest } = await ManifestWriter.raise(manifestDeps, run.keys.manifestPlace(run.date), run.keys.job(run.date), lease));
    deps.events.emit('manifest-raised', { token: lease.token });
  }
  const chunksToDo = Array.from({ length: run.chunks }, (_, c) => c).filter((c) => !chunksDone.has(c));
  return { previous, chunksDone: done, chunksToDo, ...(manifest ? { manifest } : {}) };
}

/**
 * A writer for the manifest a holder raised in another process (the workflow's chunk and complete functions);
 * undefined for a job without a manifest.
 * @param token - the token the manifest was raised to
 */
export function resumeManifest(deps: RunDeps, run: Pick<JobRun, 'keys' | 'date'>, token: number): ManifestWriter | undefined {
  const manifestDeps = manifestDepsOf(deps);
  return manifestDeps && ManifestWriter.resume(manifestDeps, run.keys.manifestPlace(run.date), run.keys.job(run.date), token);
}

/**
 * Record a chunk done ON ITS OWN fence item, conditional on that fence still being at `token`. Chunks never write
 * the job row, so concurrent chunks never touch a common item.
 * @throws FencedOutError when a newer holder raised the chunk's fence
 */
function markChunkDone(deps: fences.FenceDeps, run: Pick<JobRun, 'keys' | 'date'>, lease: Lease, chunk: number): Promise<void> {
  return fences.markChunkDone(deps, run.keys.job(run.date), lease.token, chunk, () => lease.check());
}

/**
 * One chunk: the job's work (given the chunk's fence), then the chunk recorded done on its fence item. Safe to redo
 * when the work is: the done mark is the same write.
 * @returns what the work returned
 */
export async function runChunk<R>(
  deps: RunDeps,
  run: Pick<JobRun, 'keys' | 'date'>,
  context: Omit<ChunkContext, 'fence'>,
  work: ChunkWork<R>,
): Promise<R> {
  const result = await work({ ...context, fence: context.lease.fenced(chunkFence(deps, run, context.chunk)) });
  // The done mark is a write like the work's, checked before it is sent: the work's last write can be answered past
  // the stop time.
  await markChunkDone(deps, run, context.lease, context.chunk);
  return result;
}

/**
 * Complete the run (design §4), once every chunk fence item says done: the manifest DONE first (if the job has one),
 * then the job row DONE, which leaves the sparse index in the same write, conditional on still owning the row.
 * Emits `completed`.
 * @param options - the raised manifest (default: resumed from `deps`), the run's hooks
 * @throws RunIncompleteError naming the chunks not done; FencedOutError when a newer holder raised the row
 */
export async function completeRun(
  deps: RunDeps,
  run: Pick<JobRun, 'keys' | 'date'>,
  lease: Lease,
  options: { readonly manifest?: ManifestWriter; readonly hooks?: RunHooks } = {},
): Promise<void> {
  lease.check();
  await options.hooks?.afterCheck?.({ step: 'complete' });
  const manifest = options.manifest ?? resumeManifest(deps, run, lease.token);
  const jobId = run.keys.job(run.date);
  // The stop time again once every chunk fence is read (thousands of reads), before the writes that say DONE.
  await fences.complete(
    deps,
    jobId,
    lease.token,
    async () => {
      lease.check();
      await manifest?.markDone();
    },
    () => lease.check(),
  );
  deps.events.emit('completed', { token: lease.token, jobId });
}

/** Who runs, and how. */
export interface DirectRun extends JobRun {
  /** The holder's name on the lease and the job row. */
  readonly holder: string;
  /** The lease's timing (validateLeaseConfig). */
  readonly config: LeaseConfig;
  /** Hooks between a passed check and its act (fault injection). @default none */
  readonly hooks?: RunHooks;
}

/** What a direct run did. */
export interface RunSummary<R> {
  /** The run's job row key. */
  readonly jobId: string;
  /** Who ran it. */
  readonly holder: string;
  /** The token this holder worked with (absent if it never claimed). */
  readonly token?: number;
  /** How the run ended for this holder. */
  readonly outcome: Outcome;
  /** What the work returned for each chunk this holder ran, in order. */
  readonly results: readonly R[];
  /** Chunks an earlier holder had recorded done, skipped. */
  readonly chunksSkipped: number;
  /** Seconds from start to end, on the monotonic clock. */
  readonly seconds: number;
  /** Why the run stopped, when it did not complete (fenced out, lost). */
  readonly reason?: string;
}

/**
 * The direct engine: the whole run in this process (the FencedJob workflow runs the same steps as Lambdas).
 *   0. a DONE run needs no lease: say so at once;
 *   1. claim the lease, clock-free (the token is its epoch), and renew it from this process while working;
 *   2. raise the fences first (raiseRun);
 *   3. each chunk still to do: the work, then its done mark (runChunk);
 *   4. complete (completeRun), then release.
 * Lost, fenced out or done: stop, discard local state and give the lease back conditionally; that is an
 * outcome, not an error. So is a claim budget spent on a live holder whose run is RUNNING (`another-holder`).
 * @throws ClaimBudgetExhaustedError when the budget ran out on a holder whose run is not RUNNING under it, or
 * any failure that is not an outcome (after releasing the lease)
 */
export async function runJob<R>(deps: RunDeps, run: DirectRun, work: ChunkWork<R>): Promise<RunSummary<R>> {
  const started = deps.clock.monotonicMs();
  const jobId = run.keys.job(run.date);
  const results: R[] = [];
  let chunksSkipped = 0;
  const finish = (outcome: Outcome, token?: number, reason?: string): RunSummary<R> => ({
    jobId,
    holder: run.holder,
    ...(token === undefined ? {} : { token }),
    outcome,
    results,
    chunksSkipped,
    seconds: Math.round(deps.clock.monotonicMs() - started) / 1000,
    ...(reason ? { reason } : {}),
  });

  // 0. A DONE run (a duplicate trigger after it finished) needs no lease.
  const before = await readRun(deps, run);
  if (before?.state === 'DONE') {
    deps.events.emit('already-done', { jobId, fence: before.fence });
    return finish('already-done');
  }
  // 1. Claim, clock-free; renew from this process while working.
  let lease: Lease;
  try {
    lease = await claim(deps, run.keys.lock(run.date), run.holder, run.config);
  } catch (err) {
    // A live holder outlasted the budget: a duplicate start if that holder is the one running it, else a problem.
    if (!(err instanceof ClaimBudgetExhaustedError) || !runningUnder(await readRun(deps, run), err.epoch)) throw err;
    deps.events.emit('another-holder', { jobId, holder: err.holder, epoch: err.epoch });
    return finish('another-holder', undefined, err.message);
  }
  lease.startHeartbeat();
  try {
    // 2. Raise the fences first.
    const raised = await raiseRun(deps, run, lease);
    chunksSkipped = raised.chunksDone.length;
    // 3. The chunks still to do.
    for (const chunk of raised.chunksToDo) {
      results.push(await runChunk(deps, run, { lease, manifest: raised.manifest, chunk, hooks: run.hooks }, work));
    }
    // 4. Complete, then release.
    await completeRun(deps, run, lease, { manifest: raised.manifest, hooks: run.hooks });
    await lease.release();
    return finish('completed', lease.token);
  } catch (err) {
    const outcome = outcomeOf(err);
    if (outcome === 'already-done') deps.events.emit('already-done', { jobId, fence: (err as AlreadyDoneError).fence });
    // Either way give the lease back conditionally, so the next holder need not wait it out.
    await releaseQuietly(lease, deps.events);
    if (outcome) return finish(outcome, lease.token, outcome === 'already-done' ? undefined : (err as Error).message);
    throw err;
  }
}

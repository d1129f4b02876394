/**
 * The check against reality (issue 13, item 5; issue 19, item 5): the schedule of `fencepost story`
 * (verify/story.ts) played by the REAL code on virtual time (lib/sim/real.ts: runJob, the lease, the fenced batch
 * and the Sweeper on the in-memory stores) predicts the outcome and the token order; test/process/story.test.ts runs the
 * real processes on DynamoDB Local too and compares. What differs between the two is the runtime (processes, signals,
 * a real store), not the code.
 *
 * The schedule, as story.ts plays it: the lease, renewal and margin of storyLease(timeScale); A claims, raises the
 * fences, commits chunk 0, and freezes right after a passed check for chunk 1's first batch; B starts once A is
 * frozen and claims after watching A's rvn for a full lease; A is continued once B has raised the fences; B is killed
 * after committing one chunk; the sweeper (every lease/2, two sightings a lease apart with the same rvn) re-queues the
 * orphan, starts C and sweeps no more; C, with takeoverLease(timeScale), claims, completes and releases.
 */
import { writeBatch } from '../lib/core/batch';
import { LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION, type LeaseConfig } from '../lib/core/config';
import { FencedOutError } from '../lib/core/errors';
import type { FencepostEvent } from '../lib/core/events';
import { jobKeys } from '../lib/core/job-keys';
import { runJob, type ChunkWork } from '../lib/core/job';
import type { SimRow } from '../lib/sim/engine';
import { RealWorld, sweeperOn, type RealWorker } from '../lib/sim/real';
import { STORY_NIGHT, storyLease, takeoverLease } from './story';

const CHUNKS = Math.ceil(STORY_NIGHT.invoices / STORY_NIGHT.chunkSize);
const DATE = '2026-09-28';

export interface StoryPrediction {
  readonly rows: readonly SimRow[];
  /** The token each actor claimed with, in the order they claimed. */
  readonly tokens: readonly { readonly actor: string; readonly token: number }[];
  /** The fence A's late batch met. */
  readonly lateBatchFence?: number;
  /** How many re-queues the sweeper recorded. */
  readonly requeues: number;
  /** The job row's state right after the sweeper's re-queue, and at the end. */
  readonly requeuedState?: string;
  readonly finalState: string;
}

const describe = (e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined =>
  e.event === 'claim'
    ? { event: 'claims the lease', token: e.token }
    : e.event === 'fence-raised'
      ? { event: 'raises the fence', token: e.token, fence: e.token }
      : e.event === 'batch-rejected'
        ? { event: 'late batch REFUSED by the fence', token: e.token, fence: e.fence }
        : e.event === 'requeued'
          ? { event: 're-queues the orphan', fence: e.fence }
          : e.event === 'completed'
            ? { event: 'completes the night', token: e.token }
            : e.event === 'released'
              ? { event: 'releases the lock', token: e.token }
              : undefined;

export async function predictStory(timeScale: number): Promise<StoryPrediction> {
  const config: LeaseConfig = { ...storyLease(timeScale), claimBudget: LEASE_DEFAULTS.claimBudget };
  const cConfig: LeaseConfig = { ...takeoverLease(timeScale), claimBudget: LEASE_DEFAULTS.claimBudget };
  const world = new RealWorld(0, config.leaseMs, describe);
  const keys = jobKeys('story');
  const jobId = keys.job(DATE);
  let requeuedState: string | undefined;
  let requeues = 0;

  /** The night's chunks in batches of 99, each checked; `before` may freeze or kill the worker at a (chunk, batch). */
  const work =
    (w: RealWorker, before: (chunk: number, batch: number) => Promise<void> | void): ChunkWork<number> =>
    async ({ lease, fence, chunk }) => {
      for (let batch = 0, from = 0; from < STORY_NIGHT.chunkSize; batch++, from += MAX_PUTS_PER_TRANSACTION) {
        lease.check();
        await before(chunk, batch);
        const puts = Array.from({ length: Math.min(MAX_PUTS_PER_TRANSACTION, STORY_NIGHT.chunkSize - from) }, (_, k) => ({
          table: 'invoices',
          item: { pk: { S: `inv#${DATE}#${chunk * STORY_NIGHT.chunkSize + from + k}` } },
        }));
        try {
          await writeBatch(fence, puts);
        } catch (err) {
          if (err instanceof FencedOutError) w.events.emit('batch-rejected', { token: lease.token, chunk, batch, fence: err.fence });
          throw err;
        }
      }
      return chunk;
    };
  const start = (w: RealWorker, before: (chunk: number, batch: number) => Promise<void> | void = () => undefined) =>
    void runJob(
      { ...w.deps, random: () => 0.5 },
      { keys, date: DATE, chunks: CHUNKS, holder: w.name, config: w === C ? cConfig : config },
      work(w, before),
    ).catch(() => undefined);

  const [A, B, C, sweeperWorker] = ['A', 'B', 'C', 'sweeper'].map((n) => world.worker(n));
  const sweeper = sweeperOn(sweeperWorker!, cConfig.leaseMs, keys.name);
  let cStarted = false;
  // As in the story: the sweeper stops once it has re-queued (it is then only waiting for C).
  const sweepLoop = () => {
    void sweeper
      .sweep(() => {
        cStarted = true;
        start(C);
      })
      .then(async (report) => {
        requeues += report.requeued.length;
        if (report.requeued.length > 0) requeuedState = (await world.jobs.readJob(jobId))?.state;
        else sweeperWorker.after(Math.max(100, Math.round(config.leaseMs / 2)), sweepLoop);
      });
  };
  // 4. B is killed after committing one chunk: at the first check of its second chunk; then the sweeper starts.
  let bChunks = 0;
  let bLastChunk: number | undefined;
  const killB = (chunk: number) => {
    if (chunk !== bLastChunk) [bChunks, bLastChunk] = [bChunks + 1, chunk];
    if (bChunks < 2) return;
    B.crash();
    sweepLoop();
    return new Promise<void>(() => undefined); // a killed process never goes on
  };
  // 3. A is continued once B has raised the fences.
  B.events.on((e) => e.event === 'fence-raised' && A.wake());
  // 1.–2. A freezes right after a passed check for chunk 1's first batch; B starts once A is frozen.
  start(A, (chunk, batch) => {
    if (chunk === 1 && batch === 0 && !cStarted && bLastChunk === undefined) {
      A.freeze('SIGSTOP right after a passed check');
      start(B, killB);
    }
  });
  await world.clock.runUntilIdle();
  const tokens = world.events.flatMap((x) => (x.e.event === 'claim' ? [{ actor: x.e.worker, token: x.e.token }] : []));
  const late = world.events.find((x) => x.e.worker === 'A' && x.e.event === 'batch-rejected')?.e;
  return {
    rows: world.rows,
    tokens,
    lateBatchFence: late?.event === 'batch-rejected' ? late.fence : undefined,
    requeues,
    requeuedState,
    finalState: (await world.jobs.readJob(jobId))?.state ?? 'never raised',
  };
}

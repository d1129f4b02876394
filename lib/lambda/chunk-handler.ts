/**
 * The chunk function of a fenced job, for its author: `fencedChunkHandler(work)` is the whole Lambda handler around
 * the job's own work on one chunk. FencedJob's workflow invokes it once per chunk with `{ jobDate, holder, token,
 * chunk }`, after its RaiseFence step raised the job row and every chunk fence to `token`. The handler:
 *
 *   1. parses and validates the input (the chunk must be one of the run's), before anything is written;
 *   2. resumes the lease, renewing first: the stop time is this process's own, never carried over;
 *   3. renews from this process while the work runs: a frozen function stops renewing, and its lease runs out;
 *   4. runs `work` with the chunk's fence (core's runChunk), then records the chunk done on its fence item;
 *   5. maps errors: typed errors keep their names for the workflow's Catch (FencedOutError, LeaseLostError and
 *      StopTimePassedError end the run quietly as lost), a transient store error becomes TransientStoreError (the
 *      workflow's Retry), and the metrics are flushed whatever happened.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { ConfigError } from '../core/errors';
import type { HeldFence } from '../core/fence';
import { resumeManifest, runChunk, type RunHooks } from '../core/job';
import { resume, type Lease } from '../core/lease';
import type { ManifestWriter } from '../core/manifest';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, runInput, type Environment, type Runtime, type RuntimeSource } from './runtime';

/** What the workflow's chunk task sends (lib/constructs/fenced-workflow.ts). */
export interface ChunkEvent {
  /** The run's date, YYYY-MM-DD. */
  readonly jobDate?: unknown;
  /** The holder: the execution's name, the lease's holder. */
  readonly holder?: unknown;
  /** The holder's fencing token (the lease's epoch), to which RaiseFence raised every fence. */
  readonly token?: unknown;
  /** The chunk's number, from 0. */
  readonly chunk?: unknown;
}

/** What the job's work on one chunk is given: the lease, the chunk's fence, which chunk of how many, the date, the env. */
export interface FencedChunkContext {
  /** The lease, resumed and renewed by this process: `check()` (or `act`) before every write. */
  readonly lease: Lease;
  /**
   * The chunk's own fence, raised to the lease's token and held with it: put `fence.guard()` in every transaction that
   * writes the chunk, or give it to writeFenced.
   */
  readonly fence: HeldFence;
  /** The run's manifest, when the job writes one: put the chunk's object there and commit it. */
  readonly manifest?: ManifestWriter;
  /** The chunk's number, from 0. */
  readonly chunk: number;
  /** Chunks in one run (FencedJob's `chunks`): this chunk is one of `0 .. chunks - 1`. */
  readonly chunks: number;
  /** The run's date, YYYY-MM-DD. */
  readonly date: string;
  /** The function's environment: the job's own variables beside FencedJob's (`Env`). */
  readonly env: Environment;
}

/**
 * The context the repository's own chunk functions get (its reference apps', through lib/lambda/internal.ts):
 * the public one, plus the function's runtime (clients, clock, events, settings) and the run's fault hooks.
 */
export interface RuntimeChunkContext extends FencedChunkContext {
  /** The function's runtime: clients, clock, events, the job's keys and settings. */
  readonly runtime: Runtime;
  /** The run's hooks, for the job's own check points (fault injection). */
  readonly hooks?: RunHooks;
}

/**
 * The handler of a fenced job's chunk function, its runtime built from the function's own environment.
 * @param work - the job's work on one chunk: write through `fence` (its guard in every transaction), check the
 *   lease before every write, be safe to redo
 * @returns the Lambda handler; it answers `{ chunk, ...result }`
 */
export function fencedChunkHandler<R extends object>(
  work: (context: FencedChunkContext) => Promise<R>,
): (event: ChunkEvent) => Promise<R & { chunk: number }> {
  return chunkHandlerOn(fromEnvironment(), (c) => work(publicContext(c)));
}

/**
 * The public context of a chunk's run, at run time too: the runtime and the hooks are the repository's.
 * @internal
 */
export const publicContext = (c: RuntimeChunkContext): FencedChunkContext => ({
  lease: c.lease,
  fence: c.fence,
  manifest: c.manifest,
  chunk: c.chunk,
  chunks: c.chunks,
  date: c.date,
  env: c.env,
});

/**
 * The same handler on a runtime source of the caller's (the local runner's source mode makes its own), its work
 * given the runtime too.
 * @param source - where the runtime comes from
 * @param work - as fencedChunkHandler's
 */
export function chunkHandlerOn<R extends object>(
  source: RuntimeSource,
  work: (context: RuntimeChunkContext) => Promise<R>,
): (event: ChunkEvent) => Promise<R & { chunk: number }> {
  return (event) =>
    invoke('chunk', source, async (rt) => {
      // 1. The input, every problem at once.
      const { jobDate, holder, token } = runInput(event, { token: true });
      const chunk = Number(event?.chunk);
      if (!Number.isInteger(chunk) || chunk < 0 || chunk >= rt.chunks)
        throw new ConfigError([`chunk must be 0..${rt.chunks - 1}, got ${JSON.stringify(event?.chunk)}`]);
      // 2. Renew first.
      const lease = await resume(rt.deps, rt.job.lock(jobDate), holder, token, rt.lease);
      // 3. Renew from the process doing the work.
      lease.startHeartbeat();
      try {
        // 4. The work, then the done mark on the chunk's fence item.
        const run = { keys: rt.job, date: jobDate };
        const manifest = resumeManifest(rt.deps, run, token);
        const result = await runChunk(rt.deps, run, { lease, manifest, chunk, hooks: rt.hooks }, (c) =>
          work({ ...c, chunks: rt.chunks, date: jobDate, env: rt.environment, runtime: rt }),
        );
        metrics.addMetric(Metric.chunksCommitted, MetricUnit.Count, 1);
        return { ...result, chunk };
      } finally {
        await lease.stopHeartbeat();
      }
    });
}

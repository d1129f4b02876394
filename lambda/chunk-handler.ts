/**
 * The chunk function of a fenced job, for its author: `fencedChunkHandler(work)` is the whole Lambda handler around
 * the job's own work on one chunk. FencedJob's workflow invokes it once per chunk with `{ jobDate, holder, token,
 * chunk }`, after its RaiseFence step raised the job row and every chunk fence to `token`. The handler:
 *
 *   1. parses and validates the input (the chunk must be one of the run's), before anything is written;
 *   2. resumes the lease, renewing first: the stop time is this process's own, never carried over (Part 2);
 *   3. renews from this process while the work runs: a frozen function stops renewing, and its lease runs out;
 *   4. runs `work` with the chunk's fence (core's runChunk), then records the chunk done on its fence item;
 *   5. maps errors: typed errors keep their names for the workflow's Catch (FencedOutError, LeaseLostError and
 *      StopTimePassedError end the run quietly as lost), a transient store error becomes TransientStoreError (the
 *      workflow's Retry), and the metrics are flushed whatever happened.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { ConfigError } from '../core/errors';
import { resumeManifest, runChunk, type ChunkContext } from '../core/job';
import { resume } from '../core/lease';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, nightInput, type Environment, type Runtime, type RuntimeSource } from './runtime';

/** What the workflow's chunk task sends (lib/fenced-workflow.ts). */
export interface ChunkEvent {
  readonly jobDate?: unknown;
  readonly holder?: unknown;
  readonly token?: unknown;
  readonly chunk?: unknown;
}

/** What the job's work on one chunk is given: core's ChunkContext, the run's date, and this function's world. */
export interface FencedChunkContext extends ChunkContext {
  /** The run's date, YYYY-MM-DD. */
  readonly date: string;
  /** The function's environment: the job's own variables beside FencedJob's. */
  readonly env: Environment;
  /** The function's runtime: clients, clock, events, the job's keys and settings. */
  readonly runtime: Runtime;
}

/**
 * The handler of a fenced job's chunk function.
 * @param work - the job's work on one chunk: write through `fence` (its guard in every transaction), check the
 *   lease before every write, be safe to redo
 * @param source - where the runtime comes from @default the function's own environment (fromEnvironment)
 * @returns the Lambda handler; it answers `{ chunk, ...result }`
 */
export function fencedChunkHandler<R extends object>(
  work: (context: FencedChunkContext) => Promise<R>,
  source: RuntimeSource = fromEnvironment(),
): (event: ChunkEvent) => Promise<R & { chunk: number }> {
  return (event) =>
    invoke('chunk', source, async (rt) => {
      // 1. The input, every problem at once.
      const { jobDate, holder, token } = nightInput(event, { token: true });
      const chunk = Number(event?.chunk);
      if (!Number.isInteger(chunk) || chunk < 0 || chunk >= rt.chunks)
        throw new ConfigError([`chunk must be 0..${rt.chunks - 1}, got ${JSON.stringify(event?.chunk)}`]);
      // 2. Renew first.
      const lease = await resume(rt.leaseDeps, rt.job.lock(jobDate), holder, token, rt.lease);
      // 3. Renew from the process doing the work.
      lease.startHeartbeat();
      try {
        // 4. The work, then the done mark on the chunk's fence item.
        const run = { keys: rt.job, date: jobDate };
        const manifest = resumeManifest(rt.runDeps, run, token);
        const result = await runChunk(rt.runDeps, run, { lease, manifest, chunk, hooks: rt.hooks }, (c) =>
          work({ ...c, date: jobDate, env: rt.environment, runtime: rt }),
        );
        metrics.addMetric(Metric.chunksCommitted, MetricUnit.Count, 1);
        return { ...result, chunk };
      } finally {
        await lease.stopHeartbeat();
      }
    });
}

/**
 * Raise the fence first: renew the lease (this process's own stop time) and keep renewing while
 * raising, then core's raiseRun:
 * the job row, every chunk fence and the manifest to our token (docs/DESIGN.md § Chunk fences). Returns the chunks
 * still to do (the chunk fence items an earlier holder had not marked done); a DONE run releases and says so.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { AlreadyDoneError } from '../core/errors';
import { raiseRun } from '../core/job';
import { resume } from '../core/lease';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, runInput, type RuntimeSource } from './runtime';

/** The RaiseFence step, made from a runtime source. */
export const raiseStep = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('raise', runtime, async (rt) => {
    const { jobDate, holder, token } = runInput(event, { token: true });
    const lease = await resume(rt.deps, rt.job.lock(jobDate), holder, token, rt.lease);
    // Renew from this process while it raises: a run of thousands of chunk fences takes longer than a stop time
    // (docs/DESIGN.md "The gap between renewals"), and raiseRun checks the stop time before every write.
    lease.startHeartbeat();
    try {
      const raised = await raiseRun(rt.deps, { keys: rt.job, date: jobDate, chunks: rt.chunks }, lease);
      return { alreadyDone: false, chunks: [...raised.chunksToDo] };
    } catch (err) {
      if (!(err instanceof AlreadyDoneError)) throw err;
      await lease.release();
      metrics.addMetric(Metric.runsAlreadyDone, MetricUnit.Count, 1);
      return { alreadyDone: true, chunks: [] as number[] };
    } finally {
      await lease.stopHeartbeat();
    }
  });

export const handler = raiseStep(fromEnvironment());

/**
 * Raise the fence first (reference Part 4): renew the lease (this process's own stop time), then raise the job
 * row, every chunk fence and the manifest to our token (docs/DESIGN.md § Chunk fences). Returns the chunks still to
 * do (the chunk fence items an earlier holder had not marked done); a DONE night releases and says so.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { raiseNight } from '../core/billing';
import { AlreadyDoneError } from '../core/errors';
import { resume } from '../core/lease';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import { invoke, metrics, nightInput } from './runtime';

export const handler = (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('raise', async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const lease = await resume(rt.leaseDeps, Keys.lock(jobDate), holder, token, rt.config);
    try {
      const night = await raiseNight(rt.deps, lease, jobDate, rt.config);
      return { alreadyDone: false, chunks: night.chunksToDo };
    } catch (err) {
      if (!(err instanceof AlreadyDoneError)) throw err;
      await lease.release();
      metrics.addMetric(Metric.runsAlreadyDone, MetricUnit.Count, 1);
      return { alreadyDone: true, chunks: [] as number[] };
    }
  });

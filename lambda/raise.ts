/**
 * Raise the fence first (reference Part 4): renew the lease (this process's own stop time), then raise the job
 * row, every chunk fence and the manifest to our token (docs/DESIGN.md § Chunk fences). Returns the chunks still to
 * do (the chunk fence items an earlier holder had not marked done); a DONE night releases and says so.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { AlreadyDoneError } from '../core/errors';
import { raise as raiseFences } from '../core/fence';
import { resume } from '../core/lease';
import { ManifestWriter } from '../core/manifest';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, nightInput, type RuntimeSource } from './runtime';

/** The RaiseFence step, made from a runtime source. */
export const raise = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('raise', runtime, async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const jobId = rt.job.job(jobDate);
    const lease = await resume(rt.leaseDeps, rt.job.lock(jobDate), holder, token, rt.lease);
    try {
      // 1. the job row, then every chunk fence: nothing is written into a chunk before every fence answered
      lease.check();
      const { job: old, chunksDone } = await raiseFences(rt.fenceDeps, jobId, lease.token, lease.holder, rt.chunks);
      rt.events.emit('fence-raised', { token: lease.token, previousFence: old?.fence, previousState: old?.state, chunkFences: rt.chunks });
      // 2. the manifest, S3's copy of the fence
      lease.check();
      await ManifestWriter.raise(rt.manifestDeps, rt.job.manifestPlace(jobDate), jobId, lease.token);
      rt.events.emit('manifest-raised', { token: lease.token });
      return { alreadyDone: false, chunks: Array.from({ length: rt.chunks }, (_, c) => c).filter((c) => !chunksDone.has(c)) };
    } catch (err) {
      if (!(err instanceof AlreadyDoneError)) throw err;
      await lease.release();
      metrics.addMetric(Metric.runsAlreadyDone, MetricUnit.Count, 1);
      return { alreadyDone: true, chunks: [] as number[] };
    }
  });

export const handler = raise(fromEnvironment());

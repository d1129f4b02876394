/**
 * Complete the night: the manifest DONE first, then the job row DONE (it leaves the sparse index; the row is the
 * authority), once every chunk fence item says done (it reads them: dynamodb:GetItem on the job table); then release
 * the lease.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { complete as completeRow } from '../core/fence';
import { resume } from '../core/lease';
import { ManifestWriter } from '../core/manifest';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, nightInput, type RuntimeSource } from './runtime';

/** The Complete step, made from a runtime source. */
export const complete = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('complete', runtime, async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const jobId = rt.job.job(jobDate);
    const lease = await resume(rt.leaseDeps, rt.job.lock(jobDate), holder, token, rt.lease);
    lease.check();
    await rt.hooks?.afterCheck?.({ step: 'complete' });
    await ManifestWriter.resume(rt.manifestDeps, rt.job.manifestPlace(jobDate), jobId, token).markDone();
    await completeRow(rt.fenceDeps, jobId, token);
    rt.events.emit('completed', { token, jobId });
    await lease.release();
    metrics.addMetric(Metric.runsCompleted, MetricUnit.Count, 1);
    return { outcome: 'completed' as const, token };
  });

export const handler = complete(fromEnvironment());

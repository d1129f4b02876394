/**
 * Complete the night (manifest DONE, then the job row DONE, leaving the sparse index, once every chunk fence item
 * says done: it reads them, dynamodb:GetItem on the job table), then release the lease.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { completeNight, resumeManifest } from '../core/billing';
import { resume } from '../core/lease';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import { invoke, metrics, nightInput } from './runtime';

export const handler = (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('complete', async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const lease = await resume(rt.leaseDeps, Keys.lock(jobDate), holder, token, rt.config);
    await completeNight(rt.deps, lease, resumeManifest(rt.deps, jobDate, token), jobDate, rt.hooks);
    await lease.release();
    metrics.addMetric(Metric.runsCompleted, MetricUnit.Count, 1);
    return { outcome: 'completed' as const, token };
  });

/**
 * Complete the run (core's completeRun): once every chunk fence item says done (it reads them: dynamodb:GetItem
 * on the job table), the manifest DONE, then the job row DONE (it leaves the sparse index; the row is the
 * authority); then release the lease. It renews from this process while it reads.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { completeRun } from '../core/job';
import { resume } from '../core/lease';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, runInput, type RuntimeSource } from './runtime';

/** The Complete step, made from a runtime source. */
export const completeStep = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('complete', runtime, async (rt) => {
    const { jobDate, holder, token } = runInput(event, { token: true });
    const lease = await resume(rt.deps, rt.job.lock(jobDate), holder, token, rt.lease);
    // Renew while it reads every chunk fence: thousands of reads can take longer than a stop time.
    lease.startHeartbeat();
    try {
      await completeRun(rt.deps, { keys: rt.job, date: jobDate }, lease, { hooks: rt.hooks });
    } finally {
      await lease.stopHeartbeat();
    }
    await lease.release();
    metrics.addMetric(Metric.runsCompleted, MetricUnit.Count, 1);
    return { outcome: 'completed' as const, token };
  });

export const handler = completeStep(fromEnvironment());

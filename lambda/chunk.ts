/**
 * One chunk: renew first and compute this process's own stop time, keep renewing from this process while writing
 * (the heartbeat is sent by the process doing the work, reference Part 10), write the chunk's fenced
 * transactions, then its object and the manifest commit. Safe to retry: nothing is recorded twice.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { billChunk, resumeManifest } from '../core/billing';
import { ConfigError } from '../core/errors';
import { resume } from '../core/lease';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import { invoke, metrics, nightInput } from './runtime';

export const handler = (event: { jobDate?: unknown; holder?: unknown; token?: unknown; chunk?: unknown }) =>
  invoke('chunk', async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const chunk = Number(event.chunk);
    const chunks = Math.ceil(rt.config.invoices / rt.config.chunkSize);
    if (!Number.isInteger(chunk) || chunk < 0 || chunk >= chunks)
      throw new ConfigError([`chunk must be 0..${chunks - 1}, got ${JSON.stringify(event.chunk)}`]);
    const lease = await resume(rt.leaseDeps, Keys.lock(jobDate), holder, token, rt.config);
    lease.startHeartbeat();
    try {
      const r = await billChunk(rt.deps, lease, resumeManifest(rt.deps, jobDate, token), jobDate, rt.config, chunk, rt.hooks);
      metrics.addMetric(Metric.invoicesRecorded, MetricUnit.Count, r.recorded);
      metrics.addMetric(Metric.invoicesAlreadyRecorded, MetricUnit.Count, r.alreadyRecorded);
      metrics.addMetric(Metric.chunksCommitted, MetricUnit.Count, 1);
      return { chunk, ...r };
    } finally {
      await lease.stopHeartbeat();
    }
  });

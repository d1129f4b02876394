/**
 * The billing job's chunk function (its FencedJob's user function): one chunk of invoices. Renew first and compute
 * this process's own stop time, keep renewing from this process while writing (the heartbeat is sent by the
 * process doing the work, reference Part 10), write the chunk's fenced transactions, then its object and the
 * manifest commit, then mark the chunk done on its fence item. Safe to retry: nothing is recorded twice.
 *
 * Billing's keys are core/schema.ts `Keys`, the keys of the job named `billing` (lambda/job-keys.ts); on top of the
 * job's environment it reads its invoice table and the night's size (apps/billing/stack.ts sets them).
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { billChunk, resumeManifest, type BillingDeps } from '../apps/billing/night';
import { validateBillingConfig } from '../core/config';
import { ConfigError } from '../core/errors';
import { resume } from '../core/lease';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import { Env } from './env';
import { fromEnvironment, invoke, metrics, nightInput, optionalNumber, required, type Runtime, type RuntimeSource } from './runtime';

/** What billing adds to the job's runtime: the invoice table and the night's size. */
function billing(rt: Runtime) {
  if (rt.job.job('') !== Keys.job(''))
    throw new ConfigError([`the billing chunk function serves the job whose keys are Keys (billing), not ${rt.job.name}`]);
  const config = validateBillingConfig({
    ...rt.lease,
    invoices: optionalNumber(rt.environment, Env.invoices),
    chunkSize: optionalNumber(rt.environment, Env.chunkSize),
  });
  const deps: BillingDeps = {
    ddb: rt.clients.ddb,
    s3: rt.clients.s3,
    clock: rt.clock,
    events: rt.events,
    bucket: rt.manifestDeps.bucket,
    tables: { locks: rt.leaseDeps.table, jobs: rt.fenceDeps.jobs, invoices: required(rt.environment, Env.invoiceTable) },
  };
  return { config, deps };
}

/** The BillChunk step, made from a runtime source. */
export const chunk = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown; chunk?: unknown }) =>
  invoke('chunk', runtime, async (rt) => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const { config, deps } = billing(rt);
    const n = Number(event.chunk);
    if (!Number.isInteger(n) || n < 0 || n >= rt.chunks)
      throw new ConfigError([`chunk must be 0..${rt.chunks - 1}, got ${JSON.stringify(event.chunk)}`]);
    const lease = await resume(rt.leaseDeps, Keys.lock(jobDate), holder, token, rt.lease);
    lease.startHeartbeat();
    try {
      const r = await billChunk(deps, lease, resumeManifest(deps, jobDate, token), jobDate, config, n, rt.hooks);
      metrics.addMetric(Metric.invoicesRecorded, MetricUnit.Count, r.recorded);
      metrics.addMetric(Metric.invoicesAlreadyRecorded, MetricUnit.Count, r.alreadyRecorded);
      metrics.addMetric(Metric.chunksCommitted, MetricUnit.Count, 1);
      return { chunk: n, ...r };
    } finally {
      await lease.stopHeartbeat();
    }
  });

export const handler = chunk(fromEnvironment());

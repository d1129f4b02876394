/**
 * The sweeper's second look, at least a full lease after the first: rows whose lock rvn (and owner, and fence)
 * did not change are orphans. Too many at once is a storm: re-queue none, say so. Otherwise re-queue at a bounded
 * rate, each with one conditional write, and start a billing execution for each re-queued night.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { decide, requeue, sightClaimed, type ClaimSighting } from '../core/sweeper';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import { Env } from './env';
import { invoke, logger, metrics, startBillingRun } from './runtime';

export const handler = (event: { sighted?: { sightings?: ClaimSighting[] } }) =>
  invoke('sweep-verify', async (rt) => {
    const first = event?.sighted?.sightings ?? [];
    const deps = { ddb: rt.deps.ddb, jobs: rt.deps.tables.jobs, locks: rt.deps.tables.locks, clock: rt.deps.clock };
    const { sightings: second } = await sightClaimed(deps, rt.config);
    const d = decide(first, second, second.length, {
      leaseMs: rt.config.leaseMs,
      stormShare: Number(process.env[Env.stormShare] ?? 0.5),
      stormMinimum: Number(process.env[Env.stormMinimum] ?? 3),
      maxRequeuesPerSweep: Number(process.env[Env.maxRequeues] ?? 10),
    });
    metrics.addMetric(Metric.orphansFound, MetricUnit.Count, d.orphans.length);
    metrics.addMetric(Metric.sweeperSkippedAlive, MetricUnit.Count, d.alive);
    metrics.addMetric(Metric.sweeperStorm, MetricUnit.Count, d.storm ? 1 : 0);
    if (d.storm)
      logger.error('sweeper storm: most claimed rows look dead at once; re-queued none', { orphans: d.orphans.length, claimed: second.length });
    const requeued: string[] = [];
    for (const o of d.requeueNow) {
      if (!(await requeue(deps, o))) continue; // a new holder raised the fence in between: nothing to do
      requeued.push(await startBillingRun(o.jobId.slice(Keys.job('').length), o.fence));
    }
    metrics.addMetric(Metric.orphansRequeued, MetricUnit.Count, requeued.length);
    return { orphans: d.orphans.length, storm: d.storm, requeued, deferred: d.deferred, alive: d.alive };
  });

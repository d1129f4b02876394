/**
 * The sweeper's second look, at least a full lease after the first: rows whose lock rvn (and owner, and fence)
 * did not change are orphans. Too many at once is a storm: re-queue none, say so. Otherwise re-queue at a bounded
 * rate: for each orphan, first start an execution of the job's state machine for the night, then its one
 * conditional write. The execution's name comes from the night and the fence seen, and its input is the same, so a
 * retried step (same sightings) meets the execution it started (AWS: same name and input while open is a success).
 * Dying between the two leaves the row RUNNING in the index: the next sweep finds it (docs/DESIGN.md "Crash answers").
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { SWEEPER_DEFAULTS, decide, requeue, sightClaimed, type ClaimSighting } from '../core/sweeper';
import { Metric } from '../core/observability';
import { Env } from './env';
import { fromEnvironment, invoke, logger, metrics, optionalNumber, type RuntimeSource } from './runtime';

/** The VerifyAndRequeue step, made from a runtime source. */
export const sweepVerify = (runtime: RuntimeSource) => (event: { sighted?: { sightings?: ClaimSighting[] } }) =>
  invoke('sweep-verify', runtime, async (rt) => {
    const first = event?.sighted?.sightings ?? [];
    const deps = { ddb: rt.clients.ddb, jobs: rt.fenceDeps.jobs, locks: rt.leaseDeps.table, clock: rt.clock };
    const { sightings: second } = await sightClaimed(deps, rt.lease);
    const env = rt.environment;
    const d = decide(first, second, second.length, {
      leaseMs: rt.lease.leaseMs,
      stormShare: optionalNumber(env, Env.stormShare) ?? SWEEPER_DEFAULTS.stormShare,
      stormMinimum: optionalNumber(env, Env.stormMinimum) ?? SWEEPER_DEFAULTS.stormMinimum,
      maxRequeuesPerSweep: optionalNumber(env, Env.maxRequeues) ?? SWEEPER_DEFAULTS.maxRequeuesPerSweep,
    });
    metrics.addMetric(Metric.orphansFound, MetricUnit.Count, d.orphans.length);
    metrics.addMetric(Metric.sweeperSkippedAlive, MetricUnit.Count, d.alive);
    metrics.addMetric(Metric.sweeperStorm, MetricUnit.Count, d.storm ? 1 : 0);
    if (d.storm)
      logger.error('sweeper storm: most claimed rows look dead at once; re-queued none', { orphans: d.orphans.length, claimed: second.length });
    const requeued: string[] = [];
    for (const o of d.requeueNow) {
      const run = await rt.startRun(rt.job.dateOf(o.jobId), o.fence); // first the run ...
      // ... then the write. It fails if a new holder raised the fence in between (the started run then finds that
      // holder, or the night DONE): nothing to record.
      if (await requeue(deps, o)) requeued.push(run);
      else logger.info('re-queue lost to a new holder; the run started for it will find that holder', { jobId: o.jobId, run });
    }
    metrics.addMetric(Metric.orphansRequeued, MetricUnit.Count, requeued.length);
    return { orphans: d.orphans.length, storm: d.storm, requeued, deferred: d.deferred, alive: d.alive };
  });

export const handler = sweepVerify(fromEnvironment());

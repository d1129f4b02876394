/**
 * The sweeper's second look, at least a full lease after the first: rows whose lock rvn (and owner, and fence)
 * did not change are orphans. Too many at once is a storm: re-queue none, say so. Otherwise re-queue at a bounded
 * rate: for each orphan, first start an execution of the job's state machine for the run, then record the
 * re-queue with one conditional write (the row stays RUNNING in the index). The execution's name comes from the
 * run, the fence seen and this sweep's own execution name, and its input from the run: a retried step meets the
 * execution it started (AWS: same name and input while open is a success; closed, ExecutionAlreadyExists), and a
 * later sweep, finding the row unchanged because that run died before its raise, starts a new one. Dying between
 * the two steps leaves the row as it was: the next sweep finds it (docs/DESIGN.md "Crash answers"). An orphan re-queued
 * maxRequeuesPerRun times is given up: no run, no write, one more in RunsGivenUp (docs/DESIGN.md "A poison run").
 */
import { createHash } from 'node:crypto';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { ConfigError } from '../core/errors';
import { SWEEPER_DEFAULTS, decide, requeue, sightClaimed, type ClaimSighting } from '../core/sweeper';
import { Metric } from '../core/observability';
import { Env } from './env';
import { fromEnvironment, invoke, logger, metrics, optionalNumber, type RuntimeSource } from './runtime';

/**
 * The name of the execution a sweep starts for a re-queued run: the same for a retry of the same sweep step, another for
 * another sweep. The sweep's own name enters as a hash (any length and characters in, 16 hex characters out), so
 * the name stays within Step Functions' 80 characters of [0-9A-Za-z_-].
 */
export function requeueRunName(jobDate: string, fence: number, sweep: string): string {
  return `requeue-${jobDate}-f${fence}-${createHash('sha256').update(sweep).digest('hex').slice(0, 16)}`;
}

/** The VerifyAndRequeue step, made from a runtime source. */
export const sweepVerifyStep = (runtime: RuntimeSource) => (event: { sighted?: { sightings?: ClaimSighting[] }; sweep?: string }) =>
  invoke('sweep-verify', runtime, async (rt) => {
    const sweep = event?.sweep;
    if (typeof sweep !== 'string' || sweep.length === 0) throw new ConfigError(["sweep (the sweeper's execution name) is required"]);
    const first = event?.sighted?.sightings ?? [];
    const deps = rt.sweeperDeps;
    const { sightings: second } = await sightClaimed(deps, rt.lease);
    const env = rt.environment;
    const d = decide(first, second, second.length, {
      leaseMs: rt.lease.leaseMs,
      stormShare: optionalNumber(env, Env.stormShare) ?? SWEEPER_DEFAULTS.stormShare,
      stormMinimum: optionalNumber(env, Env.stormMinimum) ?? SWEEPER_DEFAULTS.stormMinimum,
      maxRequeuesPerSweep: optionalNumber(env, Env.maxRequeues) ?? SWEEPER_DEFAULTS.maxRequeuesPerSweep,
      maxRequeuesPerRun: optionalNumber(env, Env.maxRequeuesPerRun) ?? SWEEPER_DEFAULTS.maxRequeuesPerRun,
    });
    metrics.addMetric(Metric.orphansFound, MetricUnit.Count, d.orphans.length);
    metrics.addMetric(Metric.sweeperSkippedAlive, MetricUnit.Count, d.alive);
    metrics.addMetric(Metric.sweeperStorm, MetricUnit.Count, d.storm ? 1 : 0);
    // Giving up writes nothing: the next sweep that finds the run an orphan adds it again (docs/DESIGN.md).
    metrics.addMetric(Metric.runsGivenUp, MetricUnit.Count, d.givenUp.length);
    if (d.givenUp.length > 0)
      logger.error('sweeper gave up on runs re-queued maxRequeuesPerRun times: a person must fix and re-arm them', {
        runs: d.givenUp.map((o) => ({ jobId: o.jobId, requeues: o.requeues, ownerToken: o.ownerToken })),
      });
    if (d.storm)
      logger.error('sweeper storm: most claimed rows look dead at once; re-queued none', { orphans: d.orphans.length, claimed: second.length });
    const requeued: string[] = [];
    for (const o of d.requeueNow) {
      const jobDate = rt.job.dateOf(o.jobId);
      const run = await rt.startRun(jobDate, requeueRunName(jobDate, o.fence, sweep)); // first the run ...
      // ... then the record. It fails if the row moved on in between (a new holder raised, the run is DONE, or a
      // retry of this step recorded it): the started run then finds that holder, or DONE.
      if (await requeue(deps, o)) requeued.push(run);
      else logger.info('re-queue lost to a new holder; the run started for it will find that holder', { jobId: o.jobId, run, sweep });
    }
    metrics.addMetric(Metric.orphansRequeued, MetricUnit.Count, requeued.length);
    return { orphans: d.orphans.length, storm: d.storm, requeued, deferred: d.deferred, alive: d.alive, givenUp: d.givenUp.map((o) => o.jobId) };
  });

export const handler = sweepVerifyStep(fromEnvironment());

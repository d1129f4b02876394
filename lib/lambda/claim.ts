/**
 * Claim, when the observation said so: one conditional write (still free, or rvn unchanged since the watch began).
 * The rvn this claim writes is derived from the execution and the observation, so a retry of this task after a
 * lost response recognises its own claim (lib/core/lease.ts tryClaim). Returns the token, or claimed: false to
 * send the workflow back to observe.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { claimRvnFor, tryClaim } from '../core/lease';
import { Metric } from '../core/observability';
import type { Observation } from './observe';
import { fromEnvironment, invoke, metrics, runInput, type RuntimeSource } from './runtime';

/** The Claim step, made from a runtime source. */
export const claimStep = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; sighting?: Observation }) =>
  invoke('claim', runtime, async (rt) => {
    const { jobDate, holder } = runInput(event);
    const key = rt.job.lock(jobDate);
    const seen = event.sighting;
    const sighting = {
      holder: seen?.holder,
      epoch: seen?.seenEpoch,
      seenRvn: seen?.free === false ? seen.seenRvn : undefined,
      waitMs: seen?.watch?.unchangedMs ?? 0,
    };
    const claimRvn = claimRvnFor(holder, { seenRvn: sighting.seenRvn, epoch: sighting.epoch }, seen?.attempt ?? 0);
    const token = await tryClaim(rt.deps, key, holder, rt.lease, sighting, claimRvn);
    if (token === undefined) return { claimed: false as const };
    if (sighting.waitMs > 0) metrics.addMetric(Metric.takeoverWaitMs, MetricUnit.Milliseconds, sighting.waitMs);
    rt.events.emit('claim', { key, token, waitedMs: sighting.waitMs });
    return { claimed: true as const, token };
  });

export const handler = claimStep(fromEnvironment());

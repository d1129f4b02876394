/**
 * Claim, when the observation said so: one conditional write (still free, or rvn unchanged since the watch began).
 * The rvn this claim writes is derived from the execution and the observation, so a retry of this task after a
 * lost response recognises its own claim (core/lease.ts tryClaim). Returns the token, or claimed: false to
 * send the workflow back to observe.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { claimRvnFor, tryClaim } from '../core/lease';
import { Keys } from '../core/schema';
import { Metric } from '../core/observability';
import type { Observation } from './observe';
import { invoke, metrics, nightInput } from './runtime';

export const handler = (event: { jobDate?: unknown; holder?: unknown; sighting?: Observation }) =>
  invoke('claim', async (rt) => {
    const { jobDate, holder } = nightInput(event);
    const seen = event.sighting;
    const sighting = { holder: seen?.holder, seenRvn: seen?.free === false ? seen.seenRvn : undefined, waitMs: seen?.watch?.unchangedMs ?? 0 };
    const claimRvn = claimRvnFor(holder, { seenRvn: sighting.seenRvn, epoch: seen?.seenEpoch }, seen?.attempt ?? 0);
    const token = await tryClaim(rt.leaseDeps, Keys.lock(jobDate), holder, rt.config, sighting, claimRvn);
    if (token === undefined) return { claimed: false as const };
    if (sighting.waitMs > 0) metrics.addMetric(Metric.takeoverWaitMs, MetricUnit.Milliseconds, sighting.waitMs);
    rt.deps.events.emit('claim', { key: Keys.lock(jobDate), token, waitedMs: sighting.waitMs });
    return { claimed: true as const, token };
  });

/**
 * The sweeper's first look: every row in the sparse index, with its lock's rvn. The state
 * machine then waits the longest lease among them (a Wait state: the sweeper's own timer) before verifying.
 */
import { sightClaimed } from '../core/sweeper';
import { fromEnvironment, invoke, type RuntimeSource } from './runtime';

/** The SightClaimed step, made from a runtime source. */
export const sweepSightStep = (runtime: RuntimeSource) => () =>
  invoke('sweep-sight', runtime, async (rt) => {
    const { sightings } = await sightClaimed(rt.sweeperDeps, rt.lease);
    return {
      claimed: sightings.length,
      sightings,
      waitSeconds: Math.ceil(Math.max(0, ...sightings.map((s) => s.leaseMs)) / 1000),
    };
  });

export const handler = sweepSightStep(fromEnvironment());

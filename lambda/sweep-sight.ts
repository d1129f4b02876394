/**
 * The sweeper's first look (reference Part 6): every row in the sparse index, with its lock's rvn. The state
 * machine then waits the longest lease among them (a Wait state: the sweeper's own timer) before verifying.
 */
import { sightClaimed } from '../core/sweeper';
import { invoke } from './runtime';

export const handler = () =>
  invoke('sweep-sight', async (rt) => {
    const { sightings } = await sightClaimed(
      { ddb: rt.deps.ddb, jobs: rt.deps.tables.jobs, locks: rt.deps.tables.locks, clock: rt.deps.clock },
      rt.config,
    );
    return {
      claimed: sightings.length,
      sightings,
      waitSeconds: Math.ceil(Math.max(0, ...sightings.map((s) => s.leaseMs)) / 1000),
    };
  });

/**
 * The explored worlds, by name: each runs one schedule from its seed (optionally with a broken variant of a rule)
 * through the one driver (world.ts runWorld) and returns what its checks found. `all` picks a world by the seed, so a seed alone still names one schedule exactly.
 */
import { ELECTION_WORLD } from './election-world';
import { ELECTION_MUTATIONS, MUTATIONS, NIGHT_MUTATIONS } from './mutations';
import { WORKFLOW_WORLD, WORKFLOW_WORLD_MUTATIONS } from './workflow-world';
import { NIGHT_WORLD } from './night-world';
import { POSTGRES_MUTATIONS, POSTGRES_WORLD } from './postgres-world';
import { runWorld, type ScheduleResult } from '../../lib/testing/world';

interface Entry {
  /** What the world runs, for `--help` and the summary. */
  readonly about: string;
  readonly mutations: readonly string[];
  readonly run: (seed: number, mutation?: string) => Promise<ScheduleResult>;
}

export const WORLDS = {
  night: {
    about: 'runJob, the lease and the local Sweeper (verify/explore/night-world.ts)',
    mutations: [...MUTATIONS, ...NIGHT_MUTATIONS],
    run: (seed: number, mutation?: string) => runWorld(NIGHT_WORLD, seed, mutation),
  },
  workflow: {
    about: "the job's and the sweeper's Lambda handlers under their synthesized state machines (workflow-world.ts)",
    mutations: WORKFLOW_WORLD_MUTATIONS,
    run: (seed: number, mutation?: string) => runWorld(WORKFLOW_WORLD, seed, mutation),
  },
  election: {
    about: 'election, handover, the restore bump, the manifest and the epoch ledger (election-world.ts)',
    mutations: ELECTION_MUTATIONS,
    run: (seed: number, mutation?: string) => runWorld(ELECTION_WORLD, seed, mutation),
  },
  postgres: {
    about: 'withLease and the PostgreSQL fence (fencepost/postgres) on its twin, PostgreSQL or Aurora DSQL (postgres-world.ts)',
    mutations: POSTGRES_MUTATIONS,
    run: (seed: number, mutation?: string) => runWorld(POSTGRES_WORLD, seed, mutation),
  },
} as const satisfies Record<string, Entry>;

export type WorldName = keyof typeof WORLDS;
export const WORLD_NAMES = Object.keys(WORLDS) as WorldName[];

/** Every mutation some world takes, once each. */
export const ALL_MUTATIONS: readonly string[] = [...new Set(WORLD_NAMES.flatMap((w): readonly string[] => WORLDS[w].mutations))];

/** The worlds `choice` covers that take `mutation` (all of them without one). */
export function worldsFor(choice: WorldName | 'all', mutation?: string): WorldName[] {
  const names = choice === 'all' ? WORLD_NAMES : [choice];
  return mutation === undefined ? names : names.filter((w) => (WORLDS[w].mutations as readonly string[]).includes(mutation));
}

/** The world schedule `seed` runs in: among several, the seed picks one (seed mod their count), so a replay is exact. */
export function worldOf(seed: number, worlds: readonly WorldName[]): WorldName {
  if (worlds.length === 0) throw new Error('no world takes this mutation');
  return worlds[seed % worlds.length]!;
}

/**
 * `fencepost simulate explore`: many schedules from one seed. Schedule i of `--seed N` is the schedule of seed N + i,
 * so `--seed N+i --schedules 1` replays it exactly (with the same `--world` and `--mutation`). With several worlds,
 * the seed picks the world (worlds.ts), and the replay command names it.
 */
import { createHash } from 'node:crypto';
import type { ScheduleResult } from '../../lib/testing/world';
import { WORLDS, type WorldName, worldOf, worldsFor } from './worlds';

/** A failing schedule: its seed, the command that replays it, what broke, and its event trace. */
interface ExploreViolation {
  readonly seed: number;
  readonly world: WorldName;
  readonly replay: string;
  readonly violations: readonly string[];
  /** The checks that found them (ScheduleResult.caughtBy). */
  readonly caughtBy: readonly string[];
  readonly trace: readonly string[];
}

/** What `simulate explore --json` ends with. */
export interface ExploreSummary {
  readonly seed: number;
  readonly world: WorldName | 'all';
  readonly mutation: string | null;
  readonly schedules: number;
  /** How many schedules each world ran. */
  readonly worlds: Readonly<Partial<Record<WorldName, number>>>;
  readonly violations: readonly ExploreViolation[];
  /** How often each fault was injected at each crash point (`world kind method@step`). */
  readonly crashPoints: Readonly<Record<string, number>>;
  /** Schedules that ended with no state to check (the night and workflow worlds: no holder ever raised the night). */
  readonly neverRaised: number;
  /**
   * Each check that found something, by `world: check`: in how many schedules, and in how many it was the only one
   * (what that check alone catches: with a `--mutation`, the proof the check is needed).
   */
  readonly caughtBy: Readonly<Record<string, { readonly schedules: number; readonly alone: number }>>;
  /** sha256 of every schedule's trace, in order: the same seed gives the same digest. */
  readonly digest: string;
}

/** The one command that replays schedule `seed` of `world` exactly. */
export function replayCommand(seed: number, world: WorldName, mutation?: string): string {
  return `fencepost simulate explore --world ${world} --seed ${seed} --schedules 1${mutation ? ` --mutation ${mutation}` : ''}`;
}

export interface ExploreOptions {
  /** One world, or `all`: each seed picks one of the worlds that take the mutation. @default 'all' */
  readonly world?: WorldName | 'all';
  readonly mutation?: string;
  /** Called after each schedule (progress, early stop: return false to stop). */
  readonly onSchedule?: (result: ScheduleResult, world: WorldName) => boolean | void;
}

/** Run `schedules` schedules from `seed`. */
export async function explore(seed: number, schedules: number, options: ExploreOptions = {}): Promise<ExploreSummary> {
  const { world = 'all', mutation, onSchedule } = options;
  const candidates = worldsFor(world, mutation);
  if (candidates.length === 0) throw new Error(`no world ${world === 'all' ? '' : `named ${world} `}takes the mutation ${mutation}`);
  const hash = createHash('sha256');
  const violations: ExploreViolation[] = [];
  const crashPoints: Record<string, number> = {};
  const worlds: Partial<Record<WorldName, number>> = {};
  const caughtBy: Record<string, { schedules: number; alone: number }> = {};
  let run = 0;
  let neverRaised = 0;
  for (let i = 0; i < schedules; i++) {
    const name = worldOf(seed + i, candidates);
    const result = await WORLDS[name].run(seed + i, mutation);
    run++;
    worlds[name] = (worlds[name] ?? 0) + 1;
    // One update a schedule (each line and its newline, between the world's name and the end mark): a call a line cost more.
    hash.update(`${name}\n${result.trace.join('\n')}${result.trace.length > 0 ? '\n' : ''}--\n`);
    for (const p of result.crashPoints) crashPoints[`${name} ${p}`] = (crashPoints[`${name} ${p}`] ?? 0) + 1;
    if (result.state === undefined) neverRaised++;
    for (const check of result.caughtBy) {
      const count = (caughtBy[`${name}: ${check}`] ??= { schedules: 0, alone: 0 });
      count.schedules++;
      if (result.caughtBy.length === 1) count.alone++;
    }
    if (result.violations.length > 0)
      violations.push({
        seed: result.seed,
        world: name,
        replay: replayCommand(result.seed, name, mutation),
        violations: result.violations,
        caughtBy: result.caughtBy,
        trace: result.trace,
      });
    if (onSchedule?.(result, name) === false) break;
  }
  const sorted = Object.fromEntries(Object.entries(crashPoints).sort(([a], [b]) => a.localeCompare(b)));
  return {
    seed,
    world,
    mutation: mutation ?? null,
    schedules: run,
    worlds,
    violations,
    crashPoints: sorted,
    neverRaised,
    caughtBy: Object.fromEntries(Object.entries(caughtBy).sort(([a], [b]) => a.localeCompare(b))),
    digest: hash.digest('hex'),
  };
}

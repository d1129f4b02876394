/**
 * `fencepost simulate explore`: many schedules from one seed. Schedule i of `--seed N` is the schedule of seed N + i,
 * so `--seed N+i --schedules 1` replays it exactly (with the same `--mutation`).
 */
import { createHash } from 'node:crypto';
import type { Mutation } from './mutations';
import { runSchedule, type ScheduleResult } from './world';

/** A failing schedule: its seed, the command that replays it, what broke, and its event trace. */
interface ExploreViolation {
  readonly seed: number;
  readonly replay: string;
  readonly violations: readonly string[];
  readonly trace: readonly string[];
}

/** What `simulate explore --json` ends with. */
export interface ExploreSummary {
  readonly seed: number;
  readonly mutation: Mutation | null;
  readonly schedules: number;
  readonly violations: readonly ExploreViolation[];
  /** How often each fault was injected at each crash point (`kind method@step`). */
  readonly crashPoints: Readonly<Record<string, number>>;
  /** Schedules whose night no holder ever raised (every holder died before its raise): nothing for the sweeper to see. */
  readonly neverRaised: number;
  /** sha256 of every schedule's trace, in order: the same seed gives the same digest. */
  readonly digest: string;
}

/** The one command that replays schedule `seed` exactly. */
export function replayCommand(seed: number, mutation?: Mutation): string {
  return `fencepost simulate explore --seed ${seed} --schedules 1${mutation ? ` --mutation ${mutation}` : ''}`;
}

/**
 * Run `schedules` schedules from `seed`.
 * @param onSchedule - called after each schedule (progress, early stop: return false to stop)
 */
export async function explore(
  seed: number,
  schedules: number,
  mutation?: Mutation,
  onSchedule?: (result: ScheduleResult) => boolean | void,
): Promise<ExploreSummary> {
  const hash = createHash('sha256');
  const violations: ExploreViolation[] = [];
  const crashPoints: Record<string, number> = {};
  let run = 0;
  let neverRaised = 0;
  for (let i = 0; i < schedules; i++) {
    const result = await runSchedule(seed + i, mutation);
    run++;
    for (const line of result.trace) hash.update(line).update('\n');
    hash.update('--\n');
    for (const p of result.crashPoints) crashPoints[p] = (crashPoints[p] ?? 0) + 1;
    if (result.state === undefined) neverRaised++;
    if (result.violations.length > 0)
      violations.push({ seed: result.seed, replay: replayCommand(result.seed, mutation), violations: result.violations, trace: result.trace });
    if (onSchedule?.(result) === false) break;
  }
  const sorted = Object.fromEntries(Object.entries(crashPoints).sort(([a], [b]) => a.localeCompare(b)));
  return { seed, mutation: mutation ?? null, schedules: run, violations, crashPoints: sorted, neverRaised, digest: hash.digest('hex') };
}

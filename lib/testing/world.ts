/**
 * What an explored world is, and the one driver that runs any of them. A world is data: its
 * settings; a setup that builds one schedule's state from its seed (the clock, the seeded streams, the scheduler, the
 * stores, the records the checks read); the actors it starts on that state; and its named checks of the state the
 * schedule ended in. `runWorld` runs every world the same way, with a turn limit for each.
 *
 * The worlds: the repository's (verify/explore/worlds.ts names them) and the FencedJob's (workflow/workflow-world.ts).
 */
import type { Placed, RunEnd, Scheduler } from './scheduler';

/** What one schedule did and what its checks found. */
export interface ScheduleResult {
  readonly seed: number;
  readonly trace: readonly string[];
  readonly violations: readonly string[];
  /** Each injected fault, as `kind method@step`. */
  readonly crashPoints: readonly string[];
  /** What the world ended in (the run's state; the election world's ledgers); absent: the run was never raised. */
  readonly state: string | undefined;
  /**
   * Which found the violations: the names of the checks that did, `seen during the run` for what the harness saw as
   * it happened, `turn limit` for a schedule that looped; empty when none did.
   */
  readonly caughtBy: readonly string[];
}

/** The name `caughtBy` gives what the harness saw break as it happened (WorldState.violations), and a looping schedule. */
export const SEEN_DURING_RUN = 'seen during the run';
export const TURN_LIMIT = 'turn limit';

/** What every world's state holds, for the driver. */
export interface WorldState {
  readonly scheduler: Scheduler;
  /** The broken variant (if any), applied in setup: undone once the schedule ran, before the checks. */
  readonly broken: { restore(): void };
  /**
   * What the harness saw break at the moment it happened (an act past its stop time, a batch passed below its
   * fence): it can only be seen then. Reported first, in the order seen, then each check's findings.
   */
  readonly violations: string[];
}

/** One named check of the state a schedule ended in: its violations, as sentences for the report. */
export interface Check<S> {
  readonly name: string;
  /** `ended`: why the scheduler stopped (a world whose actors may still run at the horizon reports them). */
  readonly check: (state: S, ended: RunEnd) => readonly string[] | Promise<readonly string[]>;
}

export interface World<S extends WorldState, P extends Placed = Placed> {
  /**
   * Build one schedule's state from its seed and broken variant; nothing runs yet. With `placed`, the schedule's
   * faults and the world's own chance events (a duplicate trigger, a restore) are the placed ones only: none is drawn.
   */
  readonly setup: (seed: number, mutation: string | undefined, placed?: P) => S;
  /** Start the actors on that state. */
  readonly actors: (state: S) => void;
  /** The schedule is over (asked after every turn). */
  readonly done: (state: S) => boolean;
  /** The virtual time a schedule may run to at most. */
  readonly horizonMs: (state: S) => number;
  /**
   * The turns a schedule may take at most: a loop that takes no virtual time would otherwise never end. Chosen far
   * above what any schedule takes, so reaching it is a violation.
   */
  readonly maxTurns: number;
  /** In the order they report: safety first, liveness last. */
  readonly checks: readonly Check<S>[];
  /** The trace's last line, the result's `state`, and the world's own faults beyond the scheduler's (`kind point`). */
  readonly end: (state: S) => Promise<{ readonly line: string; readonly state: string | undefined; readonly faults?: readonly string[] }>;
}

/** Run one schedule of `world` from its seed (optionally with a broken variant, or with placed faults) and check it. */
export async function runWorld<S extends WorldState, P extends Placed>(
  world: World<S, P>,
  seed: number,
  mutation?: string,
  placed?: P,
): Promise<ScheduleResult> {
  const state = world.setup(seed, mutation, placed);
  world.actors(state);
  const { scheduler } = state;
  let ended: RunEnd;
  try {
    ended = await scheduler.run(() => world.done(state), world.horizonMs(state), world.maxTurns);
  } finally {
    state.broken.restore(); // a broken variant patches shared classes: never leave it on for the next schedule
  }
  const violations = state.violations;
  const caughtBy = violations.length > 0 ? [SEEN_DURING_RUN] : [];
  if (ended === 'turns') {
    caughtBy.push(TURN_LIMIT);
    violations.push(
      `the schedule hit its turn limit (${world.maxTurns} turns) at ${scheduler.clock.monotonicMs()} ms: the actors loop without time passing`,
    );
  }
  for (const c of world.checks) {
    const found = await c.check(state, ended);
    if (found.length > 0) caughtBy.push(c.name);
    violations.push(...found);
  }
  const end = await world.end(state);
  scheduler.log(end.line);
  return {
    seed,
    trace: scheduler.trace,
    violations,
    crashPoints: [...scheduler.faults.map((f) => `${f.kind} ${f.point}`), ...(end.faults ?? [])],
    state: end.state,
    caughtBy,
  };
}

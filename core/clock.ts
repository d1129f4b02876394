/**
 * The two clocks every machine has (reference Part 3).
 *
 *   monotonic  only moves forward, at the machine's own rate; every duration is timed on it (lease waits,
 *              renewal timers, stop times). Its zero is arbitrary, so a monotonic reading never leaves the
 *              process that took it: a stop time never crosses a process or machine boundary.
 *   wall       the time of day; it can be stepped back or forward at any moment. Used only for informational
 *              fields (renewed_at, claimed_since) that no code compares (design invariant 5).
 */
import { setTimeout as delay } from 'node:timers/promises';

/** The clocks a component is given (never read directly): monotonic for durations, wall for informational fields only. */
export interface Clock {
  /** Milliseconds on this process's monotonic clock. */
  monotonicMs(): number;
  /** Milliseconds since the epoch on the wall clock. Informational only: never time a duration with it. */
  wallMs(): number;
  /** Wait `ms` milliseconds, timed on the monotonic clock. */
  sleep(ms: number): Promise<void>;
}

/** The real clocks: performance.now() is CLOCK_MONOTONIC; Node's timers also run on the monotonic clock. */
export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(), // wall: informational fields only
  sleep: (ms) => delay(Math.max(0, ms)).then(() => undefined),
};

/** A wall-clock ISO string for informational attributes. */
export function wallIso(clock: Clock): string {
  return new Date(clock.wallMs()).toISOString();
}

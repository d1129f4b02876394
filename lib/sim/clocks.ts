/**
 * The two clocks every simulated machine has, as functions of true time.
 *
 *   monotonic  runs at (1 + rate) of true time and never jumps: rate error is the only error it has. Every
 *              duration a worker times (renewal timers, stop times, claim waits) is read from it.
 *   wall       true time + offset, plus every step taken so far (an NTP step back or forward). It is what a
 *              lease stored in a database writes (lease_until) and what Redis judges key expiry by.
 * Offset never matters to a machine that compares only its own monotonic readings; rate always does.
 */

/** A step of the wall clock: at true time `at`, the wall clock jumps by `byMs` (negative: back). */
export interface WallStep {
  readonly at: number;
  readonly byMs: number;
}

export interface ClockSpec {
  /** Rate error of the monotonic clock: 0.001 runs 0.1 % fast. @default 0 */
  readonly rate?: number;
  /** Wall clock minus true time, ms (positive: fast). @default 0 */
  readonly offsetMs?: number;
  /** Wall-clock steps, in true time. @default none */
  readonly steps?: readonly WallStep[];
}

export class WorkerClock {
  readonly rate: number;
  readonly offsetMs: number;
  readonly steps: readonly WallStep[];

  constructor(spec: ClockSpec = {}) {
    this.rate = spec.rate ?? 0;
    this.offsetMs = spec.offsetMs ?? 0;
    this.steps = [...(spec.steps ?? [])].sort((a, b) => a.at - b.at);
  }

  /** The monotonic reading at true time t (zero at true 0; its zero is arbitrary and never leaves the machine). */
  monotonic(t: number): number {
    return t * (1 + this.rate);
  }

  /** The true time at which the monotonic clock reads m. */
  trueAtMonotonic(m: number): number {
    return m / (1 + this.rate);
  }

  /** The wall reading at true time t: offset plus every step taken at or before t. */
  wall(t: number): number {
    return t + this.offsetMs + this.steps.filter((s) => s.at <= t).reduce((sum, s) => sum + s.byMs, 0);
  }
}

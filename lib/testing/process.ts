/**
 * One simulated process on a world's single virtual clock: the one gate through which both the simulator's real-code
 * scenarios (lib/sim/real.ts) and the explorer (verify/explore/) run the real code.
 *
 * The process is the Clock its code is given: its monotonic clock may run at its own rate, its wall clock may be off,
 * stepped or drifting. It is also a gate: while it is paused or frozen nothing of it runs (its timers and its store
 * calls wait, and run when it wakes, still believing what they believed); once crashed, nothing of it runs again.
 * How its store calls reach the store is the world's choice, through `through`: at once with a network delay (the
 * scenarios), or parked for a seeded scheduler to pick and perhaps fault (the explorer).
 */
import type { Clock, ClockTimer, VirtualClock } from '../core/clock';

/**
 * Floating-point error, not time: a duration converted from a clock of its own rate to true time can end an ulp short
 * on that clock, and code that then waits the ulp again would never move the clock. So a converted wait is this much
 * longer, and a pause this much short of its end is over.
 */
const ROUNDING_MS = 1e-6;

export class SimProcess implements Clock {
  /** Crashed: nothing of it runs again, and it releases nothing. */
  crashed = false;
  /** Paused until this time on its own monotonic clock (a GC pause of known length). */
  pausedUntil = -Infinity;
  /** The monotonic clock's rate error: 0.001 runs 0.1 % fast. Set it before the process starts. */
  rate = 0;
  /** Its wall clock minus true time, besides the drift of `setWallRate`. */
  wallOffsetMs = 0;
  private wallRate = 1;
  private wallRateFromMs = 0;
  /** Frozen until `wake` (SIGSTOP … SIGCONT): what fell due meanwhile, to run at the wake-up. */
  private frozen: (() => void)[] | undefined;
  /** What fell due during the pause, to run at its end. */
  private held: (() => void)[] = [];

  constructor(
    readonly name: string,
    /** The world's clock: true time, shared by every process. */
    readonly trueClock: VirtualClock,
  ) {}

  monotonicMs(): number {
    return this.trueClock.monotonicMs() * (1 + this.rate);
  }

  wallMs(): number {
    const trueMs = this.trueClock.monotonicMs();
    return this.trueClock.wallMs() + this.wallOffsetMs + (this.wallRate - 1) * (trueMs - this.wallRateFromMs);
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.after(ms, resolve));
  }

  /**
   * A timer on its own clock that a pause or a freeze delays to the wake-up and a crash cancels. A process sets one
   * for every wait, so its functions are inline and unnamed: tsx (esbuild's keep-names) gives every closure bound to
   * a name a call that sets its name, each time it is made.
   */
  after(ms: number, fn: () => void): ClockTimer {
    let cancelled = false;
    const timer = this.trueClock.after(this.trueMsOf(ms), () =>
      this.run(() => {
        if (!cancelled) fn();
      }),
    );
    return {
      cancel() {
        cancelled = true;
        timer.cancel();
      },
    };
  }

  /** The true time after which its own monotonic clock has moved at least `ms` (exactly `ms` when it runs true). */
  trueMsOf(ms: number): number {
    return this.rate === 0 || ms <= 0 ? ms : ms / (1 + this.rate) + ROUNDING_MS;
  }

  /** Step its wall clock by `byMs` (negative: back). */
  stepWall(byMs: number): void {
    this.wallOffsetMs += byMs;
  }

  /** From now on its wall clock runs at `rate` (the reading stays continuous: the error gained so far stays). */
  setWallRate(rate: number): void {
    const trueMs = this.trueClock.monotonicMs();
    this.wallOffsetMs += (this.wallRate - 1) * (trueMs - this.wallRateFromMs);
    [this.wallRate, this.wallRateFromMs] = [rate, trueMs];
  }

  /** Pause now for `ms` of its own clock: the pause lands wherever its code is. */
  pause(ms: number): void {
    this.pausedUntil = this.monotonicMs() + ms;
  }

  /** Freeze now until `wake` (SIGSTOP): the length is decided by what happens meanwhile. */
  freeze(): void {
    this.frozen = [];
  }

  /**
   * Paused now: until `pausedUntil` on its own clock, and after it until what fell due during the pause has run
   * (nothing of it may run before its overdue timers, whatever else falls due at the pause's end).
   */
  get isPaused(): boolean {
    return this.held.length > 0 || this.pauseLeftMs > ROUNDING_MS;
  }

  /** What is left of the pause, on its own clock (none left: zero or less). */
  private get pauseLeftMs(): number {
    return this.pausedUntil - this.monotonicMs();
  }

  /** Frozen, until `wake`. */
  get isFrozen(): boolean {
    return this.frozen !== undefined;
  }

  /** End a freeze (SIGCONT): whatever fell due meanwhile runs now. */
  wake(): void {
    const due = this.frozen;
    if (due === undefined) return;
    this.frozen = undefined;
    for (const fn of due) this.run(fn);
  }

  crash(): void {
    this.crashed = true;
  }

  /** Resolves when the process can go on: at once, at the wake-up if paused or frozen, never if crashed. */
  gate(): Promise<void> {
    return new Promise((resolve) => this.run(resolve));
  }

  /**
   * Run `fn` now, at the wake-up, or never once crashed. What falls due during a pause is held, in the order it fell
   * due, and run together at the pause's end, as a process's overdue timers run in their order when it wakes.
   */
  private run(fn: () => void): void {
    if (this.crashed) return;
    if (this.frozen !== undefined) {
      this.frozen.push(fn);
      return;
    }
    if (!this.isPaused) return fn();
    this.held.push(fn);
    if (this.held.length === 1) this.releaseAtPauseEnd();
  }

  private releaseAtPauseEnd(): void {
    this.trueClock.after(this.trueMsOf(this.pauseLeftMs), () => this.release());
  }

  /** The pause is over (or was made longer, and what is held waits on): run what it held, in order. */
  private release(): void {
    if (this.pauseLeftMs > ROUNDING_MS) return this.releaseAtPauseEnd(); // made longer
    const due = this.held;
    this.held = [];
    for (const fn of due) this.run(fn);
  }
}

/** How one store call reaches the store: `apply` makes the call; the answer is what the caller gets. */
export type Dispatch = (method: string, args: unknown[], apply: () => Promise<unknown>) => Promise<unknown>;

type Method = (...args: unknown[]) => Promise<unknown>;

/** The store with every method call sent through `dispatch` (the world's policy: a gate and a delay, or a scheduler). */
export function through<S extends object>(store: S, dispatch: Dispatch): S {
  // Each method is wrapped once (and again only if the store's method itself changes), not at every call.
  const wrapped = new Map<string, { readonly method: Method; readonly wrapper: Method }>();
  return new Proxy(store, {
    get: (target, prop, receiver) => {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      let known = wrapped.get(prop);
      if (known?.method !== value) {
        known = { method: value as Method, wrapper: dispatching(dispatch, prop, target, value as Method) };
        wrapped.set(prop, known);
      }
      return known.wrapper;
    },
  });
}

/** `method` of `target`, each call sent through `dispatch`. */
function dispatching(dispatch: Dispatch, name: string, target: object, method: Method): Method {
  return (...args) => dispatch(name, args, () => method.apply(target, args));
}

/**
 * The two clocks every machine has, and the timers that run on them.
 *
 *   monotonic  only moves forward, at the machine's own rate; every duration is timed on it (lease waits,
 *              renewal timers, stop times). Its zero is arbitrary, so a monotonic reading never leaves the
 *              process that took it: a stop time never crosses a process or machine boundary.
 *   wall       the time of day; it can be stepped back or forward at any moment. Used only for informational
 *              fields (renewed_at, claimed_since) that no code compares (design invariant 5).
 *
 * Every wait and timer of the core (sleeps, polls, the heartbeat, the leadership watchdog) goes through a Clock, so a
 * test can run them on virtual time (VirtualClock): nothing in lib/core/ calls a global timer or clock outside this file.
 */
import { setTimeout as delay } from 'node:timers/promises';

/** A timer set with `Clock.after`. */
export interface ClockTimer {
  /** Do not call it (a no-op once it has been called). */
  cancel(): void;
}

/** The clocks a component is given (never read directly): monotonic for durations, wall for informational fields only. */
export interface Clock {
  /** Milliseconds on this process's monotonic clock. */
  monotonicMs(): number;
  /** Milliseconds since the epoch on the wall clock. Informational only: never time a duration with it. */
  wallMs(): number;
  /** Wait `ms` milliseconds, timed on the monotonic clock. */
  sleep(ms: number): Promise<void>;
  /** Call `fn` once, `ms` milliseconds from now on the monotonic clock, unless cancelled first. */
  after(ms: number, fn: () => void): { cancel(): void };
}

/** The real clocks: performance.now() is CLOCK_MONOTONIC; Node's timers also run on the monotonic clock. */
export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(), // wall: informational fields only
  sleep: (ms) => delay(Math.max(0, ms)).then(() => undefined),
  after: (ms, fn) => {
    const timer = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(timer) };
  },
};

/**
 * Wait `ms` on `clock`, or less: resolves as soon as `signal` aborts (never rejects). Without a signal, `clock.sleep`.
 */
export function sleepUnlessAborted(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal === undefined) return clock.sleep(ms);
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      timer.cancel();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.after(Math.max(0, ms), done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A wall-clock ISO string for informational attributes. */
export function wallIso(clock: Clock): string {
  return new Date(clock.wallMs()).toISOString();
}

interface Due {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/**
 * Virtual time for tests: the clocks stand still until the test moves them (`advance`, `runUntilIdle`), which fires
 * the timers that fall due on the way one at a time, in order of due time (ties in the order they were set), and lets
 * the code each one wakes run until it waits again before firing the next. The same steps give the same order, on
 * any machine, with no real sleep.
 *
 * Store calls take real time but no virtual time: pass each through `track` (wrap the client's `send`), and the
 * clock waits for it to be answered before it moves on. The wall clock moves with the monotonic one.
 */
export class VirtualClock implements Clock {
  private now: number;
  private readonly wallAtZero: number;
  private seq = 0;
  private readonly due: Due[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  /** Some work was tracked: real I/O is in play, so settling lets the event loop turn. */
  private tracked = false;

  constructor(start: { readonly monotonicMs?: number; readonly wallMs?: number } = {}) {
    this.now = start.monotonicMs ?? 0;
    this.wallAtZero = (start.wallMs ?? Date.UTC(2026, 8, 28)) - this.now;
  }

  /** The virtual monotonic time: it moves only in `advance` and `runUntilIdle`. */
  monotonicMs(): number {
    return this.now;
  }

  /** The virtual wall time: the start's wall time plus the virtual time gone by. */
  wallMs(): number {
    return this.wallAtZero + this.now;
  }

  /** Resolves when the virtual time reaches now + `ms`. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.after(ms, resolve));
  }

  /** Calls `fn` when the virtual time reaches now + `ms`, unless cancelled first. */
  after(ms: number, fn: () => void): ClockTimer {
    // A wait of more than nothing moves time, as a real timer's does, even one too short to move a fractional `now`
    // (10,000 ms summed from polls can fall an ulp short): else code that waits out the rest would loop in no time.
    let at = this.now + Math.max(0, ms);
    if (ms > 0 && at === this.now) at = this.now + Math.max(Math.abs(this.now) * Number.EPSILON, Number.MIN_VALUE);
    const entry: Due = { at, seq: this.seq++, fn };
    this.due.push(entry);
    const due = this.due;
    return {
      cancel() {
        const i = due.indexOf(entry);
        if (i >= 0) due.splice(i, 1);
      },
    };
  }

  /** Work the clock must wait for before it moves (a store call): it takes no virtual time. */
  track<T>(work: Promise<T>): Promise<T> {
    this.tracked = true;
    this.pending.add(work);
    const done = () => void this.pending.delete(work);
    work.then(done, done);
    return work;
  }

  /** How many timers are set and not yet fired or cancelled. */
  get timers(): number {
    return this.due.length;
  }

  /** When the earliest timer falls due (undefined: none set): where a scheduler that steps the clock moves it next. */
  get nextDueMs(): number | undefined {
    let next: number | undefined;
    for (const d of this.due) if (next === undefined || d.at < next) next = d.at;
    return next;
  }

  /** Move time forward `ms`, firing every timer due by then (see the class). */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`advance: ms must be >= 0, got ${ms}`);
    const until = this.now + ms;
    while (await this.fireNext(until));
    this.now = until;
    await this.settled();
  }

  /**
   * Fire timers in order, moving time to each, until none is left (a heartbeat that stopped, a watchdog that fired).
   * @throws Error if timers keep coming after `maxTimers` of them: something still runs (a heartbeat never stopped)
   */
  async runUntilIdle(maxTimers = 10_000): Promise<void> {
    for (let fired = 0; await this.fireNext(Infinity); fired++)
      if (fired >= maxTimers) throw new Error(`runUntilIdle: still not idle after ${maxTimers} timers (at ${this.now} ms)`);
  }

  /** Let the woken code run until it waits again, then fire the earliest timer due by `until`, if any. */
  private async fireNext(until: number): Promise<boolean> {
    await this.settled();
    let next: Due | undefined;
    for (const d of this.due) if (d.at <= until && (next === undefined || d.at < next.at || (d.at === next.at && d.seq < next.seq))) next = d;
    if (next === undefined) return false;
    this.due.splice(this.due.indexOf(next), 1);
    this.now = Math.max(this.now, next.at);
    next.fn();
    return true;
  }

  /**
   * Resolves once nothing is runnable without moving time: every promise continuation has run, and every tracked
   * call has been answered. A clock that never tracked real work waits only for the continuations to run out (a tick
   * runs after them all), many times cheaper than a turn of the event loop; one that did lets the loop turn, so real
   * I/O lands.
   */
  async settled(): Promise<void> {
    do {
      if (this.pending.size > 0) await Promise.allSettled([...this.pending]);
      await (this.tracked ? turn() : continuationsRun());
    } while (this.pending.size > 0);
  }
}

/** Resolves after one turn of the event loop (timers and I/O callbacks due run first). */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Resolves once every promise continuation queued so far, and every one they queue, has run: a tick queued from a
 * continuation runs only once the microtask queue is empty (called from a timer or at top level, Node would run the
 * tick first).
 */
const continuationsRun = async (): Promise<void> => {
  await Promise.resolve(); // from here on a continuation: a tick queued now waits for the microtask queue to empty
  await new Promise<void>((resolve) => process.nextTick(resolve));
};

/**
 * Workers and the network between them.
 *
 * A worker is a process with its own clocks (clocks.ts). It can be paused (a GC pause, a VM migration, SIGSTOP)
 * and crash. While paused it does nothing at all: its timers and its renewal thread are frozen with it, and
 * whatever it was about to do runs when it wakes, still believing what it believed. After a crash it
 * never acts again. The network delivers each message after a delay, or loses it; a cut link loses everything.
 */
import { WorkerClock } from './clocks';
import type { Sim } from './engine';

interface Pause {
  readonly from: number;
  to: number;
}

export class Worker {
  private readonly pauses: Pause[] = [];
  private crashedAt: number | undefined;
  /** What was due while frozen by a pause of unknown length (SIGSTOP): run at wake(). */
  private frozen: (() => void)[] = [];

  constructor(
    readonly sim: Sim,
    readonly name: string,
    readonly clock: WorkerClock = new WorkerClock(),
  ) {}

  /** Freeze at true time `from` for `forMs`: nothing this worker does runs until it wakes. */
  pause(from: number, forMs: number, why = 'a stop-the-world pause'): void {
    this.pauses.push({ from, to: from + forMs });
    this.sim.mark({ lane: this.name, kind: 'pause', from, to: from + forMs, label: `paused ${forMs / 1000} s` });
    this.sim.at(from, () => this.sim.log(this.name, `freezes for ${forMs / 1000} s`, { note: why }));
    this.sim.at(from + forMs, () => this.sim.log(this.name, 'wakes up, still believing what it believed'));
  }

  /** Freeze now until wake() (SIGSTOP … SIGCONT): the length is decided by what happens meanwhile. */
  freeze(why: string): void {
    this.pauses.push({ from: this.sim.now, to: Number.POSITIVE_INFINITY });
    this.sim.log(this.name, 'freezes', { note: why });
  }

  /** End an open freeze now; whatever fell due meanwhile runs, still believing what it believed. */
  wake(): void {
    const p = this.pauses.find((x) => x.to === Number.POSITIVE_INFINITY);
    if (!p) return;
    p.to = this.sim.now;
    this.sim.mark({ lane: this.name, kind: 'pause', from: p.from, to: p.to, label: 'frozen' });
    this.sim.log(this.name, 'wakes up, still believing what it believed');
    const due = this.frozen;
    this.frozen = [];
    for (const fn of due) this.act(this.sim.now, fn);
  }

  /** Crash at true time `at`: it never acts again (and, crashed, it releases nothing). */
  crash(at: number): void {
    this.crashedAt = at;
    this.sim.mark({ lane: this.name, kind: 'crash', from: at, label: `${this.name} dies` });
    this.sim.at(at, () => this.sim.log(this.name, 'dies (crash)'));
  }

  isCrashed(t = this.sim.now): boolean {
    return this.crashedAt !== undefined && t >= this.crashedAt;
  }

  /** When a pause covering t ends, or undefined if none covers it. */
  private wakeAt(t: number): number | undefined {
    return this.pauses.find((p) => p.from <= t && t < p.to)?.to;
  }

  /** Run fn at true time t as this worker: deferred to the end of a pause that covers it, dropped after a crash. */
  act(t: number, fn: () => void): void {
    this.sim.at(t, () => {
      if (this.isCrashed()) return;
      const wake = this.wakeAt(this.sim.now);
      if (wake === Number.POSITIVE_INFINITY) this.frozen.push(fn);
      else if (wake !== undefined) this.act(wake, fn);
      else fn();
    });
  }

  /** Run fn once `ms` have passed on this worker's monotonic clock (a timer: a pause delays it). */
  afterMonotonic(ms: number, fn: () => void): void {
    this.act(this.clock.trueAtMonotonic(this.monotonicNow() + ms), fn);
  }

  monotonicNow(): number {
    return this.clock.monotonic(this.sim.now);
  }

  wallNow(): number {
    return this.clock.wall(this.sim.now);
  }
}

export interface NetworkSpec {
  /** One-way delay, ms. @default 0 */
  readonly delayMs?: number;
  /** Extra delay drawn uniformly from [0, jitterMs). @default 0 */
  readonly jitterMs?: number;
  /** Probability that a message is lost. @default 0 */
  readonly loss?: number;
}

/** Per-message delay and loss, from the engine's seeded randomness; cut links lose everything. */
export class Network {
  private readonly cuts = new Set<string>();

  constructor(
    private readonly sim: Sim,
    private readonly spec: NetworkSpec = {},
  ) {}

  /** Lose every message between a and b (both ways) from now on. */
  cut(a: string, b: string): void {
    this.cuts.add(`${a}|${b}`).add(`${b}|${a}`);
  }

  /** Deliver fn at the receiver after the delay; false if the message is lost (fn never runs). */
  send(from: string, to: string, fn: () => void): boolean {
    if (this.cuts.has(`${from}|${to}`)) return false;
    if ((this.spec.loss ?? 0) > 0 && this.sim.rng.next() < this.spec.loss!) return false;
    const jitter = (this.spec.jitterMs ?? 0) > 0 ? this.sim.rng.between(0, this.spec.jitterMs!) : 0;
    this.sim.after((this.spec.delayMs ?? 0) + jitter, fn);
    return true;
  }

  /**
   * A request from a worker and its reply: `handle` runs at the server when the request arrives, `onReply` runs at
   * the worker when the answer arrives (as the worker: deferred by its pauses). A dead server's `handle` returns
   * undefined and answers nothing. A lost request or reply, or no answer, becomes
   * `onReply(undefined)` after `timeoutMs` on the worker's clock.
   */
  call<R>(worker: Worker, server: string, handle: () => R, onReply: (r: R | undefined) => void, timeoutMs = 1000): void {
    let settled = false;
    const settle = (r: R | undefined) => {
      if (settled) return;
      settled = true;
      onReply(r);
    };
    this.send(worker.name, server, () => {
      const r = handle();
      if (r === undefined) return; // a dead server answers nothing
      this.send(server, worker.name, () => worker.act(this.sim.now, () => settle(r)));
    });
    worker.afterMonotonic(timeoutMs, () => settle(undefined));
  }
}

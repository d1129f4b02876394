/**
 * The simulator on the REAL code (issue 19, item 5): the scenarios of what Fencepost implements run lib/core/job.ts
 * `runJob` (the clock-free claim of lib/core/lease.ts, its heartbeat and stop time, the fences raised first, the fenced
 * batch) and lib/core/sweeper.ts's `Sweeper` on the in-memory stores (lib/testing/*), all on one VirtualClock. Nothing
 * here decides anything the code decides: the world only sets the schedule (who starts when, who freezes after which
 * check, who dies when) and turns the code's own events (lib/core/events.ts) into the event table and the timeline.
 *
 * A worker is a process: its clock and its store calls go through a gate. Frozen (a GC pause, SIGSTOP), nothing it
 * does runs: its timers (the heartbeat) and its store calls wait, and run when it wakes, still believing what they
 * believed. Dead, nothing of it ever runs again. Store calls take `storeDelayMs` each way on the virtual
 * clock, so a write sent just before a pause meets the store after it.
 */
import { VirtualClock } from '../core/clock';
import { Events, type FencepostEvent } from '../core/events';
import type { RunDeps } from '../core/job';
import { MemoryJobStore } from '../testing/job-store';
import { MemoryLedgerStore } from '../testing/ledger-store';
import { MemoryLockStore } from '../testing/lock-store';
import type { JobStore } from '../core/store/jobs';
import type { LedgerStore } from '../core/store/ledger';
import type { LockStore } from '../core/store/lock';
import { Sweeper, SWEEPER_DEFAULTS } from '../core/sweeper';
import type { SimRow, TimelineMark } from './engine';
import { SimProcess, through } from '../testing/process';

/** An event as the world recorded it: the code's own event, at the virtual time it was emitted. */
export interface WorldEvent {
  readonly t: number;
  readonly e: FencepostEvent;
}

/** One process of the world (lib/testing/process.ts): its clock, its gated stores, its events, what befalls it logged. */
export class RealWorker extends SimProcess {
  /** Cut off from the lock store: every call from now on gets no answer (a transient timeout), as in a partition. */
  private cut = false;
  private frozenAt = 0;
  /** The worker's events: the code emits here; the world records them. */
  readonly events: Events;
  /** The job store and the lock store as this worker sees them (through its gate and the network's delay). */
  readonly jobs: JobStore;
  readonly locks: LockStore;
  readonly ledgers: LedgerStore;

  constructor(
    private readonly world: RealWorld,
    name: string,
  ) {
    super(name, world.clock);
    this.events = new Events(name, this).on((e) => world.record(e));
    this.jobs = this.gated(world.jobs, world.storeDelayMs);
    this.locks = this.gated(world.locks, 0, () => this.cut);
    this.ledgers = this.gated(world.ledgers, 0);
  }

  /** What the real code is given on this worker: its gated stores, its clock, its events. */
  get deps(): RunDeps & { readonly locks: LockStore } {
    return { locks: this.locks, jobs: this.jobs, clock: this, events: this.events };
  }

  /** From now on the lock store does not answer this worker (its renewals time out): the worst case of a handover. */
  cutOff(): void {
    this.cut = true;
    this.world.log(this.name, 'cut off from the lock store: its renewals get no answer from now on');
  }

  /** Freeze now for `ms`: the pause lands wherever the code is (right after a passed check, in a scenario). */
  override pause(ms: number, why = ''): void {
    super.pause(ms);
    this.world.log(this.name, `freezes for ${ms / 1000} s`, { note: why });
    const t = this.trueClock.monotonicMs();
    this.world.mark({ lane: this.name, kind: 'pause', from: t, to: t + ms / (1 + this.rate), label: `paused ${ms / 1000} s` });
    this.trueClock.after(ms / (1 + this.rate), () => this.world.log(this.name, 'wakes up, still believing what it believed'));
  }

  /** Freeze now until `wake` (SIGSTOP): the length is decided by what happens meanwhile. */
  override freeze(why = ''): void {
    super.freeze();
    this.frozenAt = this.trueClock.monotonicMs();
    this.world.log(this.name, 'freezes', { note: why });
  }

  /** End a freeze (SIGCONT): whatever fell due meanwhile runs now, still believing what it believed. */
  override wake(): void {
    if (!this.isFrozen) return;
    this.world.mark({ lane: this.name, kind: 'pause', from: this.frozenAt, to: this.trueClock.monotonicMs(), label: 'frozen' });
    this.world.log(this.name, 'wakes up, still believing what it believed');
    super.wake();
  }

  /** Die now: nothing of this process runs again (it releases nothing). */
  override crash(): void {
    super.crash();
    this.world.log(this.name, 'dies (crash)');
    this.world.mark({ lane: this.name, kind: 'crash', from: this.trueClock.monotonicMs(), label: `${this.name} dies` });
  }

  /** Every method of the store through the gate, with the network's delay each way; none answered once `cut`. */
  private gated<S extends object>(store: S, delayMs: number, cut = () => false): S {
    return through(store, async (_method, _args, apply) => {
      await this.gate();
      if (cut()) throw Object.assign(new Error(`${this.name}: no answer from the store`), { name: 'TimeoutError' });
      if (delayMs > 0) await this.trueClock.sleep(delayMs);
      const out = await apply();
      if (delayMs > 0) await this.trueClock.sleep(delayMs);
      await this.gate();
      return out;
    });
  }
}

/**
 * The real Sweeper of the job named `job` as `w` runs it: on `w`'s clock, events and stores, treating a lease of
 * `leaseMs` as the one declared.
 */
export function sweeperOn(w: RealWorker, leaseMs: number, job: string): Sweeper {
  return new Sweeper({ ...w.deps, job }, { ...SWEEPER_DEFAULTS, leaseMs });
}

/** The world: one virtual clock, the in-memory stores, the workers, and what they did. */
export class RealWorld {
  readonly clock = new VirtualClock();
  readonly jobs = new MemoryJobStore({ clock: this.clock, jobs: 'jobs' });
  /** The lock store (the in-memory one unless the scenario gives its own, a TTL'd table for one). */
  readonly locks: LockStore;
  /** The epoch ledgers a writer appends to (the handover's store). */
  readonly ledgers: MemoryLedgerStore;
  /** Every event the code emitted, in order. */
  readonly events: WorldEvent[] = [];
  readonly rows: SimRow[] = [];
  readonly marks: TimelineMark[] = [];

  /**
   * @param storeDelayMs - one way to the job store (the lock store answers at once)
   * @param leaseMs - the lease the workers hold
   * @param describe - the event table's row for an event (undefined: no row)
   * @param locks - the lock store to use, on the world's clock @default the in-memory one
   */
  constructor(
    readonly storeDelayMs: number,
    /** The lease the workers hold (the timeline marks where an unrenewed one ran out). */
    readonly leaseMs: number,
    private readonly describe: (e: FencepostEvent, t: number) => Omit<SimRow, 't' | 'actor'> | undefined,
    locks?: (clock: VirtualClock) => LockStore,
  ) {
    this.locks = locks?.(this.clock) ?? new MemoryLockStore({ clock: this.clock });
    this.ledgers = new MemoryLedgerStore(this.clock);
  }

  worker(name: string): RealWorker {
    return new RealWorker(this, name);
  }

  /** Call fn at virtual time t (the schedule: a start, a death). */
  at(t: number, fn: () => void): void {
    this.clock.after(t - this.clock.monotonicMs(), fn);
  }

  record(e: FencepostEvent): void {
    const t = this.clock.monotonicMs();
    this.events.push({ t, e });
    const row = this.describe(e, t);
    if (row) this.rows.push({ t, actor: e.worker, ...row });
  }

  log(actor: string, event: string, extra: Omit<SimRow, 't' | 'actor' | 'event'> = {}): void {
    this.rows.push({ t: this.clock.monotonicMs(), actor, event, ...extra });
  }

  mark(m: TimelineMark): void {
    this.marks.push(m);
  }
}

/**
 * A lock table the world can swap under the workers: a TTL delete (the item gone, epoch and all) or a point-in-time
 * restore (the items as a backup had them). The workers keep calling `store`; it forwards to the current table.
 */
export class ReplaceableLockStore {
  private current: LockStore;
  /** What the workers are given. */
  readonly store: LockStore;

  constructor(first: LockStore) {
    this.current = first;
    this.store = new Proxy({} as LockStore, {
      get: (_, prop) => {
        const value = Reflect.get(this.current, prop) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(this.current) : value;
      },
    });
  }

  /** From now on every call goes to `next`. */
  replace(next: LockStore): void {
    this.current = next;
  }
}

/**
 * The exploration's scheduler (issue 19 item 4): every store call an actor makes is a step boundary. The call is
 * parked; the scheduler, driven by one seeded PRNG, picks which parked call proceeds next and may inject a fault
 * there. Time is one VirtualClock, moved only when nothing is runnable, to the next timer due.
 *
 * Faults, each recorded in the trace with its crash point (the store method and the actor's step count):
 *   crash     the calling actor never continues: this call and every later one never settle, its timers never fire
 *             (so it stops renewing); the world may restart it as a fresh process (`restart`), after a delay;
 *   pause     the whole actor (its calls and its timers) stands still for a virtual time of any length;
 *   lost      the call is applied, then a transient error is thrown: the real retry code sees a lost response;
 *   throttle  a ThrottlingException before applying;
 *   conflict  a transaction cancelled with TransactionConflict before applying (transactions only).
 */
import type { Clock, ClockTimer, VirtualClock } from '../../core/clock';

/** A fault the scheduler can inject at a step boundary. */
export type FaultKind = 'crash' | 'pause' | 'lost' | 'throttle' | 'conflict';

/** How often and how hard to inject. */
export interface FaultPlan {
  /** The chance of a fault at each step boundary while faults are on. */
  readonly chance: number;
  /** At most this many faults in a schedule; after the last, the schedule runs fault-free. */
  readonly budget: number;
  /** The longest pause, in virtual ms. */
  readonly maxPauseMs: number;
  /** No fault is injected after this virtual time. */
  readonly windowMs: number;
}

/**
 * Called when an actor crashes: restarts it (a fresh process) if the world does that for it, and answers how long
 * after the crash the fresh one starts (the crash's effect lasts until then), or undefined if nothing restarts it.
 */
export type Restart = (actor: Actor) => number | undefined;

/** Store methods that are transactions: where a conflict can be injected. */
const TRANSACTIONS = new Set(['recordBatch']);

/** One actor: a name, its step count, and whether it crashed or is paused. */
export class Actor {
  steps = 0;
  crashed = false;
  pausedUntil = -Infinity;
  /** How the actor's run ended ('running' until it does; a crashed actor stays 'running'). */
  outcome = 'running';

  constructor(readonly name: string) {}
}

interface Parked {
  readonly actor: Actor;
  readonly method: string;
  readonly run: () => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
  /** Already faulted once (a paused call resumes without a second fault). */
  faulted: boolean;
}

const never = new Promise<never>(() => undefined);

const transient = (name: string, message: string, extra: Record<string, unknown> = {}): Error =>
  Object.assign(new Error(message), { name, $metadata: { httpStatusCode: 400 } }, extra);

/** The seeded scheduler over one virtual clock (see the file's opening). */
export class Scheduler {
  readonly trace: string[] = [];
  /** Each fault injected: its kind and crash point `method@step`. */
  readonly faults: { readonly kind: FaultKind; readonly point: string; readonly at: number; readonly until: number }[] = [];
  private readonly parked: Parked[] = [];

  constructor(
    readonly clock: VirtualClock,
    private readonly random: () => number,
    private readonly plan: FaultPlan,
    private readonly restart: Restart = () => undefined,
    /** The store methods that are transactions (a conflict can be injected there). @default the fenced batch's */
    private readonly transactions: ReadonlySet<string> = TRANSACTIONS,
  ) {}

  /** The virtual time the last fault's effect ended (its pause included); -Infinity before any. */
  get faultsEndMs(): number {
    return this.faults.reduce((end, f) => Math.max(end, f.until), -Infinity);
  }

  log(line: string): void {
    this.trace.push(`${this.clock.monotonicMs()} ${line}`);
  }

  /** A store whose every method call is a step boundary of `actor`. `onCall` sees each call as it is applied. */
  wrap<T extends object>(target: T, actor: Actor, onCall?: (method: string, args: unknown[], result: unknown) => void): T {
    return new Proxy(target, {
      get: (t, prop, receiver) => {
        const value = Reflect.get(t, prop, receiver) as unknown;
        if (typeof value !== 'function' || typeof prop !== 'string') return value;
        return (...args: unknown[]) => {
          if (actor.crashed) return never;
          return new Promise((resolve, reject) => {
            const run = async () => {
              const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(t, args);
              onCall?.(prop, args, result);
              return result;
            };
            this.parked.push({ actor, method: prop, run, resolve, reject, faulted: false });
          });
        };
      },
    });
  }

  /** The actor's view of the clock: its timers fire only while it is alive and not paused. */
  clockOf(actor: Actor): Clock {
    const clock = this.clock;
    const after = (ms: number, fn: () => void): ClockTimer => {
      let inner: ClockTimer;
      const fire = () => {
        if (actor.crashed) return;
        if (clock.monotonicMs() < actor.pausedUntil) inner = clock.after(actor.pausedUntil - clock.monotonicMs(), fire);
        else fn();
      };
      inner = clock.after(ms, fire);
      return { cancel: () => inner.cancel() };
    };
    return {
      monotonicMs: () => clock.monotonicMs(),
      wallMs: () => clock.wallMs(),
      after,
      sleep: (ms) => new Promise((resolve) => after(ms, resolve)),
    };
  }

  /**
   * Run until `done()` says so or the virtual time passes `untilMs`: settle, then step one parked call, or move the
   * clock to the next timer when nothing is runnable.
   * @returns false if time ran out first
   */
  async run(done: () => boolean, untilMs: number): Promise<boolean> {
    for (;;) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (done()) return true;
      const now = this.clock.monotonicMs();
      const ready = this.parked.filter((p) => !p.actor.crashed && p.actor.pausedUntil <= now);
      if (ready.length > 0) {
        const call = ready[Math.floor(this.random() * ready.length)];
        this.parked.splice(this.parked.indexOf(call), 1);
        this.step(call);
        continue;
      }
      const next = this.nextDue();
      if (next === undefined || next > untilMs) return false;
      await this.clock.advance(next - now);
    }
  }

  private nextDue(): number | undefined {
    return this.clock.nextDueMs;
  }

  private step(call: Parked): void {
    const { actor, method } = call;
    actor.steps++;
    const fault = call.faulted ? undefined : this.pickFault(method);
    const point = `${method}@${actor.steps}`;
    const now = this.clock.monotonicMs();
    if (fault === undefined) {
      this.log(`${actor.name} ${method}`);
      call.run().then(call.resolve, call.reject);
      return;
    }
    call.faulted = true;
    if (fault === 'crash') {
      actor.crashed = true;
      this.log(`${actor.name} ${method} CRASH at ${point}`);
      const restartMs = this.restart(actor);
      this.faults.push({ kind: fault, point, at: now, until: now + (restartMs ?? 0) });
      return; // never settles
    }
    if (fault === 'pause') {
      const ms = Math.floor(this.random() * this.plan.maxPauseMs);
      actor.pausedUntil = now + ms;
      this.faults.push({ kind: fault, point, at: now, until: now + ms });
      this.log(`${actor.name} ${method} PAUSE ${ms} ms at ${point}`);
      this.clock.after(ms, () => undefined); // time must reach the end of the pause even if nothing else is due
      this.parked.push(call);
      return;
    }
    this.faults.push({ kind: fault, point, at: now, until: now });
    this.log(`${actor.name} ${method} ${fault.toUpperCase()} at ${point}`);
    if (fault === 'lost') {
      call.run().then(() => call.reject(transient('TimeoutError', `explore: the response to ${method} was lost`)), call.reject);
    } else if (fault === 'throttle') {
      call.reject(transient('ThrottlingException', `explore: ${method} throttled`));
    } else {
      call.reject(
        transient('TransactionCanceledException', 'explore: transaction conflict', { CancellationReasons: [{ Code: 'TransactionConflict' }] }),
      );
    }
  }

  private pickFault(method: string): FaultKind | undefined {
    const plan = this.plan;
    if (this.faults.length >= plan.budget || this.clock.monotonicMs() > plan.windowMs) return undefined;
    if (this.random() >= plan.chance) return undefined;
    const kinds: FaultKind[] = ['pause', 'lost', 'throttle', 'crash'];
    if (this.transactions.has(method)) kinds.push('conflict');
    return kinds[Math.floor(this.random() * kinds.length)];
  }
}

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
 *   late      the call is applied now and its answer reaches the actor up to plan.lateMs later (a slow network on
 *             the way back): the store's time of the write and the actor's time of the answer differ;
 *   slow      the call is on the wire up to plan.lateMs before it is applied, then answered (a slow network on the
 *             way there): the actor runs on meanwhile, and the request lands even if its sender died since;
 *   throttle  a ThrottlingException before applying;
 *   server-error  an InternalServerError (HTTP 500) or ServiceUnavailable (503), the call applied before it or not
 *             (a seeded coin: an error on the server's side does not say which, so the retry must be safe either way);
 *   conflict  a transaction cancelled with TransactionConflict before applying (transactions only);
 *   throttle-cancel  a transaction cancelled with the reason ThrottlingError before applying (transactions only);
 *   wall-step the actor's wall clock steps forward or back by a seeded amount, then the call proceeds (plan.wall);
 *   wall-rate the actor's wall clock runs fast or slow by a seeded factor from here on, then the call proceeds;
 *   twice     the request is delivered twice (a retry after a lost response): applied, applied again, the second
 *             answer returned (only the methods in plan.twice).
 * The wall faults change only the actor's own wall reading. Each actor's monotonic clock may also run at a rate of
 * its own (plan.monoRate, drawn as the actor starts): every duration it times (its waits, its stop time, a pause)
 * is on that clock, and the checks read its own readings for its own rules and the true time between actors.
 *
 * A test that needs a case places its faults (`placed`) instead of hoping a seed draws them: each lands at the call it
 * names, in every schedule, and no fault is drawn at random.
 */
import type { VirtualClock } from '../core/clock';
import { SimProcess, through } from './process';

/** A fault the scheduler can inject at a step boundary. */
export type FaultKind =
  'crash' | 'pause' | 'lost' | 'late' | 'slow' | 'throttle' | 'server-error' | 'conflict' | 'throttle-cancel' | 'wall-step' | 'wall-rate' | 'twice';

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
  /** Late answers: the longest delay between a call's apply and its answer, in virtual ms. @default none */
  readonly lateMs?: number;
  /** Wall-clock faults: a step of up to ±maxStepMs, a rate of 1 ± up to maxRateError. @default none */
  readonly wall?: { readonly maxStepMs: number; readonly maxRateError: number };
  /** Store methods whose request can be delivered twice. @default none */
  readonly twice?: readonly string[];
  /**
   * Monotonic rate errors: each actor's monotonic clock runs at 1 + r, r drawn as it starts within ±monoRate (a
   * world keeps this within what its margin covers: history.ts rateErrorCovered). @default none (every clock true)
   */
  readonly monoRate?: number;
  /**
   * Where a kind of fault weighs `weight` kinds instead of one, to reach a rare case more often: a pause at the write
   * right after a passed stop-time check (the gap that makes a stale holder), StartExecution delivered twice. A pause
   * there lasts at least `minPauseMs` when given (up to maxPauseMs): one that outlasts a lease, so another actor takes
   * over while this one stands still.
   * @default none
   */
  readonly emphasis?: readonly {
    readonly methods: readonly string[];
    readonly kind: FaultKind;
    readonly weight: number;
    readonly minPauseMs?: number;
  }[];
  /**
   * Store methods where the chance of a fault is `share` times `chance`: less at a claimant's polls (many, and alike),
   * more at the call whose answer starts a process's stop time (`first`: only an actor's first call of the method,
   * as a claim or the renewal a process takes a lease up with). The first entry that matches applies. @default none
   */
  readonly chanceAt?: readonly { readonly methods: readonly string[]; readonly share: number; readonly first?: boolean }[];
}

/**
 * A fault placed at a named call: the nth call of `method` by an actor whose name matches `actor`. A pause lasts
 * `ms`; a late answer comes `ms` after the call applied; a wall step moves the wall by `ms` (signed); a wall rate
 * sets the factor `rate`.
 */
export interface PlacedFault {
  /** The actor it lands on: its name (`worker-1`), or a pattern its name matches (every attempt: /^worker-1/). */
  readonly actor: string | RegExp;
  /** The call it lands on, by its step's name: a store method (`claim`, `recordBatch`), `tables.put`, `fakes.send`. */
  readonly method: string;
  /** Which matching call, counted from 1. @default 1 (the first matching call) */
  readonly nth?: number;
  /** The fault. */
  readonly kind: FaultKind;
  /** A pause's length, a late or slow answer's delay, a wall step's signed size, in virtual ms. */
  readonly ms?: number;
  /** A wall rate's factor. */
  readonly rate?: number;
  /** A server error's request applied before the error (true) or not (false). @default the scheduler's coin */
  readonly applied?: boolean;
  /** A server error's status: 500 (InternalServerError) or 503 (ServiceUnavailable). @default the scheduler's coin */
  readonly status?: 500 | 503;
}

/** An actor named by a placed fault: its name, or a pattern its name matches. */
export const named = (actor: string | RegExp, name: string): boolean => (typeof actor === 'string' ? actor === name : actor.test(name));

/** Placed faults, each counting the events it matches and landing on its nth (1 = the first). */
export class PlacedCounts<F extends { readonly nth?: number }> {
  private readonly seen: number[];

  constructor(private readonly faults: readonly F[]) {
    this.seen = faults.map(() => 0);
  }

  /** The fault due at this event, if any: every fault that `matches` it counts it. */
  due(matches: (fault: F) => boolean): F | undefined {
    let due: F | undefined;
    this.faults.forEach((f, i) => {
      if (matches(f) && ++this.seen[i] === (f.nth ?? 1)) due ??= f;
    });
    return due;
  }
}

/** Faults placed by a test: only these are injected (none is drawn), each once. */
export interface Placed {
  readonly faults: readonly PlacedFault[];
  /** Monotonic rate errors of the actors named (the first that matches); every other actor's clock runs true. */
  readonly rates?: readonly { readonly actor: string | RegExp; readonly rate: number }[];
}

/**
 * Called when an actor crashes: restarts it (a fresh process) if the world does that for it, and answers how long
 * after the crash the fresh one starts (the crash's effect lasts until then), or undefined if nothing restarts it.
 */
export type Restart = (actor: Actor) => number | undefined;

/** Why `Scheduler.run` stopped: the world said done, nothing is due before the horizon, or the turn limit. */
export type RunEnd = 'done' | 'horizon' | 'turns';

/** Store methods that are transactions: where a conflict can be injected. */
const TRANSACTIONS = new Set(['recordBatch']);

/**
 * One actor: a simulated process (lib/testing/process.ts: its clock and its clock's rate, its pause, its crash, its wall
 * clock's error) and its step count. Made by `Scheduler.actor`, which sets its rate.
 */
export class Actor extends SimProcess {
  steps = 0;
  /** How many calls of each store method the actor has made. */
  readonly calls = new Map<string, number>();
  /** How the actor's run ended ('running' until it does; a crashed actor stays 'running'). */
  outcome = 'running';
}

/** How a wrapped target's calls are named and watched (`Scheduler.wrap`). */
export interface WrapOptions {
  /** Each call's step is named `prefix + method`: in the trace, the faults, the plan's and the placed faults' methods. @default '' */
  readonly prefix?: string;
  /**
   * Sees each call as it leaves its actor (a step with no fault, or one whose fault lets it go out: not a pause, which
   * sends it later, nor a crash), with the step's name; what it returns sees the call applied, with its answer.
   */
  readonly onSend?: (method: string, args: unknown[]) => ((result: unknown) => void) | void;
}

interface Parked {
  readonly actor: Actor;
  readonly method: string;
  /** Called as the call leaves its actor (WrapOptions.onSend). */
  readonly send?: () => void;
  readonly run: () => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
  /** Already faulted once (a paused call resumes without a second fault). */
  faulted: boolean;
  /** On the wire (a slow call): applied when picked, whatever its sender's state, and answered through its timers. */
  sent?: boolean;
}

const never = new Promise<never>(() => undefined);

const transient = (name: string, message: string, extra: Record<string, unknown> = {}): Error =>
  Object.assign(new Error(message), { name, $metadata: { httpStatusCode: 400 } }, extra);

/** A transaction cancelled before it applied, with one cancellation reason. */
const cancelled = (reason: string, what: string): Error =>
  transient('TransactionCanceledException', `explore: transaction ${what}`, { CancellationReasons: [{ Code: reason }] });

/** The seeded scheduler over one virtual clock (see the file's opening). */
export class Scheduler {
  readonly trace: string[] = [];
  /** Each fault injected: its kind and crash point `method@step`. */
  readonly faults: { readonly kind: FaultKind; readonly point: string; readonly at: number; readonly until: number }[] = [];
  private readonly parked: Parked[] = [];
  /** Slow requests sent and not yet applied. */
  private onTheWire = 0;
  /** The placed faults and their counts of matching calls (undefined: faults are drawn, none placed). */
  private readonly placedCounts: PlacedCounts<PlacedFault> | undefined;
  /** The placed monotonic rates (undefined: drawn, or none when faults are placed). */
  private readonly placedRates: Placed['rates'];

  constructor(
    readonly clock: VirtualClock,
    private readonly random: () => number,
    private readonly plan: FaultPlan,
    private readonly restart: Restart = () => undefined,
    /** The store methods that are transactions (a conflict can be injected there). @default the fenced batch's */
    private readonly transactions: ReadonlySet<string> = TRANSACTIONS,
    /** Faults placed by a test instead of drawn. */
    placed?: Placed,
  ) {
    this.placedCounts = placed && new PlacedCounts(placed.faults);
    this.placedRates = placed?.rates;
  }

  /**
   * A new actor (a fresh process) on this clock. Its monotonic rate error: the placed one for its name, none when
   * faults are placed, else one drawn by `draw` (a stream of its own, so no other draw moves) within ±plan.monoRate.
   */
  actor(name: string, draw: () => number): Actor {
    const actor = new Actor(name, this.clock);
    const max = this.plan.monoRate ?? 0;
    const placedRate = this.placedRates?.find((r) => named(r.actor, name))?.rate;
    // Rounded to 4 decimals for the trace, and kept within ±max: the checks allow for max, no more.
    const drawn = () => Math.max(-max, Math.min(max, Math.round((2 * draw() - 1) * max * 10_000) / 10_000));
    actor.rate = placedRate ?? (this.placedCounts || max === 0 ? 0 : drawn());
    if (actor.rate !== 0) this.log(`${name} MONO-RATE x${1 + actor.rate}`);
    return actor;
  }

  /** The virtual time the last fault's effect ended (its pause included); -Infinity before any. */
  get faultsEndMs(): number {
    return this.faults.reduce((end, f) => Math.max(end, f.until), -Infinity);
  }

  log(line: string): void {
    this.trace.push(`${this.clock.monotonicMs()} ${line}`);
  }

  /**
   * A store whose every method call is a step boundary of `actor`: parked for `run` to pick. `onCall` sees each call
   * as it is applied; `options` name the steps and see each call leave.
   */
  wrap<T extends object>(target: T, actor: Actor, onCall?: (method: string, args: unknown[], result: unknown) => void, options: WrapOptions = {}): T {
    return through(target, (name, args, apply) => {
      if (actor.crashed) return never;
      const method = (options.prefix ?? '') + name;
      let applied: ((result: unknown) => void) | void;
      return new Promise((resolve, reject) => {
        this.parked.push({
          actor,
          method,
          ...(options.onSend ? { send: () => void (applied = options.onSend?.(method, args)) } : {}),
          async run() {
            const result = await apply();
            onCall?.(method, args, result);
            applied?.(result);
            return result;
          },
          resolve,
          reject,
          faulted: false,
        });
      });
    });
  }

  /**
   * Run until `done()` says so or the virtual time passes `untilMs`: settle, then step one parked call, or move the
   * clock to the next timer when nothing is runnable.
   * @param maxTurns - stop after this many turns: a loop that takes no virtual time would otherwise never end
   * @returns why it stopped: done, the horizon passed (nothing due before it), or the turns ran out
   */
  async run(done: () => boolean, untilMs: number, maxTurns: number): Promise<RunEnd> {
    for (let turns = 0; ; turns++) {
      // Every continuation has run, and every real store call (a world on DynamoDB Local) has been answered.
      await this.clock.settled();
      // Not done while a request is still on the wire: it lands whatever its sender did since, and the checks see it.
      if (done() && this.onTheWire === 0) return 'done';
      if (turns >= maxTurns) {
        this.log(`stopped after ${maxTurns} turns: the actors loop without time passing`);
        return 'turns';
      }
      const now = this.clock.monotonicMs();
      const ready = this.parked.filter((p) => p.sent || (!p.actor.crashed && !p.actor.isPaused));
      if (ready.length > 0) {
        const call = ready[Math.floor(this.random() * ready.length)];
        this.parked.splice(this.parked.indexOf(call), 1);
        this.step(call);
        continue;
      }
      const next = this.nextDue();
      if (next === undefined || next > untilMs) return 'horizon';
      await this.clock.advance(next - now);
    }
  }

  private nextDue(): number | undefined {
    return this.clock.nextDueMs;
  }

  private step(call: Parked): void {
    const { actor, method } = call;
    if (call.sent) {
      this.onTheWire--;
      this.log(`${actor.name} ${method} applied (sent earlier)`);
      // The answer goes through the actor's timers: a paused actor reads it when it wakes, a crashed one never.
      call.run().then(
        (value) => actor.after(0, () => call.resolve(value)),
        (err: unknown) => actor.after(0, () => call.reject(err)),
      );
      return;
    }
    actor.steps++;
    const nth = (actor.calls.get(method) ?? 0) + 1;
    actor.calls.set(method, nth);
    const placed = call.faulted ? undefined : this.placedCounts?.due((f) => f.method === method && named(f.actor, actor.name));
    const fault = call.faulted ? undefined : this.placedCounts ? placed?.kind : this.pickFault(method, nth);
    const point = `${method}@${actor.steps}`;
    const now = this.clock.monotonicMs();
    // The call leaves its actor now, unless the actor stops here (it sends the call when it wakes, or never).
    if (fault !== 'pause' && fault !== 'crash') call.send?.();
    if (fault === undefined) {
      this.log(`${actor.name} ${method}`);
      call.run().then(call.resolve, call.reject);
      return;
    }
    call.faulted = true;
    if (fault === 'crash') {
      actor.crash();
      this.log(`${actor.name} ${method} CRASH at ${point}`);
      const restartMs = this.restart(actor);
      this.faults.push({ kind: fault, point, at: now, until: now + (restartMs ?? 0) });
      return; // never settles
    }
    if (fault === 'pause') {
      const min = this.plan.emphasis?.find((e) => e.kind === 'pause' && e.methods.includes(method))?.minPauseMs ?? 0;
      const ms = placed?.ms ?? min + Math.floor(this.random() * Math.max(0, this.plan.maxPauseMs - min));
      actor.pause(ms);
      this.faults.push({ kind: fault, point, at: now, until: now + actor.trueMsOf(ms) });
      this.log(`${actor.name} ${method} PAUSE ${ms} ms at ${point}`);
      // Time must reach the end of the pause even if nothing else is due: `ms` on the actor's clock.
      this.clock.after(actor.trueMsOf(ms), () => undefined);
      this.parked.push(call);
      return;
    }
    if (fault === 'wall-step' || fault === 'wall-rate') {
      this.shiftWall(actor, fault, point, placed);
      call.run().then(call.resolve, call.reject);
      return;
    }
    if (fault === 'late') {
      const ms = this.delayMs(placed);
      this.faults.push({ kind: fault, point, at: now, until: now + actor.trueMsOf(ms) });
      this.log(`${actor.name} ${method} LATE ${ms} ms at ${point}`);
      // On the actor's own timer: a process paused meanwhile reads the answer when it wakes, a crashed one never.
      const answer = (settle: () => void) => actor.after(ms, settle);
      call.run().then(
        (value) => answer(() => call.resolve(value)),
        (err: unknown) => answer(() => call.reject(err)),
      );
      return;
    }
    if (fault === 'slow') {
      const ms = this.delayMs(placed);
      this.faults.push({ kind: fault, point, at: now, until: now + ms });
      this.log(`${actor.name} ${method} SLOW ${ms} ms at ${point}`);
      this.onTheWire++;
      this.clock.after(ms, () => this.parked.push({ ...call, sent: true }));
      return;
    }
    this.faults.push({ kind: fault, point, at: now, until: now });
    if (fault === 'server-error') {
      const applied = placed?.applied ?? this.random() < 0.5;
      const status = placed?.status ?? (this.random() < 0.5 ? 500 : 503);
      this.log(`${actor.name} ${method} SERVER-ERROR ${status} (${applied ? 'applied' : 'not applied'}) at ${point}`);
      const [name, text] = status === 500 ? ['InternalServerError', 'internal server error'] : ['ServiceUnavailable', 'service unavailable'];
      const err = transient(name, `explore: ${method}: ${text}`, { $metadata: { httpStatusCode: status } });
      if (applied) call.run().then(() => call.reject(err), call.reject);
      else call.reject(err);
      return;
    }
    this.log(`${actor.name} ${method} ${fault.toUpperCase()} at ${point}`);
    if (fault === 'twice') {
      call
        .run()
        .then(() => call.run())
        .then(call.resolve, call.reject);
    } else if (fault === 'lost') {
      call.run().then(() => call.reject(transient('TimeoutError', `explore: the response to ${method} was lost`)), call.reject);
    } else if (fault === 'throttle') {
      call.reject(transient('ThrottlingException', `explore: ${method} throttled`));
    } else if (fault === 'throttle-cancel') {
      call.reject(cancelled('ThrottlingError', 'throttled'));
    } else {
      call.reject(cancelled('TransactionConflict', 'conflict'));
    }
  }

  /** A delay's length, for a late answer or a slow request: the placed one, or drawn up to plan.lateMs. */
  private delayMs(placed: PlacedFault | undefined): number {
    return placed?.ms ?? Math.floor(this.random() * (this.plan.lateMs ?? 0));
  }

  /**
   * A wall-clock fault: a step of up to ±maxStepMs, or a rate of 1 ± up to maxRateError from now on. Its effect on
   * the real code must be none (it times nothing on the wall clock), so it ends where it is injected.
   */
  private shiftWall(actor: Actor, kind: 'wall-step' | 'wall-rate', point: string, placed?: PlacedFault): void {
    const wall = this.plan.wall ?? { maxStepMs: 0, maxRateError: 0 };
    const now = this.clock.monotonicMs();
    const signed = placed ? 0 : 2 * this.random() - 1;
    if (kind === 'wall-step') {
      const byMs = placed?.ms ?? Math.round(signed * wall.maxStepMs);
      actor.stepWall(byMs);
      this.log(`${actor.name} WALL-STEP ${byMs >= 0 ? '+' : ''}${byMs} ms at ${point}`);
    } else {
      const rate = placed?.rate ?? Math.round((1 + signed * wall.maxRateError) * 1000) / 1000;
      actor.setWallRate(rate);
      this.log(`${actor.name} WALL-RATE x${rate} at ${point}`);
    }
    this.faults.push({ kind, point, at: now, until: now });
  }

  /** @param nth - which call of `method` this is, for the actor making it (1: its first) */
  private pickFault(method: string, nth: number): FaultKind | undefined {
    const plan = this.plan;
    if (this.faults.length >= plan.budget || this.clock.monotonicMs() > plan.windowMs) return undefined;
    const at = plan.chanceAt?.find((c) => c.methods.includes(method) && (!c.first || nth === 1));
    const chance = plan.chance * (at?.share ?? 1);
    if (this.random() >= chance) return undefined;
    const kinds: FaultKind[] = ['pause', 'lost', 'throttle', 'crash'];
    if (plan.lateMs) kinds.push('late');
    if (this.transactions.has(method)) kinds.push('conflict');
    if (plan.wall) kinds.push('wall-step', 'wall-rate');
    if (plan.twice?.includes(method)) kinds.push('twice');
    for (const e of plan.emphasis ?? [])
      if (e.methods.includes(method) && kinds.includes(e.kind)) for (let i = 1; i < e.weight; i++) kinds.push(e.kind);
    const kind = kinds[Math.floor(this.random() * kinds.length)];
    // A delay is one kind: on the way back (late) or on the way there (slow).
    if (kind === 'late') return this.random() < 0.5 ? 'late' : 'slow';
    if (kind !== 'throttle') return kind;
    // The store's error answers are one kind among the others, so adding one leaves every other kind's share alone:
    // a 500 or a throttle, and at a transaction also a cancellation for throttling.
    const answers: FaultKind[] = this.transactions.has(method) ? ['server-error', 'throttle-cancel', 'throttle'] : ['server-error', 'throttle'];
    return answers[Math.floor(this.random() * answers.length)];
  }
}

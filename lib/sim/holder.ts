/**
 * A lease holder's own bookkeeping:
 *
 *   RENEW LOOP, every renewMs on the holder's monotonic clock:
 *     1. sent_at = monotonic now, read BEFORE sending;
 *     2. send the renewal (the authority decides how: a keep-alive to the leader, a conditional UpdateItem, …);
 *     3. on success: stop_at = sent_at + lease - margin;
 *     4. on no answer: retry (a new leader if needed) until stop_at; on a refusal: the lease is lost.
 *   BEFORE EVERY ACTION: if monotonic now >= stop_at, stop, don't act.
 * The check guarantees nothing about safety: a pause can land right after it; the fence does that.
 * The holder's tenure, in true time, runs from its claim until its stop time, its release or its loss: that is the
 * bar on the timeline, and two tenures that intersect are an overlap of two holders with the right to act.
 */
import type { Sim } from './engine';
import type { Worker } from './worker';

export interface LeaseTiming {
  readonly leaseMs: number;
  readonly renewMs: number;
  readonly marginMs: number;
}

/** One renewal: `done(true)` renewed, `done(false)` refused (lost), `done(undefined)` no answer. */
export type RenewOp = (done: (ok: boolean | undefined) => void) => void;

/** The least time between two tries of a renewal that got no answer. */
const RETRY_MS = 100;

export class Holder {
  /** True time of the claim (the bar starts here). */
  readonly since: number;
  /** Stop time on the holder's monotonic clock. */
  stopAtMono: number;
  /** When and why the tenure ended early (released, lost, fenced out); undefined while it runs to its stop time. */
  ended?: { at: number; why: string };
  /** Send times (true) of renewals that got no answer. */
  readonly failedRenewals: number[] = [];
  /** Send times (true) of the renewals that succeeded: the last is what the authority last applied. */
  readonly renewals: number[] = [];
  /** Every stop time the holder set, in true time, with the send time it was computed from (the claim's first). */
  readonly stops: { readonly sentAt: number; readonly stopAt: number }[] = [];
  /** Log renewals (a busy table can turn them off). */
  logRenewals = true;
  private sim: Sim;
  private failing = false;

  constructor(
    readonly worker: Worker,
    readonly token: number,
    readonly timing: LeaseTiming,
    sentAtMono: number,
    private readonly renewOp?: RenewOp,
  ) {
    this.sim = worker.sim;
    this.since = worker.sim.now;
    this.stopAtMono = sentAtMono + timing.leaseMs - timing.marginMs;
    this.stops.push({ sentAt: worker.clock.trueAtMonotonic(sentAtMono), stopAt: this.stopAtTrue() });
    worker.sim.mark({ lane: worker.name, kind: 'stop', from: this.stopAtTrue(), label: `stop ${(this.stopAtTrue() / 1000).toFixed(1)}` });
    if (renewOp) worker.afterMonotonic(timing.renewMs, () => this.renew());
  }

  /** The stop time in true time (what the monotonic clock reads stop_at). */
  stopAtTrue(): number {
    return this.worker.clock.trueAtMonotonic(this.stopAtMono);
  }

  /** The stop time in force at true time t: the last one set at or before t. */
  stopAtTrueAt(t: number): number | undefined {
    return this.stops.filter((x) => x.sentAt <= t).at(-1)?.stopAt;
  }

  /** BEFORE EVERY ACTION: monotonic now < stop_at, and the tenure was not ended. */
  mayAct(): boolean {
    return this.ended === undefined && this.worker.monotonicNow() < this.stopAtMono;
  }

  private renew(): void {
    if (this.ended !== undefined) return;
    if (!this.mayAct()) {
      this.end('stop time passed: gives up the lease locally');
      return;
    }
    const sentAtMono = this.worker.monotonicNow(); // 1. read BEFORE sending
    const sentAt = this.sim.now;
    this.renewOp!((ok) => {
      if (this.ended !== undefined) return;
      if (ok === true) {
        this.stopAtMono = sentAtMono + this.timing.leaseMs - this.timing.marginMs; // 3.
        this.renewals.push(sentAt);
        this.stops.push({ sentAt, stopAt: this.stopAtTrue() });
        this.failing = false;
        if (this.logRenewals)
          this.sim.log(this.worker.name, 'renews', {
            token: this.token,
            note: `sent ${(sentAt / 1000).toFixed(2)}; stop time ${(this.stopAtTrue() / 1000).toFixed(2)}`,
          });
        this.worker.afterMonotonic(this.timing.renewMs - (this.worker.monotonicNow() - sentAtMono), () => this.renew());
      } else if (ok === false) {
        this.end('renewal refused: the lease is lost');
      } else {
        this.failedRenewals.push(sentAt);
        if (!this.failing)
          this.sim.log(this.worker.name, `renewal sent at ${(sentAt / 1000).toFixed(2)} fails (no answer); retries until its stop time`, {
            token: this.token,
            note: `stop time ${(this.stopAtTrue() / 1000).toFixed(2)}`,
          });
        this.failing = true;
        // 4. retry (at most every RETRY_MS), until stop_at
        this.worker.afterMonotonic(Math.max(0, RETRY_MS - (this.worker.monotonicNow() - sentAtMono)), () => this.renew());
      }
    });
  }

  /** End the tenure now (release, loss, fenced out). */
  end(why: string, note?: string): void {
    if (this.ended !== undefined) return;
    this.ended = { at: this.sim.now, why };
    this.sim.log(this.worker.name, why, { token: this.token, note });
  }

  /** The end of the bar, true time: its stop time, or earlier if it ended (a crash ends nothing: the holder is gone, its right ran on). */
  heldUntil(): number {
    return Math.min(this.ended?.at ?? Number.POSITIVE_INFINITY, this.stopAtTrue());
  }

  /** Put the held bar on the timeline (call once the run is over), and the stop time that ended it if renewals moved it. */
  markHeld(): void {
    this.sim.mark({ lane: this.worker.name, kind: 'held', from: this.since, to: this.heldUntil(), label: `token ${this.token}` });
    const last = this.stopAtTrue();
    const ranToStop = this.ended === undefined || this.ended.at >= last;
    if (this.renewals.length > 0 && ranToStop)
      this.sim.mark({ lane: this.worker.name, kind: 'stop', from: last, label: `stop ${(last / 1000).toFixed(1)}` });
  }
}

/** Time two holders' bars intersect, ms (0 if they don't). */
export function overlapMs(a: Holder, b: Holder): number {
  return Math.max(0, Math.min(a.heldUntil(), b.heldUntil()) - Math.max(a.since, b.since));
}

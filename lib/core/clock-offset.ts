/**
 * Estimating this machine's wall-clock offset from AWS's, without NTP (a Lambda has none to ask).
 *
 * Every AWS response carries a `Date` header: the server's wall time, truncated to the second, taken while our
 * request was in flight. If we read our wall clock at t_sent before sending and t_received after the response,
 * the server's time at that moment lies in [Date, Date + 1 s) and our own somewhere in [t_sent, t_received], so
 *
 *     offset = server − local  ∈  [Date − t_received,  Date + 1 s − t_sent]
 *
 * Intersecting the intervals of several calls narrows it. The estimate is the middle of the intersection and
 * its error bound is half its width: with one call of 20 ms the bound is about ±510 ms; calls that land on
 * different sides of a second boundary shrink it. The offset matters only where one machine's wall clock writes
 * a time another machine reads; Fencepost has no such comparison, so this is an alarm on the
 * hosts' health (a clock far off means NTP is broken), not an input to any lease decision.
 */
export interface OffsetEstimate {
  /** server − local, in ms: positive when our clock is behind AWS's. */
  readonly offsetMs: number;
  /** Half the width of the interval: the true offset is within offsetMs ± errorMs. */
  readonly errorMs: number;
  readonly samples: number;
}

export class ClockOffsetEstimator {
  private low = -Infinity;
  private high = Infinity;
  private samples = 0;
  private inconsistent = false;

  /** One response: our wall clock before sending and after receiving, and the response's Date header. */
  addSample(sentWallMs: number, receivedWallMs: number, dateHeader: string | undefined): void {
    const serverMs = dateHeader ? Date.parse(dateHeader) : NaN;
    if (!Number.isFinite(serverMs) || receivedWallMs < sentWallMs) return;
    this.low = Math.max(this.low, serverMs - receivedWallMs);
    this.high = Math.min(this.high, serverMs + 1000 - sentWallMs);
    this.samples++;
    // An empty intersection means our wall clock was stepped between calls: start again from this call.
    if (this.low > this.high) {
      this.inconsistent = true;
      this.low = serverMs - receivedWallMs;
      this.high = serverMs + 1000 - sentWallMs;
      this.samples = 1;
    }
  }

  estimate(): OffsetEstimate | undefined {
    if (this.samples === 0) return undefined;
    return { offsetMs: (this.low + this.high) / 2, errorMs: (this.high - this.low) / 2, samples: this.samples };
  }

  /** True if the wall clock was seen to step during the estimate (the intervals stopped overlapping). */
  get stepped(): boolean {
    return this.inconsistent;
  }
}

/**
 * The part of the offset that lies outside the estimate's error bound: max(0, |offset| − error). The true offset is
 * within offset ± error, so this is the least the clock can be off. A correct clock is always inside its interval
 * (the server stamped a time in [Date, Date + 1 s) while we were between t_sent and t_received), so it reads 0
 * however wide one sample's ±0.5 s truncation makes the bound; the alarm watches this, not |offset|.
 */
export function offsetBeyondErrorMs(est: OffsetEstimate): number {
  return Math.max(0, Math.abs(est.offsetMs) - est.errorMs);
}

/**
 * The simulator's engine: a discrete-event loop over a virtual TRUE time, with seeded randomness (the
 * story's world: "true time, per-machine clocks, a 3-node lock service, the store").
 *
 * True time is what no machine can read: every model reads its own clock (clocks.ts), and the engine only orders
 * events. Nothing here does I/O, reads the system clock or calls Math.random, so a run is a pure function of its
 * script and seed: the same inputs print the same table. Times are integer milliseconds.
 */
import { prng } from '../core/prng';

/** One row of a scenario's event table: when (true time), who, what, and the token and fence involved. */
export interface SimRow {
  /** True time, ms. */
  readonly t: number;
  /** Who acted: a worker, the lock service, a node, the sweeper, the store. */
  readonly actor: string;
  /** What happened, in the reference's words. */
  readonly event: string;
  /** The token involved, if any. */
  readonly token?: number;
  /** The store's fence after the event, if it matters. */
  readonly fence?: number;
  /** Why, or the numbers behind it. */
  readonly note?: string;
}

/** A bar on the timeline (held lease, pause) or a point (stop time, deadline, fence raise, refused write). */
export interface TimelineMark {
  /** The lane: a worker's name, 'lock service', 'store'. */
  readonly lane: string;
  /** A bar (held, pause) or a point (the rest). */
  readonly kind: 'held' | 'pause' | 'stop' | 'deadline' | 'fence' | 'refused' | 'crash' | 'write';
  /** True time, ms: the bar's start, or the point. */
  readonly from: number;
  /** Present for bars. */
  readonly to?: number;
  /** What the picture writes beside it. */
  readonly label?: string;
}

/** The seeded PRNG (lib/core/prng.ts) with a range: deterministic per seed, good enough for jitter and loss. */
export class Rng {
  private readonly random: () => number;
  constructor(seed: number) {
    this.random = prng(seed);
  }
  /** Uniform in [0, 1). */
  next(): number {
    return this.random();
  }
  /** Uniform in [lo, hi). */
  between(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }
}

interface Pending {
  readonly t: number;
  readonly seq: number;
  readonly fn: () => void;
}

/** The event loop: a binary heap ordered by (true time, insertion order), so ties run in the order they were scheduled. */
export class Sim {
  /** True time now, ms. */
  now = 0;
  readonly rows: SimRow[] = [];
  readonly marks: TimelineMark[] = [];
  readonly rng: Rng;
  private heap: Pending[] = [];
  private seq = 0;

  constructor(seed = 1) {
    this.rng = new Rng(seed);
  }

  /** Run `fn` at true time t (never in the past: an event scheduled for earlier runs now). */
  at(t: number, fn: () => void): void {
    const p: Pending = { t: Math.max(t, this.now), seq: this.seq++, fn };
    const h = this.heap;
    h.push(p);
    for (let i = h.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!before(h[i], h[parent])) break;
      [h[i], h[parent]] = [h[parent], h[i]];
      i = parent;
    }
  }

  after(ms: number, fn: () => void): void {
    this.at(this.now + ms, fn);
  }

  /** Run events in order until none are left or the next one is after `untilMs`. */
  run(untilMs = Number.POSITIVE_INFINITY): void {
    while (this.heap.length > 0 && this.heap[0].t <= untilMs) {
      const p = this.pop();
      this.now = p.t;
      p.fn();
    }
    if (Number.isFinite(untilMs)) this.now = Math.max(this.now, untilMs);
  }

  log(actor: string, event: string, extra: Omit<SimRow, 't' | 'actor' | 'event'> = {}): void {
    this.rows.push({ t: this.now, actor, event, ...extra });
  }

  mark(m: TimelineMark): void {
    this.marks.push(m);
  }

  private pop(): Pending {
    const h = this.heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l], h[m])) m = l;
        if (r < h.length && before(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}

const before = (a: Pending, b: Pending) => a.t < b.t || (a.t === b.t && a.seq < b.seq);

/** Seconds with two decimals, as the reference prints its traces (19.05). */
export const secs = (ms: number): string => (ms / 1000).toFixed(2);

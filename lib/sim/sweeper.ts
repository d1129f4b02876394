/**
 * The orphan sweeper: it reads only claimed rows (the sparse index), asks the
 * authority whether a lease is alive, never compares timestamps from other machines, and re-queues only after a
 * second sighting at least `confirmMs` after the first, with one conditional write on the exact owner and fence it
 * saw. It is liveness only: the fence keeps the data safe even when it is wrong.
 *
 * `look()` is the authority's answer: 'live' (a lock service says a key is alive) or a mark of what was seen (the
 * lock item's rvn, or 'gone'); the same mark twice, confirmMs apart, is an orphan (lib/core/sweeper.ts's rvn rule).
 * Left out: the storm rule and the rate limit (one job here).
 */
import type { Sim } from './engine';
import type { FencedStore } from './store';

export interface SweeperSpec {
  /** Sweep every. @default 10000 */
  readonly everyMs?: number;
  /** A second sighting at least this long after the first. @default 5000 */
  readonly confirmMs?: number;
  /** First sweep at. @default everyMs */
  readonly firstAt?: number;
}

export class SimSweeper {
  private seen: { at: number; mark: string; owner: number; fence: number } | undefined;
  requeuedAt: number | undefined;

  constructor(
    private readonly sim: Sim,
    private readonly store: FencedStore,
    private readonly look: () => string | undefined,
    private readonly onRequeue: () => void,
    private readonly spec: SweeperSpec = {},
    readonly name = 'sweeper',
  ) {
    const every = spec.everyMs ?? 10_000;
    sim.at(spec.firstAt ?? every, () => this.sweep());
  }

  private sweep(): void {
    if (this.requeuedAt === undefined) this.sim.after(this.spec.everyMs ?? 10_000, () => this.sweep());
    const row = this.store.row;
    if (row.claimedSince === undefined || row.ownerToken === undefined || row.fence === undefined) return; // 1. not in the sparse index
    const mark = this.look(); // 2. ask the authority, no clock comparison
    if (mark === undefined) return; // the authority did not answer: try next time
    if (mark === 'live') {
      this.seen = undefined;
      return;
    }
    if (this.seen === undefined || this.seen.mark !== mark || this.seen.owner !== row.ownerToken) {
      this.seen = { at: this.sim.now, mark, owner: row.ownerToken, fence: row.fence };
      this.sim.log(this.name, 'sees a claimed row with no live lease: notes it', { fence: row.fence, note: `owner ${row.ownerToken}, ${mark}` });
      return;
    }
    if (this.sim.now - this.seen.at < (this.spec.confirmMs ?? 5000)) return;
    // 3. the second sighting: re-queue only if the row is still exactly as seen.
    if (this.store.requeue(this.name, this.seen.owner, this.seen.fence)) {
      this.requeuedAt = this.sim.now;
      this.onRequeue();
    }
    this.seen = undefined;
  }
}

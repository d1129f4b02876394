/**
 * The single-writer handover on the REAL code (issue 19,
 * item 5): lib/election/handover.ts `handover` for both writers, on the in-memory lock store and ledger store and virtual time.
 *
 * The worst case: the old writer's last good renewal lands just before the flip, and from the flip on its renewals get
 * no answer (it is cut off), so it keeps its right until its own stop time. The new writer flips the writer lease,
 * waits the old lease plus the wait margin on its own clock, bumps the epoch in the ledger, and may write. Played
 * once with exact clocks, then over seeded clock-rate errors of up to ±0.1 % on each side.
 */
import { handover, HANDOVER_DEFAULTS, type HandoverConfig } from '../../election/handover';
import { EpochFence } from '../../election/epoch-fence';
import type { FencepostEvent } from '../../core/events';
import { Rng, type SimRow } from '../engine';
import { RealWorld, type RealWorker } from '../real';
import { Checks, s, type Scenario } from '../scenario';

const ROLE = 'payments';
/** The old writer's renewal after which the flip lands (its third: 9.0 with a 3 s period). */
const FLIP_AFTER_RENEWAL = 3;
/** Seeded runs with clock-rate errors, and the largest error each way. */
const RUNS = 200;
const MAX_RATE = 0.001;

function describe(e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined {
  switch (e.event) {
    case 'claim':
      return { event: 'flips the writer lease to itself: the next epoch', token: e.token, note: `stop time ${s(e.stopAtMs)} on its own clock` };
    case 'renew':
      return { event: 'renews the writer lease', token: e.token, note: `stop time ${s(e.stopAtMs)}` };
    case 'renew-failed':
      return { event: 'renewal gets no answer: retries until its stop time', token: e.token, note: e.error };
    case 'epoch-bumped':
      return { event: 'bumps the epoch in the ledger it will write, before its first write', token: e.epoch };
    default:
      return undefined;
  }
}

/** One handover with the two writers' clock rates; times from the flip. */
async function playHandover(oldRate: number, newRate: number, config: HandoverConfig = HANDOVER_DEFAULTS) {
  const world = new RealWorld(0, config.leaseMs, describe);
  const [old, neu] = ['old writer', 'new writer'].map((n) => world.worker(n));
  old.rate = oldRate;
  neu.rate = newRate;
  const deps = (w: RealWorker) => ({ ...w.deps, random: () => 0.5 });
  const fence = (w: RealWorker) => new EpochFence({ ledger: w.ledgers, clock: w, random: () => 0.5 }, `ledger/writer/${ROLE}`);
  let flipAt: number | undefined;
  let firstWriteAt: number | undefined;
  let oldStop: number | undefined;
  let renewals = 0;
  old.events.on((e) => {
    if (e.event === 'renew')
      oldStop = e.stopAtMs === undefined ? undefined : world.clock.monotonicMs() + (e.stopAtMs - old.monotonicMs()) / (1 + old.rate);
    if (e.event !== 'renew' || ++renewals !== FLIP_AFTER_RENEWAL) return;
    // Its last good renewal: from now on it hears nothing, and the new writer flips at once.
    old.cutOff();
    flipAt = world.clock.monotonicMs();
    world.log('new writer', `the flip: takes the writer lease, then waits ${s(config.leaseMs + config.waitMarginMs)} s on its own clock`);
    void handover(deps(neu), ROLE, 'new', config, fence(neu)).then(async (writer) => {
      firstWriteAt = world.clock.monotonicMs();
      await writer.release();
    });
  });
  void handover(deps(old), ROLE, 'old', config, fence(old));
  await world.clock.runUntilIdle();
  return { world, flipAt: flipAt ?? NaN, oldStop: oldStop ?? NaN, firstWriteAt: firstWriteAt ?? NaN };
}

export const handoverScenario: Scenario = {
  name: 'handover',
  title: 'The single-writer handover on the real code: a 10 s lease, a 15 s wait, a gap of at least 5 s',
  claim:
    "the new writer waits out the lease plus a margin on its own clock, which covers the old writer's last renewal and clock rate error: a gap, never an overlap",
  async run() {
    const c = HANDOVER_DEFAULTS;
    const main = await playHandover(0, 0);
    const { world } = main;
    // The retries of the cut-off writer: the first one tells it all.
    const rows = world.rows.filter((r, k) => !/gets no answer/.test(r.event) || world.rows.findIndex((x) => x.event === r.event) === k);
    const marks = [
      ...world.marks,
      { lane: 'old writer', kind: 'held' as const, from: 0, to: main.oldStop, label: 'epoch 1' },
      { lane: 'old writer', kind: 'stop' as const, from: main.oldStop, label: `stop ${s(main.oldStop)}` },
      { lane: 'new writer', kind: 'held' as const, from: main.firstWriteAt, to: main.firstWriteAt + c.waitMarginMs, label: 'epoch 2' },
    ];
    let minGap = Number.POSITIVE_INFINITY;
    const rng = new Rng(7);
    for (let i = 0; i < RUNS; i++) {
      const r = await playHandover(rng.between(-MAX_RATE, MAX_RATE), rng.between(-MAX_RATE, MAX_RATE));
      minGap = Math.min(minGap, r.firstWriteAt - r.oldStop);
    }
    const sec = (ms: number): number => Math.round(ms / 10) / 100;
    const checks = new Checks()
      .eq(
        `after the flip at ${s(main.flipAt)}, the old writer's right ends at the latest ${s(c.leaseMs)} - ${s(c.marginMs)} later (s)`,
        sec(c.leaseMs - c.marginMs),
        s(main.oldStop - main.flipAt),
      )
      .eq(
        `the new writer starts ${s(c.leaseMs)} + ${s(c.waitMarginMs)} after the flip (s)`,
        sec(c.leaseMs + c.waitMarginMs),
        s(main.firstWriteAt - main.flipAt),
      )
      .that(`gap (s)`, s(main.firstWriteAt - main.oldStop), (g) => g >= sec(c.waitMarginMs + c.marginMs), `>= ${sec(c.waitMarginMs + c.marginMs)}`)
      .that(
        `smallest gap over ${RUNS} runs with clock rates off by up to ${MAX_RATE * 100} % (s)`,
        s(minGap),
        (g) => g > 0,
        '> 0 (never an overlap)',
      );
    return { name: this.name, title: this.title, claim: this.claim, rows, marks, checks: checks.list };
  },
};

/**
 * The clock scenarios: whose clock decides.
 *
 *   wall-step    B's wall clock is stepped back 3 s at 16.0; the REAL lease stops B by its monotonic clock (21.5), and
 *                a stop timed on the wall clock would come only at 24.5, after D's clock-free claim at 23.5.
 *   claim-rules  D replaces B on a DynamoDB lock item, with a wall clock 3 s fast: the three claim rules of a DynamoDB lock side
 *                by side. The two that compare clocks (no margin, margin) are models, polling at 0.5, 1.5, …: Fencepost
 *                does not implement them (no margin overlaps A by 0.5 s). The clock-free rule is the REAL lease
 *                (lib/core/lease.ts on the in-memory lock store), polling as the code does: it leaves a gap.
 */
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import type { FencepostEvent } from '../../core/events';
import { claim, pollMsOf } from '../../core/lease';
import { WorkerClock } from '../clocks';
import { Sim, type SimRow, type TimelineMark } from '../engine';
import { Holder } from '../holder';
import { DynamoLockItem, ItemClaimant, type ClaimRule } from '../lock-item';
import { RealWorld, type RealWorker } from '../real';
import { Checks, s, type Scenario } from '../scenario';
import { Worker } from '../worker';
import { STORY_TIMING } from './story';

const T = STORY_TIMING;

/** ms → seconds to the hundredth, for an expectation computed from the inputs. */
const sec = (ms: number): number => Math.round(ms / 10) / 100;

/** B's claim, its wall clock's step, and how often B checks its stop time (the wall-step trace). */
const WALL_STEP = { claimAt: 13_500, stepAt: 16_000, stepMs: -3_000, checkEveryMs: 100 } as const;

/**
 * The wall-clock step on the REAL lease: B claims the free lock item at 13.5 (one term: no renewals), D starts
 * watching it at once; B's wall clock is stepped back 3 s at 16.0. B's `Lease.check()` stops it by its monotonic clock;
 * the same stop reading watched on B's wall clock is reached only 3 s later, after D could claim.
 */
export const wallStepScenario: Scenario = {
  name: 'wall-step',
  title: "B's wall clock steps back 3 s at 16.0: the real lease's monotonic stop time holds, a wall-clock one would overrun the takeover",
  claim:
    'time every duration on the monotonic clock: a wall clock can be stepped, and a stop time on it moves with the step (lib/core/lease.ts on the in-memory lock store)',
  async run() {
    const describe = (e: FencepostEvent) =>
      e.event === 'claim'
        ? { event: 'claims the lock item (clock-free)', token: e.token, note: `stop time ${s(e.stopAtMs)} on its monotonic clock` }
        : undefined;
    const world = new RealWorld(0, T.leaseMs, describe);
    const config: LeaseConfig = { ...T, claimBudget: LEASE_DEFAULTS.claimBudget };
    const [B, D] = ['B', 'D'].map((n) => world.worker(n));
    const deps = (w: RealWorker) => w.deps;
    const key = 'billing#2026-09-28';
    let stopReading = 0;
    let monotonicStop: number | undefined;
    let wallStop: number | undefined;
    let dClaim: number | undefined;
    world.at(WALL_STEP.claimAt, () => {
      const wallAtSend = B.wallMs();
      void claim(deps(B), key, 'B', config).then((lease) => {
        stopReading = wallAtSend + T.leaseMs - T.marginMs;
        // BEFORE EVERY ACTION: B checks its stop time; the same reading, watched on its wall clock, beside it.
        const tick = () => {
          try {
            lease.check();
          } catch {
            if (monotonicStop === undefined) {
              monotonicStop = world.clock.monotonicMs();
              world.log('B', 'Lease.check() refuses: the monotonic clock reached the stop time: stops', { token: lease.token });
            }
          }
          if (wallStop === undefined && B.wallMs() >= stopReading) {
            wallStop = world.clock.monotonicMs();
            world.log('B', 'the wall clock reaches the stop reading only now', {
              token: lease.token,
              note: `its wall clock reads ${s(world.clock.monotonicMs() + B.wallOffsetMs)}`,
            });
          }
          if (monotonicStop === undefined || wallStop === undefined) B.after(WALL_STEP.checkEveryMs, tick);
        };
        tick();
      });
      void claim(deps(D), key, 'D', config).then(() => (dClaim = world.clock.monotonicMs()));
    });
    world.at(WALL_STEP.stepAt, () => {
      B.wallOffsetMs += WALL_STEP.stepMs;
      world.log('B', `wall clock stepped ${WALL_STEP.stepMs < 0 ? 'back' : 'forward'} ${Math.abs(WALL_STEP.stepMs) / 1000} s`);
    });
    await world.clock.runUntilIdle();
    const stop = WALL_STEP.claimAt + T.leaseMs - T.marginMs;
    const checks = new Checks()
      .eq(
        `D claims once B's rvn stayed unchanged a full lease: ${s(WALL_STEP.claimAt)} + ${s(T.leaseMs)} (s)`,
        sec(WALL_STEP.claimAt + T.leaseMs),
        s(dClaim),
      )
      .eq(
        `B's check stops it by the monotonic clock at ${s(WALL_STEP.claimAt)} + ${s(T.leaseMs)} - ${s(T.marginMs)} (s)`,
        sec(stop),
        s(monotonicStop),
      )
      .eq(`the wall clock reaches the stop reading only at ${s(stop)} + ${s(-WALL_STEP.stepMs)} (s)`, sec(stop - WALL_STEP.stepMs), s(wallStop))
      .eq("that is after D's claim by (s)", sec(stop - WALL_STEP.stepMs - (WALL_STEP.claimAt + T.leaseMs)), s((wallStop ?? 0) - (dClaim ?? 0)));
    const marks: TimelineMark[] = [
      { lane: 'B', kind: 'held', from: WALL_STEP.claimAt, to: monotonicStop ?? 0, label: 'token 1' },
      { lane: 'B', kind: 'stop', from: monotonicStop ?? 0, label: 'monotonic stop' },
      { lane: 'B', kind: 'stop', from: wallStop ?? 0, label: 'wall-clock stop' },
      { lane: 'D', kind: 'held', from: dClaim ?? 0, to: (dClaim ?? 0) + T.leaseMs - T.marginMs, label: 'token 2' },
    ];
    return { name: this.name, title: this.title, claim: this.claim, rows: world.rows, marks, checks: checks.list };
  },
};

/** D's wall clock runs this far ahead of true time; D polls once a second from 0.5 under the clock rules. */
const D_OFFSET_MS = 3_000;
const D_FIRST_POLL_MS = 500;
const D_POLL_MS = 1_000;
/** A freezes at 4.0 for 15 s, after its renewal at 3.0. */
const A_PAUSE = { at: 4_000, ms: 15_000 };

/** One run of the trace under a clock rule, on the model: A on the item from 0.0, D polling with a clock 3 s fast. */
function playClockRule(rule: Exclude<ClaimRule, 'clock-free'>, sim = new Sim(1)) {
  const item = new DynamoLockItem(sim);
  const A = new Worker(sim, 'A');
  const D = new Worker(sim, 'D', new WorkerClock({ offsetMs: D_OFFSET_MS }));
  A.pause(A_PAUSE.at, A_PAUSE.ms);
  let a: Holder | undefined;
  let d: Holder | undefined;
  A.act(0, () => {
    const sent = A.monotonicNow();
    const epoch = item.claim('A', rule, { claimantWallMs: A.wallNow(), marginMs: T.marginMs, leaseMs: T.leaseMs })!;
    a = new Holder(A, epoch, T, sent, (done) => {
      const ok = item.renew('A', epoch, A.wallNow());
      if (ok) sim.log('A', 'renews the item', { token: epoch, note: `lease_until ${s(item.item?.leaseUntil)}, rvn ${item.item?.rvn}` });
      done(ok);
    });
  });
  const claimant = new ItemClaimant(rule, T.leaseMs, T.marginMs);
  const poll = () => {
    const step = claimant.decide(item.read(), D.monotonicNow(), D.wallNow());
    if (step.claim) {
      const sent = D.monotonicNow();
      const epoch = item.claim('D', rule, { claimantWallMs: D.wallNow(), marginMs: T.marginMs, leaseMs: T.leaseMs });
      if (epoch !== undefined) {
        d = new Holder(D, epoch, T, sent);
        return;
      }
    }
    D.afterMonotonic(D_POLL_MS, poll);
  };
  D.act(D_FIRST_POLL_MS, poll);
  sim.run(30_000);
  a?.markHeld();
  d?.markHeld();
  return { sim, claimAt: d?.since, aStop: a!.stopAtTrue() };
}

/**
 * The clock-free rule on the REAL code: A claims and renews with lib/core/lease.ts on the in-memory lock store and freezes;
 * D (its wall clock 3 s fast, which the rule never reads) claims with lib/core/lease.ts `claim`, polling as the code does.
 */
async function playClockFree() {
  const describe = (e: FencepostEvent) =>
    e.event === 'claim'
      ? { event: 'claims the lock item (clock-free)', token: e.token, note: `rvn watched unchanged ${e.waitedMs / 1000} s; stop ${s(e.stopAtMs)}` }
      : e.event === 'renew'
        ? { event: 'renews the item', token: e.token, note: `stop time ${s(e.stopAtMs)}` }
        : undefined;
  const world = new RealWorld(0, T.leaseMs, describe);
  const config: LeaseConfig = { ...T, claimBudget: LEASE_DEFAULTS.claimBudget };
  const [A, D] = ['A', 'D'].map((n) => world.worker(n));
  D.wallOffsetMs = D_OFFSET_MS;
  const deps = (w: RealWorker) => w.deps;
  const key = 'billing#2026-09-28';
  void claim(deps(A), key, 'A', config).then((lease) => lease.startHeartbeat());
  world.at(A_PAUSE.at, () => A.pause(A_PAUSE.ms, 'a GC pause'));
  let claimAt: number | undefined;
  let dStop = 0;
  world.at(
    D_FIRST_POLL_MS,
    () => void claim(deps(D), key, 'D', config).then((lease) => ((claimAt = world.clock.monotonicMs()), (dStop = lease.stopAtMs))),
  );
  await world.clock.runUntilIdle();
  const last = world.events.filter((x) => x.e.worker === 'A' && (x.e.event === 'claim' || x.e.event === 'renew')).at(-1)?.e;
  const aStop = last?.event === 'claim' || last?.event === 'renew' ? last.stopAtMs : undefined;
  world.mark({ lane: 'D', kind: 'held', from: claimAt ?? 0, to: dStop, label: 'token 2' });
  world.mark({ lane: 'D', kind: 'stop', from: dStop, label: `stop ${s(dStop)}` });
  return { world, claimAt, aStop };
}

export const claimRulesScenario: Scenario = {
  name: 'claim-rules',
  title: 'D replaces B on a DynamoDB lock item with a wall clock 3 s fast: three claim rules side by side',
  claim:
    "comparing one machine's wall clock with another's lets a claim in early, by the clocks' difference; the clock-free rule (the real lease) never does",
  async run() {
    const rows: SimRow[] = [];
    const marks: TimelineMark[] = [];
    const checks = new Checks();
    // A renews every renewMs until it freezes: its last renewal, its stop time, its lease_until by its own (true) clock.
    const aLastRenewal = Math.floor((A_PAUSE.at - 1) / T.renewMs) * T.renewMs;
    const aStop = aLastRenewal + T.leaseMs - T.marginMs;
    const leaseUntil = aLastRenewal + T.leaseMs;
    /** D's first poll (0.5, 1.5, …) strictly after true time t. */
    const pollAfter = (t: number) => D_FIRST_POLL_MS + (Math.floor((t - D_FIRST_POLL_MS) / D_POLL_MS) + 1) * D_POLL_MS;
    const expectedClaim: Record<Exclude<ClaimRule, 'clock-free'>, number> = {
      // lease_until < D's wall (t + offset)
      'no-margin': pollAfter(leaseUntil - D_OFFSET_MS),
      // lease_until < D's wall - margin
      margin: pollAfter(leaseUntil - D_OFFSET_MS + T.marginMs),
    };
    for (const rule of ['no-margin', 'margin'] as const) {
      const r = playClockRule(rule);
      rows.push(...r.sim.rows.map((row) => ({ ...row, actor: `${row.actor} [${rule}]` })));
      // A's bar is the same in every run: draw it once; one D lane per rule.
      for (const m of r.sim.marks) if (m.lane === 'D' || rule === 'no-margin') marks.push({ ...m, lane: m.lane === 'D' ? `D (${rule})` : m.lane });
      checks
        .eq(`${rule} (model): D claims at (s)`, sec(expectedClaim[rule]), s(r.claimAt))
        .eq(
          `${rule} (model): overlap with A's right to act (s)`,
          sec(Math.max(0, aStop - expectedClaim[rule])),
          s(Math.max(0, r.aStop - (r.claimAt ?? 0))),
        );
    }
    // The clock-free rule on the real lease: D watches the rvn from its first poll at or after A's last renewal, a full lease.
    const real = await playClockFree();
    const poll = pollMsOf(T);
    const sees = D_FIRST_POLL_MS + Math.ceil((aLastRenewal - D_FIRST_POLL_MS) / poll) * poll;
    rows.push(...real.world.rows.map((row) => ({ ...row, actor: `${row.actor} [clock-free]` })));
    marks.push(...real.world.marks.filter((m) => m.lane === 'D').map((m) => ({ ...m, lane: 'D (clock-free, real code)' })));
    checks
      .eq(
        `clock-free (real code): D claims a full lease after it saw A's last rvn, ${s(sees)} + ${s(T.leaseMs)} (s)`,
        sec(sees + T.leaseMs),
        s(real.claimAt),
      )
      .eq("clock-free (real code): A's stop time (s)", sec(aStop), s(real.aStop))
      .that(`clock-free (real code): gap after A's stop time ${sec(aStop)} (s)`, s((real.claimAt ?? 0) - aStop), (g) => g > 0, '> 0 (a gap)');
    rows.sort((x, y) => x.t - y.t);
    return { name: this.name, title: this.title, claim: this.claim, rows, marks, checks: checks.list };
  },
};

/**
 * The clock scenarios (reference Parts 3 and 5): whose clock decides.
 *
 *   wall-step    B's wall clock is stepped back 3 s at 16.0; B times its stop on the monotonic clock (21.5), and a
 *                stop timed on the wall clock would come only at 24.5, after the service's deadline of 23.5.
 *   claim-rules  D replaces B on a DynamoDB lock item, with a wall clock 3 s fast, polling at 0.5, 1.5, …: the three
 *                claim rules of Part 5 side by side (no margin overlaps A by 0.5 s; the other two leave a gap).
 */
import { WorkerClock } from '../clocks';
import { Sim } from '../engine';
import { Holder, overlapMs } from '../holder';
import { CLAIM_RULES, DynamoLockItem, ItemClaimant, type ClaimRule } from '../lock-item';
import { ConsensusLockService } from '../lock-service';
import { Checks, s, type Scenario } from '../scenario';
import { Worker } from '../worker';
import { STORY_TIMING } from './story';

const T = STORY_TIMING;

export const wallStepScenario: Scenario = {
  name: 'wall-step',
  title: "B's wall clock steps back 3 s at 16.0: the monotonic stop time holds, a wall-clock one would overrun the deadline",
  claim: 'Part 3: time every duration on the monotonic clock; a wall clock can be stepped',
  run() {
    const sim = new Sim(1);
    const svc = new ConsensusLockService(sim, { revision: 11 });
    const B = new Worker(sim, 'B', new WorkerClock({ steps: [{ at: 16_000, byMs: -3_000 }] }));
    let h: Holder | undefined;
    let leaseId = 0;
    let wallStopAt = 0;
    B.act(13_500, () => {
      const sentMono = B.monotonicNow();
      const sentWall = B.wallNow();
      const r = svc.acquire('billing:2026-09-28', 'B', T.leaseMs);
      if (!r.ok) return;
      leaseId = r.leaseId;
      h = new Holder(B, r.revision, T, sentMono); // this trace follows one term: no renewals
      sim.log('B', 'acquires the lock', {
        token: r.revision,
        note: `deadline ${s(svc.deadlineOf(r.leaseId))}; stop reading ${s(sentWall + T.leaseMs - T.marginMs)}`,
      });
      // The same stop reading, watched on each clock: when does each clock reach it?
      const stopReading = sentWall + T.leaseMs - T.marginMs;
      B.act(h.stopAtTrue(), () =>
        sim.log('B', 'monotonic clock reaches the stop reading: stops', { token: r.revision, note: `monotonic ${s(B.monotonicNow())}` }),
      );
      wallStopAt = B.clock.firstTrueAtWall(stopReading, 16_000);
      B.act(wallStopAt, () => sim.log('B', 'wall clock reaches the stop reading only now', { token: r.revision, note: `wall ${s(B.wallNow())}` }));
    });
    sim.at(16_000, () => sim.log('B', 'wall clock stepped back 3 s', { note: `wall now reads ${s(B.wallNow())}` }));
    const deadline = () => svc.deadlineOf(leaseId);
    let serviceDeadline: number | undefined;
    sim.at(13_501, () => (serviceDeadline = deadline()));
    sim.run(30_000);
    h?.markHeld();
    sim.mark({ lane: 'B', kind: 'stop', from: wallStopAt, label: 'wall-clock stop' });
    const checks = new Checks()
      .eq("B's token", 12, h?.token)
      .eq("the service's deadline (s)", 23.5, s(serviceDeadline))
      .eq('the monotonic clock crosses the stop reading at true (s)', 21.5, s(h?.stopAtTrue()))
      .eq('the wall clock crosses it only at true (s)', 24.5, s(wallStopAt))
      .eq('that is after the deadline by (s)', 1, s(wallStopAt - (serviceDeadline ?? 0)));
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

/** One run of Part 5's trace under one claim rule: A on the item from 0.0, D polling with a clock 3 s fast. */
function playClaimRule(rule: ClaimRule, sim = new Sim(1), dOffsetMs = 3_000) {
  const item = new DynamoLockItem(sim);
  const A = new Worker(sim, 'A');
  const D = new Worker(sim, 'D', new WorkerClock({ offsetMs: dOffsetMs }));
  A.pause(4_000, 15_000);
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
    const seen = item.read();
    const step = claimant.decide(seen, D.monotonicNow(), D.wallNow());
    if (step.claim) {
      const sent = D.monotonicNow();
      const epoch = item.claim('D', rule, { claimantWallMs: D.wallNow(), marginMs: T.marginMs, leaseMs: T.leaseMs, seenRvn: step.seenRvn });
      if (epoch !== undefined) {
        d = new Holder(D, epoch, T, sent);
        return;
      }
    }
    D.afterMonotonic(1_000, poll);
  };
  D.act(500, poll);
  sim.run(30_000);
  a?.markHeld();
  d?.markHeld();
  return { sim, a: a!, d };
}

export const claimRulesScenario: Scenario = {
  name: 'claim-rules',
  title: "D replaces B on a DynamoDB lock item with a wall clock 3 s fast: Part 5's three claim rules side by side",
  claim: "Part 5: comparing one machine's wall clock with another's lets a claim in early; the clock-free rule never does",
  run() {
    const sim = new Sim(1);
    const checks = new Checks();
    const expected: Record<ClaimRule, number> = { 'no-margin': 10.5, margin: 12.5, 'clock-free': 13.5 };
    for (const rule of CLAIM_RULES) {
      const sub = new Sim(1);
      const r = playClaimRule(rule, sub);
      for (const row of sub.rows) sim.rows.push({ ...row, actor: `${row.actor} [${rule}]` });
      // A's bar is the same in all three runs: draw it once; one D lane per rule.
      for (const m of sub.marks) if (m.lane === 'D' || rule === 'no-margin') sim.marks.push({ ...m, lane: m.lane === 'D' ? `D (${rule})` : m.lane });
      const claimAt = r.d?.since;
      const overlap = r.d ? overlapMs(r.a, r.d) : 0;
      checks
        .eq(`${rule}: D claims at (s)`, expected[rule], s(claimAt))
        .eq(`${rule}: overlap with A's right to act (s)`, rule === 'no-margin' ? 0.5 : 0, s(overlap))
        .that(
          `${rule}: gap after A's stop time ${s(r.a.stopAtTrue())} (s)`,
          s((claimAt ?? 0) - r.a.stopAtTrue()),
          (g) => (rule === 'no-margin' ? g < 0 : g > 0),
          rule === 'no-margin' ? '< 0 (an overlap)' : '> 0 (a gap)',
        );
    }
    sim.rows.sort((x, y) => x.t - y.t);
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

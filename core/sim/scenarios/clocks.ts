/**
 * The clock scenarios (reference Parts 3 and 5): whose clock decides.
 *
 *   wall-step    B's wall clock is stepped back 3 s at 16.0; B times its stop on the monotonic clock (21.5), and a
 *                stop timed on the wall clock would come only at 24.5, after the service's deadline of 23.5.
 *   claim-rules  D replaces B on a DynamoDB lock item, with a wall clock 3 s fast, polling at 0.5, 1.5, …: the three
 *                claim rules of Part 5 side by side (no margin overlaps A by 0.5 s; the other two leave a gap).
 *   ttl-epochs   TTL on the lock item resets the epoch (1, 2, 3, then 1 again); the never-TTL'd item goes on to 4.
 */
import { WorkerClock } from '../clocks';
import { Sim } from '../engine';
import { Holder, overlapMs } from '../holder';
import { CLAIM_RULES, DynamoLockItem, ItemClaimant, type ClaimRule } from '../lock-item';
import { ConsensusLockService } from '../lock-service';
import { Checks, s, type Scenario } from '../scenario';
import { FencedStore } from '../store';
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

/** The TTL story on one item: claims (each waiting by the clock-free rule), releases, (optionally) a TTL delete. */
function playEpochs(ttl: boolean) {
  const sim = new Sim(1);
  const item = new DynamoLockItem(sim, ttl ? 'lock item (TTL on)' : "lock item (never TTL'd)");
  const store = new FencedStore(sim);
  const epochs: number[] = [];
  /** A claimant polling every 0.5 s from `from`, claiming when the clock-free rule allows; its first act is the raise. */
  const claimFrom = (who: string, from: number) => {
    const w = new Worker(sim, who);
    const claimant = new ItemClaimant('clock-free', T.leaseMs, 0);
    const poll = () => {
      const step = claimant.decide(item.read(), w.monotonicNow(), w.wallNow());
      const e = step.claim
        ? item.claim(who, 'clock-free', { claimantWallMs: w.wallNow(), marginMs: 0, leaseMs: T.leaseMs, seenRvn: step.seenRvn })
        : undefined;
      if (e === undefined) return w.afterMonotonic(500, poll);
      epochs.push(e);
      store.raise(who, e);
    };
    w.act(from, poll);
  };
  claimFrom('A', 0); // free: epoch 1; A then dies holding it, renewing nothing
  claimFrom('D', 500); // watches A's rvn for a full lease: epoch 2
  sim.at(15_000, () => item.release('D', 2));
  claimFrom('A2', 16_000); // free again: the epoch carries on
  sim.at(20_000, () => item.release('A2', 3));
  if (ttl) sim.at(25_000, () => item.ttlDelete()); // TTL's delete comes days after expiry; here, soon after
  claimFrom('E', 26_000);
  sim.run(60_000);
  return { sim, epochs, store };
}

export const ttlEpochsScenario: Scenario = {
  name: 'ttl-epochs',
  title: "TTL on the lock item resets the epoch: 1, 2, 3, then 1 again; the never-TTL'd item goes on to 4",
  claim: 'Part 5: never put TTL on an item that carries the epoch; release by clearing holder',
  run() {
    const withTtl = playEpochs(true);
    const never = playEpochs(false);
    const rows = [
      ...withTtl.sim.rows.map((r) => ({ ...r, actor: `${r.actor} [TTL]` })),
      ...never.sim.rows.map((r) => ({ ...r, actor: `${r.actor} [no TTL]` })),
    ].sort((x, y) => x.t - y.t);
    const checks = new Checks()
      .eq('epochs with TTL on the item', '1,2,3,1', withTtl.epochs.join(','))
      .eq("epochs on the never-TTL'd item", '1,2,3,4', never.epochs.join(','))
      .eq('the store refuses the repeated epoch 1 (refusals)', 1, withTtl.store.refused)
      .eq('with TTL, the fence stays at', 3, withTtl.store.row.fence)
      .eq('without TTL, the fence reaches', 4, never.store.row.fence);
    return { name: this.name, title: this.title, claim: this.claim, rows, marks: [...withTtl.sim.marks], checks: checks.list };
  },
};

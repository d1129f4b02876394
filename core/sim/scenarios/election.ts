/**
 * Leader election and the single-writer handover (reference Part 7).
 *
 *   election  B, C and D campaign on one prefix; each watches ONLY the key just before its own. B dies; when the
 *             service deletes B's key, exactly one candidate wakes, and it leads with its key's revision as epoch.
 *   handover  a 10 s lease and a 15 s wait: the old writer stops at 10 by its own clock when it can't renew, the
 *             new writer starts at 15 by its own: a gap of at least 5 s. Repeated over seeded clock-rate errors.
 */
import { WorkerClock } from '../clocks';
import { Sim } from '../engine';
import { Holder } from '../holder';
import { ConsensusLockService, LockClient } from '../lock-service';
import { Checks, s, type Scenario } from '../scenario';
import { Network, Worker } from '../worker';
import { STORY_TIMING } from './story';

const T = STORY_TIMING;
const PREFIX = 'election/pacer';

export const electionScenario: Scenario = {
  name: 'election',
  title: 'The election side trace: only the successor wakes, and it leads with epoch 13 at 29.5',
  claim: "Part 7: watch only your predecessor (no herd); the epoch is the key's revision, higher than any before",
  run() {
    const sim = new Sim(1);
    const svc = new ConsensusLockService(sim, { revision: 11 });
    const net = new Network(sim);
    const wakeups: string[] = [];
    let leader: { name: string; epoch: number; at: number } | undefined;
    const campaign = (name: string, at: number, diesAt?: number) => {
      const w = new Worker(sim, name);
      if (diesAt !== undefined) w.crash(diesAt);
      const client = new LockClient(svc, net, w);
      w.act(at, () => {
        const sent = w.monotonicNow();
        const r = svc.campaign(PREFIX, name, T.leaseMs);
        if (!r.ok) return;
        new Holder(w, r.revision, T, sent, client.keepAlive(r.leaseId)).logRenewals = false;
        // 2.–4. lead if mine is the lowest create revision; otherwise watch only the key just before mine.
        const lead = () => {
          const q = svc.queue(PREFIX);
          const mine = q.findIndex((k) => k.key === `${PREFIX}/${name}`);
          if (mine === 0) {
            leader = { name, epoch: r.revision, at: sim.now };
            sim.log(name, 'leads', { token: r.revision, note: `epoch = its key's revision ${r.revision}` });
            return;
          }
          const before = q[mine - 1].key;
          sim.log(name, `watches only ${before}`, { token: r.revision });
          svc.watchDelete(before, () =>
            w.act(sim.now, () => {
              wakeups.push(name);
              sim.log(name, "wakes: its predecessor's key is gone; checks again", { token: r.revision });
              lead();
            }),
          );
        };
        sim.log(name, 'campaigns: creates its key bound to its lease', { token: r.revision });
        lead();
      });
    };
    campaign('B', 13_500, 21_000); // B leads; it renews until it dies (last renewal applied at 19.5)
    campaign('C', 14_000);
    campaign('D', 14_500);
    sim.run(40_000);
    const checks = new Checks()
      .eq("candidates woken by the deletion of B's key", 1, wakeups.length)
      .eq('the one that wakes', 'C', wakeups[0])
      .eq('the new leader leads at (s)', 29.5, s(leader?.at))
      .eq('with epoch', 13, leader?.epoch)
      .that('higher than any epoch B used (12)', leader?.epoch, (e) => e > 12, '> 12');
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

/** One handover: the old writer's last good refresh at the flip (t = 0), the new writer waiting 15 s on its own clock. */
function playHandover(oldRate: number, newRate: number, sim = new Sim(1)) {
  const lease = { leaseMs: 10_000, renewMs: 3_000, marginMs: 0 };
  const waitMs = 15_000;
  const old = new Worker(sim, 'old writer', new WorkerClock({ rate: oldRate }));
  const neu = new Worker(sim, 'new writer', new WorkerClock({ rate: newRate }));
  // Worst case: the old writer's last good refresh was at the flip; every later one gets no answer, so it
  // retries until its own stop time and then stops.
  const h = new Holder(old, 1, lease, old.monotonicNow(), (done) => done(undefined));
  let firstWrite = 0;
  neu.afterMonotonic(waitMs, () => {
    firstWrite = sim.now;
    sim.log('new writer', 'bumps the epoch in the store it will write, then writes', { token: 2 });
  });
  sim.log('new writer', `the flip: waits ${waitMs / 1000} s (lease + 5 s margin) on its own clock`);
  sim.run(30_000);
  return { sim, h, firstWrite };
}

export const handoverScenario: Scenario = {
  name: 'handover',
  title: 'The single-writer handover: a 10 s lease, a 15 s wait, a gap of at least 5 s',
  claim: 'Part 7: the new writer waits out the lease plus a margin on its own clock; never an overlap',
  run() {
    const main = playHandover(0, 0);
    const { sim } = main;
    sim.mark({ lane: 'old writer', kind: 'held', from: 0, to: main.h.stopAtTrue(), label: 'epoch 1' });
    sim.mark({ lane: 'new writer', kind: 'held', from: main.firstWrite, to: main.firstWrite + 5_000, label: 'epoch 2' });
    // The same handover over 200 seeded clock-rate errors of up to ±0.1 % each way.
    let minGap = Number.POSITIVE_INFINITY;
    const rng = new Sim(7).rng;
    for (let i = 0; i < 200; i++) {
      const r = playHandover(rng.between(-0.001, 0.001), rng.between(-0.001, 0.001));
      minGap = Math.min(minGap, r.firstWrite - r.h.stopAtTrue());
    }
    const checks = new Checks()
      .eq("the old writer's right ends at the latest at (s)", 10, s(main.h.stopAtTrue()))
      .eq('the new writer starts at (s)', 15, s(main.firstWrite))
      .that('gap (s)', s(main.firstWrite - main.h.stopAtTrue()), (g) => g >= 5, '>= 5')
      .that('smallest gap over 200 runs with clock rates off by up to 0.1 % (s)', s(minGap), (g) => g > 0, '> 0 (never an overlap)');
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

/**
 * Leader election and the single-writer handover (reference Part 7).
 *
 *   election  B, C and D campaign on one prefix; each watches ONLY the key just before its own. B dies; when the
 *             service deletes B's key, exactly one candidate wakes, and it leads with its key's revision as epoch.
 * (The single-writer handover runs on the real code: handover.ts.)
 */
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

/**
 * Leader election on the REAL code (issue 19, item 5): lib/election/election.ts `Election` for
 * every candidate, on the in-memory lock store and virtual time. B, C and D campaign on one role; each watches ONLY
 * the candidate just before its own. B leads, then dies; C finds B's item silent for a full lease (its rvn unchanged
 * since B's last renewal), removes it and leads, with its sequence number as the epoch. D, watching C, never wakes.
 * (The reference's epoch 13 is its lock service's revision; Fencepost's epoch is the candidate's sequence number.)
 * The single-writer handover runs on the real code too: handover.ts.
 */
import { LEASE_DEFAULTS, type LeaseConfig } from '../../core/config';
import { Election } from '../../election/election';
import type { FencepostEvent } from '../../core/events';
import { pollMsOf } from '../../core/lease';
import type { SimRow } from '../engine';
import { RealWorld, type RealWorker } from '../real';
import { Checks, s, type Scenario } from '../scenario';

const ROLE = 'pacer';
/** Who campaigns when, and when B dies (the reference's side trace: B at 13.5, dying at 21.0). */
const CANDIDATES = [
  { name: 'B', at: 13_500, diesAt: 21_000 },
  { name: 'C', at: 14_000 },
  { name: 'D', at: 14_500 },
] as const;

function describe(e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined {
  switch (e.event) {
    case 'campaign':
      return {
        event: e.predecessor === undefined ? 'campaigns: heads the queue' : `campaigns: watches only candidate ${e.predecessor}`,
        token: e.seq,
        note: `its sequence number ${e.seq}`,
      };
    case 'predecessor-gone':
      return { event: `wakes: its predecessor ${e.predecessor} is gone (${e.how})`, token: e.seq, note: `${e.reads} reads of that one item` };
    case 'leading':
      return { event: 'leads', token: e.epoch, note: `epoch = its sequence number ${e.epoch}; stop time ${s(e.stopAtMs)}` };
    case 'resigned':
      return { event: 'resigns (the scenario is over)', token: e.epoch };
    default:
      return undefined;
  }
}

export const electionScenario: Scenario = {
  name: 'election',
  title: 'The election on the real code: only the successor wakes, and it leads with the next epoch a lease after B went silent',
  claim:
    "watch only your predecessor (a leader's end wakes one candidate, not the herd); the epoch only grows, so the resource can refuse an old leader (lib/election/election.ts on the in-memory lock store)",
  async run() {
    const config: LeaseConfig = { ...LEASE_DEFAULTS };
    const world = new RealWorld(0, config.leaseMs, describe);
    const election = (w: RealWorker) => new Election({ ...w.deps, random: () => 0.5 }, ROLE, config);
    const stop = new AbortController();
    const leaders: { name: string; epoch: number; at: number }[] = [];
    for (const c of CANDIDATES) {
      const w = world.worker(c.name);
      world.at(c.at, () => {
        void election(w)
          .campaign(c.name, { signal: stop.signal })
          .then(async (leadership) => {
            leaders.push({ name: c.name, epoch: leadership.epoch, at: world.clock.monotonicMs() });
            // The side trace ends with the second leader: everyone leaves, so the world comes to rest.
            if (leaders.length === 2) {
              stop.abort(new Error('the scenario is over'));
              await leadership.resign();
            }
          })
          .catch(() => undefined);
      });
      if ('diesAt' in c) world.at(c.diesAt, () => w.crash());
    }
    await world.clock.runUntilIdle();
    const woken = world.events.filter((x) => x.e.event === 'predecessor-gone').map((x) => x.e.worker);
    // What the rules give: B renews every renewMs until it dies; C polls every lease/20 from its campaign and leads once
    // B's rvn stayed unchanged a full lease from the first poll that showed it.
    const [b, c] = CANDIDATES;
    const bLastRenewal = b.at + Math.floor((b.diesAt - b.at - 1) / config.renewMs) * config.renewMs;
    const poll = pollMsOf(config);
    const cSees = c.at + Math.ceil((bLastRenewal - c.at) / poll) * poll;
    const sec = (ms: number): number => Math.round(ms / 10) / 100;
    const next = leaders[1];
    const checks = new Checks()
      .eq('the first leader', 'B', leaders[0]?.name)
      .eq("candidates woken when B's item is found gone", 1, woken.length)
      .eq('the one that wakes', 'C', woken[0])
      .eq(
        `the new leader leads a full lease after it saw B's last renewal: ${s(cSees)} + ${s(config.leaseMs)} (s)`,
        sec(cSees + config.leaseMs),
        s(next?.at),
      )
      .eq('with epoch', 2, next?.epoch)
      .that(`higher than any epoch B used (${leaders[0]?.epoch})`, next?.epoch, (e) => e > (leaders[0]?.epoch ?? Infinity), '> B\u2019s');
    const marks = [
      ...world.marks,
      ...leaders.map((l, k) => ({
        lane: l.name,
        kind: 'held' as const,
        from: l.at,
        to: k === 0 ? bLastRenewal + config.leaseMs - config.marginMs : l.at + 1,
        label: `epoch ${l.epoch}`,
      })),
    ];
    return { name: this.name, title: this.title, claim: this.claim, rows: world.rows, marks, checks: checks.list };
  },
};

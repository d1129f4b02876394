/**
 * 11. Leader election: reads per departure and takeover after the leader's death (reference Part 7; docs/ELECTION.md).
 *
 * The leader is a `fencepost elect` process; the other N - 1 candidates campaign in this process (one SDK client,
 * each its own events and read counts), queued behind it. Once every candidate has queued and a lease has passed,
 * the leader is sent SIGKILL on the arrival of one of its `renew` lines. The window runs from that renewal to the
 * successor's `leading`; in it we count, per candidate, the reads of the departed leader's item, the re-reads of the
 * role item, and every other read (each candidate polling its own predecessor, as it does all the time).
 *
 *   takeover   the successor's `leading` minus the arrival of the leader's last `renew` line, against the formula
 *              (last renewal + lease): never below it, and above it by at most a poll period plus a round trip.
 *
 * A herd design (every waiter watching the leader) would make every one of the N - 1 waiters read the leader's item
 * for the whole lease and re-read the queue after it goes: that is the figure the per-candidate counts are set against.
 */
import { systemClock } from '../lib/core/clock';
import type { LeaseConfig } from '../lib/core/config';
import { Election, type ElectionReads, type Leadership } from '../lib/election/election';
import { Events } from '../lib/core/events';
import { pollMsOf } from '../lib/core/lease';
import { fmt, kill, newReport, spawnCli, table, type BenchContext, type Measurement } from './common';
import { DynamoLockStore } from '../lib/core/aws/lock-store';

const CONFIG: LeaseConfig = { leaseMs: 2000, renewMs: 600, marginMs: 400, claimBudget: 30 };
const total = (r: ElectionReads) => r.join + r.role + Object.values(r.predecessors).reduce((a, b) => a + b, 0);

interface Departure {
  readonly candidates: number;
  readonly successorReadsOfLeader: number;
  readonly successorRoleReads: number;
  readonly othersReadsOfLeader: number;
  readonly othersRoleReads: number;
  readonly othersOtherReads: number;
  readonly takeoverMs: number;
}

async function oneDeparture(ctx: BenchContext, n: number): Promise<Departure> {
  const stack = await ctx.stack();
  const ns = await stack.namespace('el');
  const lease = ['--lease-ms', String(CONFIG.leaseMs), '--renew-ms', String(CONFIG.renewMs), '--margin-ms', String(CONFIG.marginMs)];
  const leader = spawnCli(['elect', ...ns.storeArgs(), '--role', 'r', '--candidate', 'L', ...lease, '--every', '1s', '--events']);
  const waiting: { name: string; reads: ElectionReads; leads: Promise<Leadership>; abort: AbortController; ledAt?: number }[] = [];
  try {
    await leader.waitFor((e) => e.event === 'leading', 60_000);
    for (let i = 2; i <= n; i++) {
      const name = `c${i}`;
      const reads: ElectionReads = { join: 0, role: 0, predecessors: {} };
      const abort = new AbortController();
      let joined!: () => void;
      const queued = new Promise<void>((r) => (joined = r));
      const events = new Events(name, systemClock).on((e) => {
        if (e.event === 'campaign') joined();
        if (e.event === 'leading') entry.ledAt = performance.now();
      });
      const deps = { locks: new DynamoLockStore(stack.clients.ddb, ns.tables.locks), clock: systemClock, events };
      const entry: (typeof waiting)[number] = {
        name,
        reads,
        abort,
        leads: new Election(deps, 'r', CONFIG).campaign(name, { reads, signal: abort.signal }),
      };
      entry.leads.catch(() => undefined);
      waiting.push(entry);
      await queued;
    }
    await new Promise((r) => setTimeout(r, CONFIG.leaseMs));
    const before = waiting.map((w) => structuredClone(w.reads));
    // SIGKILL on the arrival of a renew line: the last renewal is known to this process's clock.
    const renewedAt = await new Promise<number>((resolve) =>
      leader.onEvent((e) => {
        if (e.event === 'renew') {
          kill(leader);
          resolve(e.seenAtMs);
        }
      }),
    );
    const successor = waiting[0];
    await successor.leads;
    const takeoverMs = successor.ledAt! - renewedAt;
    const delta = waiting.map((w, i) => ({
      leader: (w.reads.predecessors[1] ?? 0) - (before[i].predecessors[1] ?? 0),
      role: w.reads.role - before[i].role,
      all: total(w.reads) - total(before[i]),
    }));
    const others = delta.slice(1);
    const sum = (f: (d: (typeof delta)[number]) => number) => others.reduce((a, d) => a + f(d), 0);
    return {
      candidates: n,
      successorReadsOfLeader: delta[0].leader,
      successorRoleReads: delta[0].role,
      othersReadsOfLeader: sum((d) => d.leader),
      othersRoleReads: sum((d) => d.role),
      othersOtherReads: sum((d) => d.all - d.leader - d.role),
      takeoverMs,
    };
  } finally {
    kill(leader);
    await leader.exited;
    for (const w of waiting) w.abort.abort();
    for (const w of waiting) await (await w.leads.catch(() => undefined))?.resign().catch(() => undefined);
    await stack.drop(ns);
  }
}

export const election: Measurement = {
  name: 'election',
  title: '11. Leader election: reads per departure at 3, 10 and 30 candidates; takeover vs last renewal + lease',
  fullMinutes: 2,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const sizes = [3, 10, 30];
    const rounds = ctx.quick ? 1 : ctx.rounds;
    const runs: Departure[] = [];
    for (let r = 0; r < rounds; r++)
      for (const n of sizes) {
        const d = await oneDeparture(ctx, n);
        runs.push(d);
        ctx.log(
          `election: ${n} candidates: successor ${d.successorReadsOfLeader} reads of the leader, others ${d.othersReadsOfLeader}; takeover ${fmt(d.takeoverMs)} ms`,
        );
      }
    const poll = pollMsOf(CONFIG);
    report.blocks.push(
      `lease ${CONFIG.leaseMs} ms, renew ${CONFIG.renewMs} ms, poll ${poll} ms; window = leader's last renewal → successor leads\n` +
        table(
          [
            'candidates',
            "successor: reads of leader's item",
            'successor: role re-reads',
            "others: reads of leader's item",
            'others: role re-reads',
            'others: own-predecessor polls',
            'herd design: waiter reads of leader',
            'takeover ms',
            'formula ms',
          ],
          runs.map((d) => [
            String(d.candidates),
            String(d.successorReadsOfLeader),
            String(d.successorRoleReads),
            String(d.othersReadsOfLeader),
            String(d.othersRoleReads),
            String(d.othersOtherReads),
            `~${Math.round(((d.candidates - 1) * d.takeoverMs) / poll)}`,
            fmt(d.takeoverMs),
            String(CONFIG.leaseMs),
          ]),
        ),
    );
    const herdFree = runs.every((d) => d.othersReadsOfLeader === 0 && d.othersRoleReads === 0);
    report.verdicts.push({
      measurement: this.name,
      what: "one departure wakes one candidate (others' reads of the departed item and of the role item)",
      figure: runs.map((d) => `${d.candidates}: ${d.othersReadsOfLeader + d.othersRoleReads}`).join(', '),
      target: '0 at every size',
      met: herdFree,
    });
    const worst = Math.max(...runs.map((d) => d.takeoverMs - CONFIG.leaseMs));
    const best = Math.min(...runs.map((d) => d.takeoverMs - CONFIG.leaseMs));
    report.verdicts.push({
      measurement: this.name,
      what: 'takeover after the leader dies, minus (last renewal + lease)',
      figure: `${fmt(best)} .. ${fmt(worst)} ms`,
      target: `>= -50 ms (the renew line arrives after the store applied it) and <= poll ${poll} ms + 500 ms`,
      met: best >= -50 && worst <= poll + 500,
    });
    report.data.runs = runs;
    return report;
  },
};

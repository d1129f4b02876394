/**
 * 5. Lease operations: renewals per second for 1,000 holders.
 *
 * 1,000 lock items are claimed with the project's clock-free `claim` (lib/core/lease.ts: observe, then a conditional
 * claim; the locks are free so nobody waits), 16 claims in flight. Then, side by side in rotating order:
 *
 *   Lease.renew   the project's renewal: sent_at read before sending, condition holder = :me AND epoch = :e,
 *                 a new rvn, ALL_OLD on a failed condition, the stop time moved, a `renew` event emitted;
 *   bare          an UpdateItem loop with the same condition and the same SET (a new rvn and renewed_at), nothing else.
 *
 * 16 renewals in flight, each holder renewed 3 times per round (3,000 renewals). Target: Lease.renew within 10% of
 * bare. (The issue quotes ~1,285 renewals/s on DynamoDB Local with 16 in flight.)
 */
import { randomUUID } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../lib/core/clock';
import { validateBillingConfig } from '../apps/billing/settings';
import { Events } from '../lib/core/events';
import { claim, type Lease } from '../lib/core/lease';
import { Attr } from '../lib/core/schema';
import { fmt, fmtStat, newReport, rotate, stat, table, type BenchContext, type Measurement } from './common';
import { DynamoLockStore } from '../lib/core/aws/lock-store';

async function pool<T>(items: readonly T[], inFlight: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (;;) {
        const i = next++;
        if (i >= items.length) return;
        await fn(items[i]);
      }
    }),
  );
}

export const leaseOps: Measurement = {
  name: 'lease-ops',
  title: '5. Lease operations: Lease.renew() for 1,000 holders vs a bare UpdateItem loop, 16 in flight',
  fullMinutes: 2,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const holders = 1_000;
    const perRound = 3; // renewals per holder per round
    const inFlight = 16;
    const ns = await stack.namespace('lo');
    try {
      const config = validateBillingConfig({});
      const deps = { locks: new DynamoLockStore(stack.clients.ddb, ns.tables.locks), clock: systemClock, events: new Events('bench', systemClock) };
      const keys = Array.from({ length: holders }, (_, i) => `lease#${String(i).padStart(4, '0')}`);
      const leases: Lease[] = new Array(holders);
      const c0 = performance.now();
      await pool(
        keys.map((k, i) => [k, i] as const),
        inFlight,
        async ([k, i]) => {
          leases[i] = await claim(deps, k, `holder-${i}`, config);
        },
      );
      const claimSeconds = (performance.now() - c0) / 1000;
      ctx.log(`lease-ops: ${fmt(holders)} claims in ${claimSeconds.toFixed(2)} s (${fmt(holders / claimSeconds)} claims/s, observe + claim each)`);

      const variants = {
        'Lease.renew': async () => {
          const work = Array.from({ length: perRound }, () => leases).flat();
          await pool(work, inFlight, (l) => l.renew());
          return work.length;
        },
        bare: async () => {
          const work = Array.from({ length: perRound }, () => leases).flat();
          await pool(work, inFlight, async (l) => {
            await stack.clients.ddb.send(
              new UpdateCommand({
                TableName: ns.tables.locks,
                Key: { [Attr.pk]: l.key },
                ConditionExpression: `${Attr.holder} = :me AND ${Attr.epoch} = :e`,
                UpdateExpression: `SET ${Attr.rvn} = :rvn, ${Attr.renewedAt} = :wall`,
                ExpressionAttributeValues: { ':me': l.holder, ':e': l.token, ':rvn': randomUUID(), ':wall': new Date().toISOString() },
              }),
            );
          });
          return work.length;
        },
      } as const;
      type V = keyof typeof variants;
      const names = Object.keys(variants) as V[];
      for (const n of names) await variants[n](); // warm-up
      const rps: Record<V, number[]> = { 'Lease.renew': [], bare: [] };
      const rounds = ctx.quick ? 1 : Math.max(5, ctx.rounds);
      for (let r = 1; r <= rounds; r++) {
        for (const n of rotate(names, r)) {
          const t0 = performance.now();
          const count = await variants[n]();
          rps[n].push(count / ((performance.now() - t0) / 1000));
        }
        ctx.log(`lease-ops: round ${r}/${rounds}: Lease.renew ${fmt(rps['Lease.renew'].at(-1)!)} /s, bare ${fmt(rps.bare.at(-1)!)} /s`);
      }
      const m = { 'Lease.renew': stat(rps['Lease.renew']), bare: stat(rps.bare) };
      report.blocks.push(
        `${fmt(holders)} holders, ${perRound} renewals each per round (${fmt(holders * perRound)}), ${inFlight} in flight, ${rounds} round(s) after a warm-up; medians (min–max)\n` +
          table(
            ['variant', 'renewals/s', 'ratio to bare'],
            names.map((n) => [n, fmtStat(m[n]), (m[n].median / m.bare.median).toFixed(3)]),
          ),
        `claims: ${fmt(holders)} clock-free claims of free locks (a GetItem + a conditional UpdateItem each), ${inFlight} in flight: ${claimSeconds.toFixed(2)} s, ${fmt(holders / claimSeconds)} claims/s`,
      );
      const ratio = m['Lease.renew'].median / m.bare.median;
      report.verdicts.push(
        {
          measurement: this.name,
          what: 'Lease.renew / bare UpdateItem (renewals/s)',
          figure: `${ratio.toFixed(3)} (${fmt(m['Lease.renew'].median)} vs ${fmt(m.bare.median)} /s)`,
          target: '≥ 0.90',
          met: ratio >= 0.9,
        },
        {
          measurement: this.name,
          what: "renewals/s with 16 in flight vs the issue's ~1,285/s",
          figure: fmt(m['Lease.renew'].median),
          target: 'informational (another machine)',
          met: undefined,
        },
      );
      Object.assign(report.data, { holders, perRound, inFlight, claimSeconds, rps });
      return report;
    } finally {
      await stack.drop(ns);
    }
  },
};

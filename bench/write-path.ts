/**
 * Benchmark (not a test): the cost of fencing, measured side by side on one DynamoDB Local in one run.
 *
 *   fenced   the project's write path: fence.writeBatch over the night's batches (1 ConditionCheck + 99 Puts,
 *            attribute_not_exists on each put, cancellation reasons read, ClientRequestToken)
 *   bare     a bare TransactWriteItems loop of the same transactions (the same check and puts, nothing else),
 *            built the same way the fenced path builds them (AttributeValues written directly)
 *   bare+token  the bare loop plus the one thing of the fenced path that DynamoDB itself does work for: the same
 *            ClientRequestToken (a diagnostic: it separates the client's extra work from the server's)
 *   bare (document client)  the bare loop as most code would write it, through the document client's marshalling
 *            (what the fenced path itself did before it built AttributeValues directly)
 *   unfenced BatchWriteItem of the same invoices, 25 a request, no check at all
 *
 * Each round runs them on fresh tables, in rotating order, after a warm-up; the figures are medians with min–max
 * over the rounds, and the fenced / bare verdict is the median of the per-round ratios (each round's two runs are
 * neighbours in time). The machine is shared and noisy: trust the ratios more than the absolute numbers.
 * Target: fenced within 10% of bare (fenced / bare ≥ 0.90).
 *
 *   npx tsx bench/write-path.ts [--invoices 50000] [--rounds 3] [--quick]     (the same as bench/run.ts --only write-path)
 */
import { createHash } from 'node:crypto';
import { TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../lib/core/clock';
import { writeInvoices } from '../apps/billing/night';
import { chunkBatches, chunkCount, type Invoice, type NightPlan } from '../apps/billing/invoices';
import { Attr } from '../lib/core/schema';
import type { BillingTables as TableNames } from '../apps/billing/schema';
import { Keys } from '../apps/billing/keys';
import type { Clients } from '../lib/core/aws/clients';
import { fmt, fmtStat, newReport, rotate, stat, table, type BenchContext, type Measurement, type SharedStack } from './common';
import { DynamoJobStore } from '../lib/core/aws/job-store';

const DATE = '2026-09-28';
const JOB = Keys.job(DATE);
const TOKEN = 7;

function* allBatches(plan: NightPlan) {
  for (let c = 0; c < chunkCount(plan); c++) yield* chunkBatches(plan, c);
}

type Variant = (clients: Clients, tables: TableNames, plan: NightPlan) => Promise<number>;

/** The check and the puts, nothing else, as AttributeValues. */
function bareItems(t: TableNames, batch: readonly Invoice[]): TransactWriteItem[] {
  const token = { N: String(TOKEN) };
  return [
    {
      ConditionCheck: { TableName: t.jobs, Key: { pk: { S: JOB } }, ConditionExpression: 'fence <= :t', ExpressionAttributeValues: { ':t': token } },
    },
    ...batch.map((inv): TransactWriteItem => ({
      Put: {
        TableName: t.invoices,
        Item: { pk: { S: inv.pk }, customer: { S: inv.customer }, amount: { N: String(inv.amount) }, token },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    })),
  ];
}

const variants: Record<string, Variant> = {
  async fenced(c, t, plan) {
    const deps = { jobs: new DynamoJobStore(c.ddb, t.jobs), invoices: t.invoices, clock: systemClock };
    let n = 0;
    for (const batch of allBatches(plan)) n += (await writeInvoices(deps, JOB, TOKEN, batch)).transactions;
    return n;
  },
  async bare(c, t, plan) {
    let n = 0;
    for (const batch of allBatches(plan)) {
      await c.ddb.send(new TransactWriteItemsCommand({ TransactItems: bareItems(t, batch) }));
      n++;
    }
    return n;
  },
  async 'bare+token'(c, t, plan) {
    let n = 0;
    for (const batch of allBatches(plan)) {
      const h = createHash('sha256').update(`${t.jobs}|${t.invoices}|${JOB}|${TOKEN}`);
      for (const inv of batch) h.update(`|${inv.pk}`);
      await c.ddb.send(new TransactWriteItemsCommand({ ClientRequestToken: h.digest('hex').slice(0, 36), TransactItems: bareItems(t, batch) }));
      n++;
    }
    return n;
  },
  async 'bare (document client)'(c, t, plan) {
    let n = 0;
    for (const batch of allBatches(plan)) {
      await c.ddb.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              ConditionCheck: { TableName: t.jobs, Key: { pk: JOB }, ConditionExpression: 'fence <= :t', ExpressionAttributeValues: { ':t': TOKEN } },
            },
            ...batch.map((inv) => ({
              Put: {
                TableName: t.invoices,
                Item: { pk: inv.pk, customer: inv.customer, amount: inv.amount, token: TOKEN },
                ConditionExpression: 'attribute_not_exists(pk)',
              },
            })),
          ],
        }),
      );
      n++;
    }
    return n;
  },
  async unfenced(c, t, plan) {
    let n = 0;
    for (const batch of allBatches(plan)) {
      for (let i = 0; i < batch.length; i += 25) {
        let items: Record<string, unknown>[] | undefined = batch
          .slice(i, i + 25)
          .map((inv) => ({ PutRequest: { Item: { pk: inv.pk, customer: inv.customer, amount: inv.amount, token: TOKEN } } }));
        while (items && items.length > 0) {
          const out = await c.ddb.send(new BatchWriteCommand({ RequestItems: { [t.invoices]: items as never } }));
          items = out.UnprocessedItems?.[t.invoices] as Record<string, unknown>[] | undefined;
          n++;
        }
      }
    }
    return n;
  },
};

async function once(stack: SharedStack, name: string, plan: NightPlan): Promise<{ ips: number; requests: number; seconds: number }> {
  const ns = await stack.namespace(`wp${name.slice(0, 2)}`);
  try {
    await stack.clients.ddb.send(new PutCommand({ TableName: ns.tables.jobs, Item: { [Attr.pk]: JOB, [Attr.fence]: TOKEN } }));
    const t0 = performance.now();
    const requests = await variants[name](stack.clients, ns.tables, plan);
    const seconds = (performance.now() - t0) / 1000;
    return { ips: plan.invoices / seconds, requests, seconds };
  } finally {
    await stack.drop(ns);
  }
}

export const writePath: Measurement = {
  name: 'write-path',
  title: '1. Write path: fenced writer vs a bare TransactWriteItems loop vs unfenced BatchWriteItem',
  fullMinutes: 12,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const invoices = Number(ctx.options.invoices ?? (ctx.quick ? 5_000 : 50_000));
    const plan: NightPlan = { date: DATE, invoices, chunkSize: 5_000, putsPerTransaction: 99 };
    const names = Object.keys(variants);
    const warm = Math.min(10_000, invoices);
    const rounds = ctx.quick ? ctx.rounds : Math.max(5, ctx.rounds);
    ctx.log(`write-path: warm-up (${fmt(warm)} invoices each) ...`);
    for (const n of names) await once(stack, n, { ...plan, invoices: warm });
    const results: Record<string, { ips: number[]; requests: number }> = Object.fromEntries(names.map((n) => [n, { ips: [], requests: 0 }]));
    for (let r = 1; r <= rounds; r++) {
      for (const n of rotate(names, r)) {
        const res = await once(stack, n, plan);
        results[n].ips.push(res.ips);
        results[n].requests = res.requests;
        ctx.log(
          `write-path: round ${r}/${rounds} ${n.padEnd(22)} ${res.seconds.toFixed(1)} s  ${Math.round(res.ips)} invoices/s  (${res.requests} requests)`,
        );
      }
    }
    const m = Object.fromEntries(names.map((n) => [n, stat(results[n].ips)]));
    report.blocks.push(
      `${fmt(invoices)} invoices, ${rounds} round(s) after a ${fmt(warm)}-invoice warm-up of each, one request in flight, DynamoDB Local; medians (min–max)\n` +
        table(
          ['variant', 'invoices/s', 'requests', 'ratio of medians to bare', 'per-round ratio to bare: median (min–max)'],
          names.map((n) => {
            const pr = stat(results[n].ips.map((x, i) => x / results.bare.ips[i]));
            return [
              n,
              fmtStat(m[n]),
              fmt(results[n].requests),
              (m[n].median / m.bare.median).toFixed(3),
              `${pr.median.toFixed(3)} (${pr.min.toFixed(2)}–${pr.max.toFixed(2)})`,
            ];
          }),
        ),
    );
    const ratios = results.fenced.ips.map((x, i) => x / results.bare.ips[i]);
    const ratio = stat(ratios).median;
    report.verdicts.push({
      measurement: this.name,
      what: 'fenced / bare (invoices/s), median of per-round ratios',
      figure: `${ratio.toFixed(3)} (per-round ${ratios.map((x) => x.toFixed(2)).join(', ')}; ratio of medians ${(m.fenced.median / m.bare.median).toFixed(3)})`,
      target: '≥ 0.90',
      met: ratio >= 0.9,
    });
    const tokenRatio = stat(results['bare+token'].ips.map((x, i) => x / results.bare.ips[i])).median;
    report.verdicts.push({
      measurement: this.name,
      what: 'bare+token / bare: what the ClientRequestToken alone costs on DynamoDB Local',
      figure: tokenRatio.toFixed(3),
      target: 'informational',
      met: undefined,
    });
    const docRatio = stat(results.fenced.ips.map((x, i) => x / results['bare (document client)'].ips[i])).median;
    report.verdicts.push({
      measurement: this.name,
      what: 'fenced / bare through the document client (how most code would write the loop)',
      figure: docRatio.toFixed(3),
      target: 'informational',
      met: undefined,
    });
    report.verdicts.push({
      measurement: this.name,
      what: 'fenced / unfenced (invoices/s)',
      figure: (m.fenced.median / m.unfenced.median).toFixed(3),
      target: 'informational: the price of the fence and of recording each invoice once',
      met: undefined,
    });
    Object.assign(report.data, { invoices, rounds, results });
    return report;
  },
};

/**
 * Benchmark (not a test): the cost of fencing, measured side by side on one DynamoDB Local in one run.
 *
 *   fenced   the project's write path: fence.writeBatch over the night's batches (1 ConditionCheck + 99 Puts,
 *            attribute_not_exists on each put, cancellation reasons read, ClientRequestToken)
 *   bare     a bare TransactWriteItems loop of the same transactions (the same check and puts, nothing else)
 *   unfenced BatchWriteItem of the same invoices, 25 a request, no check at all
 *
 * Each round runs the three on fresh tables, in rotating order, after a warm-up; the figures are medians with
 * min–max over the rounds. The machine is shared and noisy: trust the ratios more than the absolute numbers.
 *
 *   npx tsx bench/write-path.ts [--invoices 50000] [--rounds 3]
 */
import { parseArgs } from 'node:util';
import { BatchWriteCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../lib/core/clock';
import * as fence from '../lib/core/fence';
import { chunkBatches, chunkCount, type NightPlan } from '../lib/core/invoices';
import { Attr, Keys, tableNames } from '../lib/core/schema';
import { localClients, type Clients } from '../lib/core/stores';
import { provision } from '../local/provision';
import { startEmbeddedStack } from '../local/stack';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const { values } = parseArgs({ options: { invoices: { type: 'string', default: '50000' }, rounds: { type: 'string', default: '3' } } });
const DATE = '2026-09-28';
const JOB = Keys.job(DATE);
const TOKEN = 7;
const plan: NightPlan = { date: DATE, invoices: Number(values.invoices), chunkSize: 5_000, putsPerTransaction: 99 };

function* allBatches() {
  for (let c = 0; c < chunkCount(plan); c++) yield* chunkBatches(plan, c);
}

type Variant = (clients: Clients, tables: ReturnType<typeof tableNames>) => Promise<number>;

const variants: Record<string, Variant> = {
  async fenced(c, t) {
    const deps = { ddb: c.ddb, jobs: t.jobs, invoices: t.invoices, clock: systemClock };
    let n = 0;
    for (const batch of allBatches()) n += (await fence.writeBatch(deps, JOB, TOKEN, batch)).transactions;
    return n;
  },
  async bare(c, t) {
    let n = 0;
    for (const batch of allBatches()) {
      await c.ddb.send(new TransactWriteCommand({
        TransactItems: [
          { ConditionCheck: { TableName: t.jobs, Key: { pk: JOB }, ConditionExpression: 'fence <= :t', ExpressionAttributeValues: { ':t': TOKEN } } },
          ...batch.map((inv) => ({ Put: { TableName: t.invoices, Item: { pk: inv.pk, customer: inv.customer, amount: inv.amount, token: TOKEN }, ConditionExpression: 'attribute_not_exists(pk)' } })),
        ],
      }));
      n++;
    }
    return n;
  },
  async unfenced(c, t) {
    let n = 0;
    for (const batch of allBatches()) {
      for (let i = 0; i < batch.length; i += 25) {
        let items: Record<string, unknown>[] | undefined = batch.slice(i, i + 25).map((inv) => ({ PutRequest: { Item: { pk: inv.pk, customer: inv.customer, amount: inv.amount, token: TOKEN } } }));
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

async function once(clients: Clients, name: string, round: number): Promise<{ ips: number; requests: number; seconds: number }> {
  const prefix = `bench${round}${name}-`;
  await provision(clients.raw, clients.s3, prefix, `bench${round}${name}`);
  const tables = tableNames(prefix);
  await clients.ddb.send(new PutCommand({ TableName: tables.jobs, Item: { [Attr.pk]: JOB, [Attr.fence]: TOKEN } }));
  const t0 = performance.now();
  const requests = await variants[name](clients, tables);
  const seconds = (performance.now() - t0) / 1000;
  return { ips: plan.invoices / seconds, requests, seconds };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const stack = await startEmbeddedStack();
  const clients = localClients(stack.endpoints);
  try {
    const names = Object.keys(variants);
    process.stderr.write(`warm-up (5,000 invoices each) ...\n`);
    const full = plan.invoices;
    (plan as { invoices: number }).invoices = 5_000;
    for (const n of names) await once(clients, n, 0);
    (plan as { invoices: number }).invoices = full;
    const results: Record<string, { ips: number[]; requests: number }> = Object.fromEntries(names.map((n) => [n, { ips: [], requests: 0 }]));
    const rounds = Number(values.rounds);
    for (let r = 1; r <= rounds; r++) {
      const order = names.map((_, i) => names[(i + r) % names.length]); // rotate, so no variant always goes first
      for (const n of order) {
        const res = await once(clients, n, r);
        results[n].ips.push(res.ips);
        results[n].requests = res.requests;
        process.stderr.write(`round ${r}/${rounds} ${n.padEnd(8)} ${res.seconds.toFixed(1)} s  ${Math.round(res.ips)} invoices/s  (${res.requests} requests)\n`);
      }
    }
    const rows = names.map((n) => ({ variant: n, median: median(results[n].ips), min: Math.min(...results[n].ips), max: Math.max(...results[n].ips), requests: results[n].requests }));
    console.log(`\nwrite path, ${plan.invoices.toLocaleString('en-US')} invoices, ${rounds} rounds, one request in flight, DynamoDB Local`);
    console.log('variant   invoices/s (median)   min–max          requests');
    for (const r of rows) console.log(`${r.variant.padEnd(9)} ${String(Math.round(r.median)).padStart(19)}   ${Math.round(r.min)}–${Math.round(r.max)}`.padEnd(50) + `${r.requests}`);
    const m = Object.fromEntries(rows.map((r) => [r.variant, r.median]));
    console.log(`\nfenced / bare      = ${(m.fenced / m.bare).toFixed(3)}   (target ≥ 0.90: the project's path within 10% of the bare loop)`);
    console.log(`fenced / unfenced  = ${(m.fenced / m.unfenced).toFixed(3)}   (the price of the fence and of recording each invoice once)`);
  } finally {
    clients.destroy();
    await stack.stop();
  }
}

main().catch((err) => { console.error(err); process.exitCode = 1; });

/**
 * 10. Chunk concurrency under AWS's transaction-conflict rules, through the conflict proxy (lib/local/dynamodb-proxy.ts).
 *
 * DynamoDB Local never reports a transaction conflict; AWS cancels a transaction that touches an item another
 * in-flight transaction or write touches, including an item it only ConditionChecks. Every case here runs its
 * DynamoDB calls through a proxy of its own that applies that rule (a 5 ms window, as in the tests), so the conflicts
 * a design causes are counted, retried, and paid for in time. Side by side in one run:
 *
 *   A. a whole night through the synthesized workflow on its bundles (`fencepost run --engine stepfunctions`) at
 *      chunk concurrency 1, 4 and 8, with chunk fences: invoices/s over the night, conflicts the proxy raised,
 *      transactions retried, and the audit;
 *   B. the fenced write path of one holder with 4 chunks at once, in this process, the same driver twice: each
 *      chunk checking its own fence item (today) vs every chunk checking the job row (the single fence: "before").
 *      The only difference between the two is the item the ConditionCheck names.
 *
 * Full mode: 1,000,000 invoices per night (200 chunks of 5,000); --quick: 50,000. One round: a night of a million
 * is long, and the figures of interest (conflicts, retries) are counts, not noise-prone timings.
 */
import { audit, auditDeps } from '../apps/billing/audit';
import { type BillingDeps, billingDeps, completeNight, raiseNight, writeInvoices } from '../apps/billing/night';
import { systemClock } from '../lib/core/clock';
import { DEFAULT_BACKOFF, isTransient } from '../lib/core/conditions';
import { DEFAULTS, type BillingConfig } from '../apps/billing/settings';
import { Events } from '../lib/core/events';
import * as fence from '../lib/core/fence';
import { chunkBatches, chunkRange, renderChunkLines, type NightPlan } from '../apps/billing/invoices';
import { claim } from '../lib/core/lease';
import { Keys } from '../apps/billing/keys';
import { localClients } from '../lib/core/aws/clients';
import { startDynamoDbProxy, type DynamoDbProxyStats } from '../lib/local/dynamodb-proxy';
import { fmt, freshDate, newReport, runToEnd, spawnCli, table, type BenchContext, type Measurement, type SharedStack } from './common';
import { DynamoLockStore } from '../lib/core/aws/lock-store';
import { DynamoJobStore } from '../lib/core/aws/job-store';

const WINDOW_MS = 5;

interface Figures {
  readonly label: string;
  readonly seconds: number;
  readonly invoicesPerSecond: number;
  readonly conflicts: number;
  /** Fenced transactions sent beyond one per batch: the retries the conflicts (and anything transient) cost. */
  readonly retried: number;
  /** Batches whose writer gave up after its own retries and had to be sent again from the top. */
  readonly gaveUp: number;
  readonly auditOk: boolean;
}

const conflictsOf = (s: DynamoDbProxyStats) => s.transactionConflicts + s.writeConflicts;

/** A. `fencepost run` through the synthesized workflow (bundles) at a chunk concurrency, through a proxy of its own. */
async function workflowNight(stack: SharedStack, invoices: number, concurrency: number): Promise<Figures> {
  const ns = await stack.namespace(`w${concurrency}`);
  const proxy = await startDynamoDbProxy({ target: stack.rawDynamoDb, conflictWindowMs: WINDOW_MS });
  try {
    const date = freshDate();
    const args = ns.storeArgs().map((a) => (a === stack.endpoints.dynamodb ? proxy.endpoint : a));
    const c = spawnCli([
      'run',
      '--engine',
      'stepfunctions',
      '--chunk-concurrency',
      String(concurrency),
      '--json',
      '--events',
      '--invoices',
      String(invoices),
      '--date',
      date,
      '--worker',
      `cc${concurrency}`,
      ...args,
    ]);
    await runToEnd(c, `fencepost run --chunk-concurrency ${concurrency}`);
    const summary = c.summary() as { outcome: string; transactions: number; invoicesRecorded: number };
    const observe = c.events.find((e) => e.event === 'sighted');
    const completed = c.events.find((e) => e.event === 'completed');
    if (summary?.outcome !== 'completed' || !observe || !completed) throw new Error(`the night did not complete: ${JSON.stringify(summary)}`);
    // Events come from several processes (one per function environment): time the night on this process's clock.
    const seconds = (completed.seenAtMs - observe.seenAtMs) / 1000;
    const batches = batchesOf({ date, invoices, chunkSize: DEFAULTS.chunkSize, putsPerTransaction: 99 });
    const report = await audit(auditDeps(stack.clients, ns.tables, ns.bucket), date, invoices);
    return {
      label: `workflow, ${concurrency} chunk${concurrency > 1 ? 's' : ''} at once`,
      seconds,
      invoicesPerSecond: invoices / seconds,
      conflicts: conflictsOf(proxy.stats()),
      retried: summary.transactions - batches,
      gaveUp: 0,
      auditOk: report.ok,
    };
  } finally {
    await proxy.stop();
    await stack.drop(ns);
  }
}

/**
 * B. One holder, `concurrency` chunks at once, in this process: the core's fenced write (fence.writeBatch) per batch,
 * the chunk object and manifest commit, the chunk marked done; then complete. `checks` names the item every batch
 * of a chunk ConditionChecks: its own fence item, or the job row for every chunk.
 */
async function writePathNight(stack: SharedStack, invoices: number, concurrency: number, checks: 'chunk fence' | 'job row'): Promise<Figures> {
  const ns = await stack.namespace('wp');
  const proxy = await startDynamoDbProxy({ target: stack.rawDynamoDb, conflictWindowMs: WINDOW_MS });
  const clients = localClients({ ...stack.endpoints, dynamodb: proxy.endpoint });
  try {
    const date = freshDate();
    const jobId = Keys.job(date);
    const config: BillingConfig = { ...DEFAULTS, invoices, leaseMs: 60_000, renewMs: 10_000, marginMs: 10_000 };
    const deps: BillingDeps = billingDeps(clients, ns.tables, ns.bucket, systemClock, new Events('bench', systemClock));
    const fenceDeps = { jobs: new DynamoJobStore(clients.ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
    const lease = await claim(
      { locks: new DynamoLockStore(clients.ddb, ns.tables.locks), clock: systemClock, events: deps.events },
      Keys.lock(date),
      'bench',
      config,
    );
    lease.startHeartbeat();
    const night = await raiseNight(deps, lease, date, config);
    const plan: NightPlan = { date, invoices, chunkSize: config.chunkSize, putsPerTransaction: 99 };
    const queue = [...night.chunksToDo];
    let transactions = 0;
    let gaveUp = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let chunk = queue.shift(); chunk !== undefined; chunk = queue.shift()) {
          const fenceKey = checks === 'chunk fence' ? Keys.chunkFence(jobId, chunk) : jobId;
          for (const batch of chunkBatches(plan, chunk)) {
            for (;;) {
              try {
                const r = await writeInvoices(fenceDeps, fenceKey, lease.token, batch);
                transactions += r.transactions; // added after the await: `x += await …` would read x before it
                break;
              } catch (err) {
                // What a Step Functions retry of the chunk task would do, without its waits: send the batch again.
                if (!isTransient(err)) throw err;
                transactions += 1 + DEFAULT_BACKOFF.retries; // every attempt writeBatch made before it gave up
                gaveUp++;
              }
            }
          }
          const object = await night.manifest.putChunkObject(chunk, [...renderChunkLines(plan, chunk, lease.token)].join(''));
          const { first, end } = chunkRange(plan, chunk);
          await night.manifest.commitChunk(chunk, { key: object.key, etag: object.etag, records: end - first });
          await fence.markChunkDone(fenceDeps, jobId, lease.token, chunk);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    await completeNight(deps, lease, night.manifest, date);
    await lease.release();
    const report = await audit(auditDeps(stack.clients, ns.tables, ns.bucket), date, invoices);
    return {
      label: `write path, ${concurrency} at once, every batch checks ${checks === 'chunk fence' ? "its chunk's fence item" : 'the job row'}`,
      seconds,
      invoicesPerSecond: invoices / seconds,
      conflicts: conflictsOf(proxy.stats()),
      retried: transactions - batchesOf(plan),
      gaveUp,
      auditOk: report.ok,
    };
  } finally {
    clients.destroy();
    await proxy.stop();
    await stack.drop(ns);
  }
}

/** One fenced transaction per batch of 99: the count with no retry at all. */
function batchesOf(plan: NightPlan): number {
  let n = 0;
  for (let c = 0; c * plan.chunkSize < plan.invoices; c++) n += [...chunkBatches(plan, c)].length;
  return n;
}

export const concurrency: Measurement = {
  name: 'concurrency',
  title: '10. Chunk concurrency through the conflict proxy: chunk fences at 1/4/8, and the single job-row fence at 4',
  fullMinutes: 30,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const invoices = Number(ctx.options.invoices ?? (ctx.quick ? 50_000 : 1_000_000));
    ctx.log(`concurrency: warm-up (5,000 invoices through the workflow) ...`);
    await workflowNight(stack, 5_000, 2);
    const a: Figures[] = [];
    for (const k of [1, 4, 8]) {
      ctx.log(`concurrency: workflow night of ${fmt(invoices)} at chunk concurrency ${k} ...`);
      a.push(await workflowNight(stack, invoices, k));
      ctx.log(`concurrency:   ${describe(a.at(-1)!)}`);
    }
    const b: Figures[] = [];
    for (const checks of ['job row', 'chunk fence'] as const) {
      ctx.log(`concurrency: write path of ${fmt(invoices)}, 4 chunks at once, checking the ${checks} ...`);
      b.push(await writePathNight(stack, invoices, 4, checks));
      ctx.log(`concurrency:   ${describe(b.at(-1)!)}`);
    }
    const row = (f: Figures) => [
      f.label,
      fmt(f.seconds, 1),
      fmt(f.invoicesPerSecond),
      fmt(f.conflicts),
      fmt(f.retried),
      fmt(f.gaveUp),
      f.auditOk ? 'clean' : 'FAILED',
    ];
    const headers = ['case', 'night s', 'invoices/s', 'conflicts', 'transactions retried', 'batches given up', 'audit'];
    report.blocks.push(
      `${fmt(invoices)} invoices a night (${fmt(invoices / DEFAULTS.chunkSize)} chunks of ${fmt(DEFAULTS.chunkSize)}), each case through its own conflict proxy (window ${WINDOW_MS} ms), one round\n` +
        `A. the synthesized workflow on its bundles, chunk fences\n` +
        table(headers, a.map(row)),
      `B. the fenced write path in one process, 4 chunks at once: the item every batch checks\n` + table(headers, b.map(row)),
    );
    const [one, four, eight] = a;
    const [jobRow, chunkFence] = b;
    report.verdicts.push(
      {
        measurement: this.name,
        what: 'workflow at chunk concurrency 8: conflicts on fence items; audit',
        figure: `${eight.conflicts} conflicts; audit ${eight.auditOk ? 'clean' : 'FAILED'}`,
        target: '0; clean',
        met: eight.conflicts === 0 && eight.auditOk,
      },
      {
        measurement: this.name,
        what: 'workflow invoices/s at chunk concurrency 4 and 8 vs 1',
        figure: `×${fmt(four.invoicesPerSecond / one.invoicesPerSecond, 2)}, ×${fmt(eight.invoicesPerSecond / one.invoicesPerSecond, 2)}`,
        target: 'informational (2 cores, one DynamoDB Local)',
        met: undefined,
      },
      {
        measurement: this.name,
        what: 'single job-row fence at 4 at once: conflicts and retries (the "before")',
        figure: `${jobRow.conflicts} conflicts, ${jobRow.retried} retried, ${jobRow.gaveUp} given up; audit ${jobRow.auditOk ? 'clean' : 'FAILED'}`,
        target: 'conflicts appear, are retried, audit clean',
        met: jobRow.conflicts > 0 && jobRow.auditOk,
      },
      {
        measurement: this.name,
        what: 'chunk fences at 4 at once: conflicts; invoices/s vs the job-row fence',
        figure: `${chunkFence.conflicts} conflicts; ×${fmt(chunkFence.invoicesPerSecond / jobRow.invoicesPerSecond, 2)}`,
        target: '0 conflicts',
        met: chunkFence.conflicts === 0 && chunkFence.auditOk,
      },
    );
    Object.assign(report.data, { invoices, windowMs: WINDOW_MS, workflow: a, writePath: b });
    return report;
  },
};

const describe = (f: Figures) =>
  `${fmt(f.seconds, 1)} s, ${fmt(f.invoicesPerSecond)} invoices/s, ${f.conflicts} conflicts, ${f.retried} retried, ${f.gaveUp} given up, audit ${f.auditOk ? 'clean' : 'FAILED'}`;

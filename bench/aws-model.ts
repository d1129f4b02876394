/**
 * The AWS model's inputs, measured or counted rather than assumed wherever that is possible (docs/PERFORMANCE.md
 * does the arithmetic with them and cites AWS's pages):
 *
 *   - state transitions of one night, counted by running the SYNTHESIZED definition (lib/local/workflow.ts
 *     synthesizeWorkflow()) in aws-local-stepfunctions with stub task handlers: every state entered, Map iterations
 *     included (AWS: "a state transition is counted each time a step in your execution is completed");
 *   - item sizes by AWS's item-size rules (invoice, job row claimed / DONE, lock item);
 *   - the ConsumedCapacity DynamoDB Local reports for one fenced transaction (1 ConditionCheck + 99 Puts), a renewal
 *     and a chunk-progress update on the job row while it is in the sparse index;
 *   - per-transaction latency and the per-chunk tail (chunk object + manifest commit + progress) on the local stack.
 * Prices are NOT in the stored copies of AWS's pricing pages we could read (their rate tables are rendered
 * client-side), so the ones below are marked ASSUMED: check them on the cited pages for your Region.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../lib/core/clock';
import { DEFAULTS } from '../apps/billing/settings';
import { invoiceTransaction, writeInvoices } from '../apps/billing/night';
import * as fence from '../lib/core/fence';
import { chunkBatches, chunkRange, invoiceAt, renderChunkLines, type Invoice, type NightPlan } from '../apps/billing/invoices';
import { ManifestWriter } from '../lib/core/manifest';
import { Attr } from '../lib/core/schema';
import { claimShard, jobNameOf } from '../lib/core/job-keys';
import { InvoiceAttr } from '../apps/billing/schema';
import { Keys } from '../apps/billing/keys';
import { observation, type Observation } from '../lib/lambda/observe';
import { ROOT, fmt, newReport, stat, table, type BenchContext, type Measurement } from './common';
import { App } from 'aws-cdk-lib';
import { billingApp } from '../apps/billing/app';
import { readStackConfig } from '../apps/billing/config';
import { FencepostStack } from '../apps/billing/stack';
// Also installs the Promise.withResolvers polyfill aws-local-stepfunctions needs on Node 20.
import { synthesizeWorkflow } from '../lib/local/workflow';
import { DynamoJobStore } from '../lib/core/aws/job-store';
import { S3ManifestStore } from '../lib/core/aws/manifest-store';

// ---------------------------------------------------------------- item sizes (AWS: "Item sizes and capacity unit consumption")

/** Size of one attribute value by AWS's rules: strings UTF-8 bytes; numbers 1 B per 2 significant digits + 1; sets: the sum. */
function valueSize(v: unknown): number {
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  if (typeof v === 'number') {
    const digits = String(Math.abs(v)).replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length || 1;
    return Math.ceil(digits / 2) + 1;
  }
  if (typeof v === 'boolean' || v === null) return 1;
  if (v instanceof Set) return [...v].reduce((s: number, x) => s + valueSize(x), 0);
  if (Array.isArray(v)) return 3 + v.reduce((s: number, x) => s + valueSize(x), 0);
  if (typeof v === 'object') return 3 + Object.entries(v as object).reduce((s, [k, x]) => s + Buffer.byteLength(k) + valueSize(x), 0);
  return 0;
}

export function itemSize(item: Record<string, unknown>): number {
  return Object.entries(item).reduce((s, [k, v]) => s + Buffer.byteLength(k, 'utf8') + valueSize(v), 0);
}

/** A job row as fence.raise writes it (RUNNING: in the sparse index) or as complete leaves it (DONE). */
export function jobRow(i: number, state: 'RUNNING' | 'DONE'): Record<string, unknown> {
  const row: Record<string, unknown> = {
    [Attr.pk]: jobKey(i),
    [Attr.fence]: 3,
    [Attr.state]: state,
    [Attr.ownerToken]: 3,
    [Attr.owner]: 'f3b1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d', // an execution name (a UUID when EventBridge Scheduler starts it)
    [Attr.chunkCount]: 10, // progress lives on the chunk fence items, not here (docs/DESIGN.md, "Chunk fences")
  };
  if (state === 'RUNNING') {
    row[Attr.claimShard] = claimShard(jobNameOf(jobKey(i)));
    row[Attr.claimedSince] = new Date(Date.UTC(2026, 8, 28, 1, 30) + i * 1000).toISOString();
  }
  return row;
}

/** One job per tenant × night: `billing#<date>#t<tenant>` (today's single-tenant key is `billing#<date>`). */
const jobKey = (i: number) => `billing#2026-09-28#t${String(i).padStart(6, '0')}`;

export function lockItem(i: number): Record<string, unknown> {
  return {
    [Attr.pk]: jobKey(i),
    [Attr.holder]: 'f3b1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
    [Attr.leaseMs]: 10_000,
    [Attr.rvn]: randomUUID(),
    [Attr.epoch]: 3,
    [Attr.renewedAt]: new Date().toISOString(),
  };
}

// ---------------------------------------------------------------- state transitions of the synthesized definition

async function countTransitions(): Promise<Record<string, { total: number; byState: Record<string, number> }>> {
  const { StateMachine } = await import('aws-local-stepfunctions');
  const wf = synthesizeWorkflow(billingApp);
  // What each Observe reads: the rvn of the lock item (undefined: free). The stub runs the real claim rule on it
  // (lib/lambda/observe.ts observation()), so the count follows the definition and the rule, Wait seconds included.
  const dead = () => 'r1';
  const aliveFor = (observes: number) => (i: number) => (i < observes ? `r${i}` : 'last');
  const scenarios: Record<string, { rvnAt: (i: number) => string | undefined; claims: boolean[]; alreadyDone?: boolean }> = {
    'lock free (a normal night)': { rvnAt: () => undefined, claims: [true] },
    'a dead holder watched out (takeover, 10 s lease)': { rvnAt: dead, claims: [true] },
    'holder alive 30 s, then watched out': { rvnAt: aliveFor(30), claims: [true] },
    'duplicate trigger, night already DONE at the raise': { rvnAt: () => undefined, claims: [true], alreadyDone: true },
  };
  const out: Record<string, { total: number; byState: Record<string, number> }> = {};
  for (const [name, sc] of Object.entries(scenarios)) {
    let o = 0,
      c = 0;
    const handlers: Record<string, (input: unknown) => unknown> = {
      Prepare: () => ({ jobDate: '2026-09-28', holder: 'exec-1' }),
      Observe: (input) => {
        const rvn = sc.rvnAt(o++);
        const seen = rvn === undefined ? { waitMs: 0 } : { holder: 'exec-0', epoch: 1, seenRvn: rvn, waitMs: DEFAULTS.leaseMs };
        return observation((input as { previous?: Partial<Observation> }).previous, false, seen, DEFAULTS);
      },
      Claim: () => (sc.claims[Math.min(c++, sc.claims.length - 1)] ? { claimed: true, token: 2 } : { claimed: false }),
      RaiseFence: () => (sc.alreadyDone ? { alreadyDone: true, chunks: [] } : { alreadyDone: false, chunks: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] }),
      BillChunk: (input) => ({ chunk: (input as { chunk: number }).chunk, recorded: 5000, alreadyRecorded: 0, transactions: 51 }),
      Complete: () => ({ ok: true }),
      ReleaseAfterFailure: () => ({ released: true }),
    };
    const taskResourceLocalHandlers = Object.fromEntries(
      Object.keys(wf.taskHandlers).map((state) => [state, async (input: unknown) => handlers[state](input)]),
    );
    const machine = new StateMachine(wf.definition as never, { validationOptions: { checkArn: false } });
    const execution = machine.run({ jobDate: '2026-09-28' } as never, {
      overrides: { taskResourceLocalHandlers: taskResourceLocalHandlers as never, waitTimeOverrides: { WatchTheLease: 0 } },
      context: { Execution: { Id: 'local:exec-1', Name: 'exec-1', Input: { jobDate: '2026-09-28' }, StartTime: new Date().toISOString() } } as never,
    });
    const byState: Record<string, number> = {};
    let total = 0;
    const watch = (async () => {
      for await (const ev of execution.eventLogs as AsyncIterable<{ type: string; state?: { name: string } }>) {
        if (ev.type === 'StateEntered' && ev.state) {
          total++;
          byState[ev.state.name] = (byState[ev.state.name] ?? 0) + 1;
        }
      }
    })();
    await execution.result;
    await watch;
    out[name] = { total, byState };
  }
  return out;
}

/**
 * The sweeper's state machine, synthesized the same way lib/local/workflow.ts synthesizes the billing one (cdk.json's
 * context, asset bundling skipped; function ARNs become placeholders), then run with stub tasks.
 */
async function countSweeperTransitions(): Promise<Record<string, number>> {
  const { StateMachine } = await import('aws-local-stepfunctions');
  const cdkJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };
  const app = new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new FencepostStack(app, 'Fencepost', { config: readStackConfig(app) });
  const template = app.synth().getStackByName(stack.stackName).template as { Resources: Record<string, { Properties: Record<string, unknown> }> };
  const id = stack.getLogicalId(stack.billing.sweeper.stateMachine.node.defaultChild as never);
  const resolve = (v: unknown): string => {
    if (typeof v === 'string') return v;
    const o = v as Record<string, unknown>;
    if (o['Fn::Join']) {
      const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
      return parts.map(resolve).join(sep);
    }
    if (o['Fn::GetAtt']) return `arn:aws:lambda:us-east-1:000000000000:function:${(o['Fn::GetAtt'] as string[])[0]}`;
    if (o.Ref) return String(o.Ref);
    throw new Error(`cannot resolve ${JSON.stringify(v)}`);
  };
  const definition = JSON.parse(resolve(template.Resources[id].Properties.DefinitionString)) as { States: Record<string, { Type: string }> };
  const out: Record<string, number> = {};
  for (const claimed of [0, 3]) {
    const handlers = Object.fromEntries(
      Object.entries(definition.States)
        .filter(([, st]) => st.Type === 'Task')
        .map(([name]) => [
          name,
          async () =>
            name.startsWith('Sight')
              ? { claimed, sightings: [], waitSeconds: 0 }
              : { orphans: 0, storm: false, requeued: [], deferred: 0, alive: claimed },
        ]),
    );
    const machine = new StateMachine(definition as never, { validationOptions: { checkArn: false } });
    const execution = machine.run({} as never, { overrides: { taskResourceLocalHandlers: handlers as never } });
    let n = 0;
    const watch = (async () => {
      for await (const ev of execution.eventLogs as AsyncIterable<{ type: string }>) if (ev.type === 'StateEntered') n++;
    })();
    await execution.result;
    await watch;
    out[claimed === 0 ? 'nothing claimed' : 'rows claimed (sight, wait a lease, verify)'] = n;
  }
  return out;
}

// ---------------------------------------------------------------- prices: ASSUMED (see the module comment)

const ASSUMED = {
  region: 'us-east-1 (US East, N. Virginia)',
  /** DynamoDB on-demand, Standard table class, per million write request units. */
  wruPerMillion: 0.625,
  /** DynamoDB on-demand, per million read request units. */
  rruPerMillion: 0.125,
  /** Step Functions Standard, per 1,000 state transitions (beyond the 4,000 a month of the free tier). */
  sfnPerThousandTransitions: 0.025,
  /** Lambda, Arm, first pricing tier, per GB-second. */
  lambdaArmPerGbSecond: 0.0000133334,
  /** Lambda, per million requests. */
  lambdaPerMillionRequests: 0.2,
} as const;

// ---------------------------------------------------------------- the measurement

export const awsModel: Measurement = {
  name: 'aws-model',
  title: '9. Inputs of the AWS model: state transitions, item sizes, consumed capacity, per-transaction latency',
  fullMinutes: 2,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    // 1. transitions
    const transitions = await countTransitions();
    const sweeperTransitions = await countSweeperTransitions();
    report.blocks.push(
      'state transitions of one execution of the synthesized definition (states entered, Map iterations included; 10 chunks)\n' +
        table(
          ['scenario', 'transitions', 'states entered'],
          Object.entries(transitions).map(([k, v]) => [
            k,
            String(v.total),
            Object.entries(v.byState)
              .map(([s, n]) => (n > 1 ? `${s}×${n}` : s))
              .join(' '),
          ]),
          [0, 2],
        ),
      'state transitions of one execution of the synthesized sweeper state machine: ' +
        Object.entries(sweeperTransitions)
          .map(([k, v]) => `${k}: ${v}`)
          .join('; '),
    );
    // 2. item sizes
    const date = '2026-09-28';
    const inv = invoiceAt(date, 12_345, 5);
    const sizes = {
      invoice: itemSize({ [Attr.pk]: inv.pk, [InvoiceAttr.customer]: inv.customer, [InvoiceAttr.amount]: inv.amount, [InvoiceAttr.token]: 12 }),
      jobClaimed: itemSize(jobRow(0, 'RUNNING')),
      jobDone: itemSize(jobRow(0, 'DONE')),
      lock: itemSize(lockItem(0)),
    };
    // 3. consumed capacity on DynamoDB Local, and per-transaction latency / chunk tail
    const stack = await ctx.stack();
    const ns = await stack.namespace('am');
    let capacity: Record<string, unknown>;
    const txMs: number[] = [];
    const tailMs: number[] = [];
    try {
      const job = Keys.job(date);
      const ddb = stack.clients.ddb;
      await ddb.send(new PutCommand({ TableName: ns.tables.jobs, Item: { ...jobRow(0, 'RUNNING'), [Attr.pk]: job } }));
      await ddb.send(
        new PutCommand({ TableName: ns.tables.locks, Item: { ...lockItem(0), [Attr.pk]: Keys.lock(date), [Attr.holder]: 'me', [Attr.epoch]: 3 } }),
      );
      const plan: NightPlan = { date, invoices: 50_000, chunkSize: 5_000, putsPerTransaction: 99 };
      const batch: Invoice[] = chunkBatches(plan, 9).next().value!;
      const tx = await ddb.send(
        new TransactWriteItemsCommand({
          ...invoiceTransaction({ jobs: new DynamoJobStore(ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock }, job, 3, batch),
          ReturnConsumedCapacity: 'INDEXES',
        }),
      );
      const renew = await ddb.send(
        new UpdateCommand({
          TableName: ns.tables.locks,
          Key: { pk: Keys.lock(date) },
          ConditionExpression: 'holder = :me AND epoch = :e',
          UpdateExpression: 'SET rvn = :rvn, renewed_at = :w',
          ExpressionAttributeValues: { ':me': 'me', ':e': 3, ':rvn': randomUUID(), ':w': new Date().toISOString() },
          ReturnConsumedCapacity: 'INDEXES',
        }),
      );
      // Each chunk has its own fence item (docs/DESIGN.md, "Chunk fences"); its progress is recorded on it.
      const deps = { jobs: new DynamoJobStore(ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
      const measureChunks = ctx.quick ? [2] : [2, 3, 4, 5];
      await fence.raiseChunkFences(deps, job, 3, [0, 1, 7, ...measureChunks]);
      const progress = await ddb.send(
        new UpdateCommand({
          TableName: ns.tables.jobs,
          Key: { pk: Keys.chunkFence(job, 7) },
          ConditionExpression: 'fence = :t',
          UpdateExpression: 'SET done_by = :t',
          ExpressionAttributeValues: { ':t': 3 },
          ReturnConsumedCapacity: 'INDEXES',
        }),
      );
      capacity = { transaction: tx.ConsumedCapacity, renew: renew.ConsumedCapacity, chunkProgress: progress.ConsumedCapacity };
      // per-transaction latency (one in flight), after the JVM has warmed up on two chunks
      for (const c of [0, 1]) for (const b of chunkBatches(plan, c)) await writeInvoices(deps, Keys.chunkFence(job, c), 3, b);
      const { writer } = await ManifestWriter.raiseAt(
        { manifests: new S3ManifestStore(stack.clients.s3, ns.bucket), clock: systemClock },
        Keys.manifestPlace(date),
        job,
        3,
      );
      for (const c of measureChunks) {
        for (const b of chunkBatches(plan, c)) {
          const t0 = performance.now();
          await writeInvoices(deps, Keys.chunkFence(job, c), 3, b);
          txMs.push(performance.now() - t0);
        }
        const t0 = performance.now();
        const object = await writer.putChunkObject(c, [...renderChunkLines(plan, c, 3)].join(''));
        const { first, end } = chunkRange(plan, c);
        await writer.commitChunk(c, { key: object.key, etag: object.etag, records: end - first });
        await fence.markChunkDone(deps, job, 3, c);
        tailMs.push(performance.now() - t0);
      }
    } finally {
      await stack.drop(ns);
    }
    const tx = stat(txMs),
      tail = stat(tailMs);
    report.blocks.push(
      "item sizes by AWS's rules (bytes)\n" +
        table(
          ['item', 'bytes'],
          Object.entries(sizes).map(([k, v]) => [k, String(v)]),
        ),
      'ConsumedCapacity as DynamoDB Local reports it (ReturnConsumedCapacity INDEXES): ' + JSON.stringify(capacity),
      `one fenced transaction (1 check + 99 puts), one in flight, on DynamoDB Local: ${fmt(tx.median, 1)} ms median (${fmt(tx.min, 1)}–${fmt(tx.max, 1)}, ${tx.n} transactions); ` +
        `chunk tail (render + chunk object PUT + manifest commit + progress update): ${fmt(tail.median, 1)} ms median (${fmt(tail.min, 1)}–${fmt(tail.max, 1)}, ${tail.n} chunks)`,
    );
    // 4. the arithmetic the doc shows, from the figures above (prices ASSUMED)
    const normal = transitions['lock free (a normal night)'].total;
    const idleSweep = sweeperTransitions['nothing claimed'];
    const wru = 50_000 * 2 + 510 * 2;
    const chunkSeconds = (51 * tx.median + tail.median) / 1000;
    report.blocks.push(
      `model, prices ASSUMED for ${ASSUMED.region}:\n` +
        `  fenced transactions' WRUs per night = 50,000 puts × 2 + 510 checks × 2 = ${fmt(wru)} → $${((wru / 1e6) * ASSUMED.wruPerMillion).toFixed(4)} a night, $${((wru / 1e6) * ASSUMED.wruPerMillion * 365).toFixed(2)} a year\n` +
        `  state transitions per normal night = ${normal} → $${((normal / 1000) * ASSUMED.sfnPerThousandTransitions).toFixed(5)} a night\n` +
        `  chunk Lambda duration (local figure) ≈ 51 × ${fmt(tx.median, 1)} ms + ${fmt(tail.median, 1)} ms = ${chunkSeconds.toFixed(2)} s\n` +
        `  sweeper with nothing claimed = ${idleSweep} transitions a run; rate(1 minute) = ${fmt(idleSweep * 1440 * 365)} a year → $${(((idleSweep * 1440 * 365) / 1000) * ASSUMED.sfnPerThousandTransitions).toFixed(2)}; ` +
        `only 01:00–06:59 (cron(* 1-6 * * ? *)) = ${fmt(idleSweep * 360 * 365)} → $${(((idleSweep * 360 * 365) / 1000) * ASSUMED.sfnPerThousandTransitions).toFixed(2)} (before the free tier)`,
    );
    report.verdicts.push(
      {
        measurement: this.name,
        what: 'state transitions per normal night (counted on the synthesized definition)',
        figure: String(normal),
        target: 'informational',
        met: undefined,
      },
      {
        measurement: this.name,
        what: 'fenced transaction latency on DynamoDB Local (1 in flight)',
        figure: `${fmt(tx.median, 1)} ms`,
        target: 'informational',
        met: undefined,
      },
    );
    Object.assign(report.data, { transitions, sweeperTransitions, sizes, capacity, txMs: tx, tailMs: tail, assumed: ASSUMED });
    return report;
  },
};

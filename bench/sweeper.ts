/**
 * 4. Sweeper cost: what one sweep reads to find the claimed (RUNNING) job rows among many finished ones.
 *
 * One job table holds 100,000 DONE rows (no claim_shard / claimed_since: completion removed them) and 100 claimed
 * rows (RUNNING, in the sparse GSI `claimed`), all written with BatchWriteItem; then 900 more claimed rows are added
 * (1,000 claimed). For each population, side by side in rotating order:
 *
 *   query         the sparse index: Query IndexName=claimed, claim_shard = :shard, every page (what the sweeper is
 *                 specified to make, design §4 / reference Part 6);
 *   query+verify  the same Query, then for each claimed row a strongly consistent GetItem on its lock item (the
 *                 sweeper asks the authority whether the lease is alive), 16 in flight;
 *   scan          a full Scan of the job table with FilterExpression attribute_exists(claim_shard);
 *   Sweeper.sweep the real sweep (lib/core/sweeper.ts, when it exists): sightClaimed's Query and, per row, a
 *                 GetItem on its lock item, one at a time; the decision; no write here (nothing is a full lease old
 *                 yet, or every row looks dead at once: a storm, which re-queues none).
 *
 * Items read = ScannedCount summed over pages (a Scan reads every row; the filter only trims what is returned).
 * Target: items read grow with the claimed rows only (100 vs 1,000 claimed, 100,000 DONE).
 */
import { systemClock } from '../lib/core/clock';
import { Sweeper, sightClaimed } from '../lib/core/sweeper';
import { BatchWriteCommand, GetCommand, QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { Attr, JOB_TABLE } from '../lib/core/schema';
import { claimShard } from '../lib/core/job-keys';
import { BILLING_JOB as BILLING } from '../apps/billing/keys';
import { itemSize, jobRow, lockItem } from './aws-model';
import { fmt, fmtStat, newReport, rotate, stat, table, type BenchContext, type Measurement, type Namespace, type SharedStack } from './common';
import { awsStores } from '../lib/core/aws/stores';

const INDEX = JOB_TABLE.sparseIndex!.name;

interface Sweep {
  ms: number;
  pages: number;
  read: number;
  returned: number;
  capacity: number | undefined;
}

async function batchWrite(stack: SharedStack, tableName: string, items: Record<string, unknown>[], inFlight = 8): Promise<void> {
  const requests: Record<string, unknown>[][] = [];
  for (let i = 0; i < items.length; i += 25) requests.push(items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })));
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= requests.length) return;
      let pending: Record<string, unknown>[] | undefined = requests[i];
      while (pending && pending.length > 0) {
        const out = await stack.clients.ddb.send(new BatchWriteCommand({ RequestItems: { [tableName]: pending as never } }));
        pending = out.UnprocessedItems?.[tableName] as Record<string, unknown>[] | undefined;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

async function sweepQuery(stack: SharedStack, ns: Namespace, verify: boolean): Promise<Sweep> {
  const t0 = performance.now();
  let pages = 0,
    read = 0,
    returned = 0,
    capacity = 0,
    sawCapacity = false;
  let start: Record<string, unknown> | undefined;
  const rows: Record<string, unknown>[] = [];
  do {
    const out = await stack.clients.ddb.send(
      new QueryCommand({
        TableName: ns.tables.jobs,
        IndexName: INDEX,
        KeyConditionExpression: '#shard = :shard',
        ExpressionAttributeNames: { '#shard': Attr.claimShard },
        ExpressionAttributeValues: { ':shard': claimShard(BILLING) },
        ExclusiveStartKey: start,
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    pages++;
    read += out.ScannedCount ?? 0;
    returned += out.Count ?? 0;
    if (out.ConsumedCapacity?.CapacityUnits !== undefined) {
      capacity += out.ConsumedCapacity.CapacityUnits;
      sawCapacity = true;
    }
    rows.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start);
  if (verify) {
    let next = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= rows.length) return;
        await stack.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { [Attr.pk]: rows[i][Attr.pk] }, ConsistentRead: true }));
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
  }
  return { ms: performance.now() - t0, pages, read, returned, capacity: sawCapacity ? capacity : undefined };
}

async function sweepScan(stack: SharedStack, ns: Namespace): Promise<Sweep> {
  const t0 = performance.now();
  let pages = 0,
    read = 0,
    returned = 0,
    capacity = 0,
    sawCapacity = false;
  let start: Record<string, unknown> | undefined;
  do {
    const out = await stack.clients.ddb.send(
      new ScanCommand({
        TableName: ns.tables.jobs,
        FilterExpression: 'attribute_exists(#shard)',
        ExpressionAttributeNames: { '#shard': Attr.claimShard },
        ExclusiveStartKey: start,
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    pages++;
    read += out.ScannedCount ?? 0;
    returned += out.Count ?? 0;
    if (out.ConsumedCapacity?.CapacityUnits !== undefined) {
      capacity += out.ConsumedCapacity.CapacityUnits;
      sawCapacity = true;
    }
    start = out.LastEvaluatedKey;
  } while (start);
  return { ms: performance.now() - t0, pages, read, returned, capacity: sawCapacity ? capacity : undefined };
}

const VARIANTS = ['query', 'query+verify', 'scan', 'Sweeper.sweep'] as const;
type V = (typeof VARIANTS)[number];

/** The real sweep (lib/core/sweeper.ts). */
async function realSweep(sweeper: Sweeper): Promise<Sweep> {
  const t0 = performance.now();
  const r = await sweeper.sweep();
  return { ms: performance.now() - t0, pages: NaN, read: r.itemsRead, returned: r.claimed, capacity: undefined };
}

export const sweeper: Measurement = {
  name: 'sweeper',
  title: '4. Sweeper cost: the sparse index (Query on GSI claimed) vs a full Scan with a filter',
  fullMinutes: 4,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const done = ctx.quick ? 10_000 : 100_000;
    let payloadBytesPerRow: number | undefined;
    const ns = await stack.namespace('sw');
    try {
      ctx.log(`sweeper: writing ${fmt(done)} DONE rows and 100 claimed rows (BatchWriteItem, 8 in flight) ...`);
      const t0 = performance.now();
      await batchWrite(
        stack,
        ns.tables.jobs,
        Array.from({ length: done }, (_, i) => jobRow(i, 'DONE')),
      );
      const writeSeconds = (performance.now() - t0) / 1000;
      const claimedRows = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => jobRow(done + from + i, 'RUNNING'));
      const lockRows = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => lockItem(done + from + i));
      await batchWrite(stack, ns.tables.jobs, claimedRows(0, 100));
      await batchWrite(stack, ns.tables.locks, lockRows(0, 100));
      const results: Record<string, Record<V, Sweep[]>> = {};
      for (const claimed of [100, 1_000]) {
        if (claimed === 1_000) {
          await batchWrite(stack, ns.tables.jobs, claimedRows(100, 1_000));
          await batchWrite(stack, ns.tables.locks, lockRows(100, 1_000));
        }
        const key = `${claimed}`;
        results[key] = { query: [], 'query+verify': [], scan: [], 'Sweeper.sweep': [] };
        const sweeperDeps = { job: BILLING, ...awsStores(stack.clients, ns.tables), clock: systemClock };
        const sw = new Sweeper(sweeperDeps);
        // What the cloud sweeper's SightClaimed Lambda returns into the state machine's data (256 KB at most).
        const { sightings } = await sightClaimed(sweeperDeps, { leaseMs: 10_000 });
        const payload = JSON.stringify({ claimed: sightings.length, sightings, waitSeconds: 10 });
        payloadBytesPerRow = Buffer.byteLength(payload) / sightings.length;
        for (const v of VARIANTS) await run(v, sw); // warm-up
        const rounds = Math.max(ctx.rounds, ctx.quick ? 1 : 3);
        for (let r = 1; r <= rounds; r++) for (const v of rotate(VARIANTS, r)) results[key][v].push(await run(v, sw));
        ctx.log(
          `sweeper: ${fmt(claimed)} claimed: query ${fmt(stat(results[key].query.map((x) => x.ms)).median)} ms, scan ${fmt(stat(results[key].scan.map((x) => x.ms)).median)} ms`,
        );
      }
      async function run(v: V, sw: Sweeper): Promise<Sweep> {
        if (v === 'Sweeper.sweep') return realSweep(sw);
        return v === 'scan' ? sweepScan(stack, ns) : sweepQuery(stack, ns, v === 'query+verify');
      }
      const rows: string[][] = [];
      for (const [claimed, byV] of Object.entries(results)) {
        for (const v of VARIANTS) {
          const xs = byV[v];
          rows.push([
            `${fmt(Number(claimed))} claimed`,
            v,
            fmtStat(stat(xs.map((x) => x.ms)), 1),
            Number.isNaN(xs[0].pages) ? '—' : fmt(xs[0].pages),
            fmt(xs[0].read),
            fmt(xs[0].returned),
            xs[0].capacity === undefined ? 'not reported' : fmt(xs[0].capacity, 1),
          ]);
        }
      }
      const claimedSize = itemSize(jobRow(0, 'RUNNING'));
      const doneSize = itemSize(jobRow(0, 'DONE'));
      report.blocks.push(
        `${fmt(done)} DONE rows + 100, then 1,000 claimed rows in one job table (written in ${writeSeconds.toFixed(0)} s); ` +
          `${Math.max(ctx.rounds, ctx.quick ? 1 : 3)} round(s) per population after a warm-up; time per sweep: median (min–max) ms\n` +
          table(['population', 'sweep', 'ms per sweep', 'pages', 'items read', 'items returned', 'read capacity (DynamoDB Local)'], rows),
        `row sizes by AWS's item-size rules: claimed row ≈ ${claimedSize} B, DONE row ≈ ${doneSize} B. ` +
          `Sweeper.sweep is lib/core/sweeper.ts's real sweep (its items read count the index row and the lock item: 2 per claimed row; lock reads one at a time). ` +
          `Its SightClaimed output, which the cloud sweeper carries through a Wait state, is ${fmt(payloadBytesPerRow ?? 0, 1)} B of JSON per claimed row.`,
      );
      const q100 = results['100'].query[0].read,
        q1000 = results['1000'].query[0].read;
      const s100 = results['100'].scan[0].read,
        s1000 = results['1000'].scan[0].read;
      report.verdicts.push(
        {
          measurement: this.name,
          what: 'items read per sweep, sparse index: 100 → 1,000 claimed',
          figure: `${fmt(q100)} → ${fmt(q1000)} (Scan: ${fmt(s100)} → ${fmt(s1000)})`,
          target: 'grows with claimed rows only',
          met: q100 === 100 && q1000 === 1000,
        },
        {
          measurement: this.name,
          what: 'time per sweep at 1,000 claimed: query / scan',
          figure: `${fmt(stat(results['1000'].query.map((x) => x.ms)).median, 1)} ms / ${fmt(stat(results['1000'].scan.map((x) => x.ms)).median)} ms`,
          target: 'informational',
          met: undefined,
        },
      );
      const r1000 = stat(results['1000']['Sweeper.sweep'].map((x) => x.ms)).median;
      report.verdicts.push({
        measurement: this.name,
        what: 'the real sweep (Sweeper.sweep) at 100 → 1,000 claimed',
        figure: `${fmt(stat(results['100']['Sweeper.sweep'].map((x) => x.ms)).median)} → ${fmt(r1000)} ms, ${fmt(results['100']['Sweeper.sweep'][0].read)} → ${fmt(results['1000']['Sweeper.sweep'][0].read)} items read`,
        target: 'grows with claimed rows only',
        met: results['1000']['Sweeper.sweep'][0].read === 2000,
      });
      Object.assign(report.data, { done, writeSeconds, results, claimedSize, doneSize, payloadBytesPerRow });
      return report;
    } finally {
      await stack.drop(ns);
    }
  },
};

/**
 * 8. Looking for waste: where a direct night's time goes, and changes measured before/after side by side (a
 * prototype here uses the library's own pieces; what was adopted is in lib/constructs/, its "before" kept here).
 *
 *   profile     a direct night (runBilling) in this process on the shared stack, with every SDK call timed at the
 *               call site (total) and at the wire (a middleware next to the HTTP handler): client-side time is
 *               marshalling, serialising, signing and parsing; sockets opened are counted per endpoint
 *               (diagnostics_channel net.client.socket); events counted and their JSON size measured.
 *   micro       per-chunk render of the chunk object as one string vs into one Buffer; the ClientRequestToken hash
 *               per transaction; JSON.stringify + a write per event, for the night's real event stream;
 *   client CPU  the SDK's own cost of one fenced transaction with NO network (a stub HTTP handler answers `{}` at
 *               once): fence.writeBatch (today: AttributeValues built directly, fence.fencedTransaction) vs the same
 *               request through the document client's marshalling (before), with and without the token.
 *   overlap     prototype: the chunk tail (render, chunk object PUT, manifest commit, progress update) runs while
 *               the next chunk's transactions are written, vs runBilling's strict sequence. Side by side, rounds.
 *   synth       the workflow engine's start-up in a child: a cold synth (CDK app synth in-process; before) vs the
 *               synth cache (today), rounds alternating.
 */
import { createHash } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { type BillingDeps, billingDeps, completeNight, invoiceTransaction, raiseNight, runBilling, writeInvoices } from '../apps/billing/night';
import type { BillingTables } from '../apps/billing/schema';
import { systemClock } from '../lib/core/clock';
import { validateBillingConfig, type BillingConfig } from '../apps/billing/settings';
import { Events, type FencepostEvent } from '../lib/core/events';
import * as fence from '../lib/core/fence';
import { chunkBatches, chunkRange, renderChunkLines, type Invoice, type NightPlan } from '../apps/billing/invoices';
import { claim } from '../lib/core/lease';
import { Keys } from '../apps/billing/keys';
import { localClients, type Clients } from '../lib/core/aws/clients';
import {
  ROOT,
  fmt,
  fmtStat,
  freshDate,
  newReport,
  rotate,
  runToEnd,
  spawnScript,
  stat,
  table,
  type BenchContext,
  type Measurement,
  type SharedStack,
} from './common';
import { pct } from './night';
import { DynamoJobStore } from '../lib/core/aws/job-store';

interface CallStats {
  calls: number;
  totalMs: number;
  wireMs: number;
}

/** Clients of our own, with every send timed; the wire time comes from a middleware around the HTTP handler. */
function instrumented(stack: SharedStack): { clients: Clients; calls: Map<string, CallStats> } {
  const clients = localClients(stack.endpoints);
  const calls = new Map<string, CallStats>();
  const entry = (name: string) => {
    let e = calls.get(name);
    if (!e) calls.set(name, (e = { calls: 0, totalMs: 0, wireMs: 0 }));
    return e;
  };
  for (const [client, label] of [
    [clients.ddb, 'ddb'],
    [clients.s3, 's3'],
  ] as const) {
    const send = client.send.bind(client) as (cmd: unknown, ...rest: unknown[]) => Promise<unknown>;
    (client as unknown as { send: typeof send }).send = async (cmd: unknown, ...rest: unknown[]) => {
      const t0 = performance.now();
      try {
        return await send(cmd, ...rest);
      } finally {
        const e = entry(`${label}:${operationOf((cmd as object).constructor.name)}`);
        e.calls++;
        e.totalMs += performance.now() - t0;
      }
    };
  }
  for (const [client, label] of [
    [clients.raw, 'ddb'],
    [clients.s3, 's3'],
  ] as const) {
    (client.middlewareStack as Clients['raw']['middlewareStack']).add(
      (next, context) => async (args) => {
        const t0 = performance.now();
        try {
          return await next(args);
        } finally {
          entry(`${label}:${operationOf(String((context as { commandName?: string }).commandName ?? '?'))}`).wireMs += performance.now() - t0;
        }
      },
      { step: 'deserialize', priority: 'low', name: 'benchWireTimer' },
    );
  }
  return { clients, calls };
}

/** The API operation of a command class: the document client's TransactWriteCommand is TransactWriteItems, etc. */
function operationOf(commandClass: string): string {
  const name = commandClass.replace(/Command$/, '');
  const doc: Record<string, string> = {
    TransactWrite: 'TransactWriteItems',
    TransactGet: 'TransactGetItems',
    Get: 'GetItem',
    Put: 'PutItem',
    Update: 'UpdateItem',
    Delete: 'DeleteItem',
    BatchWrite: 'BatchWriteItem',
    BatchGet: 'BatchGetItem',
    Query: 'Query',
    Scan: 'Scan',
  };
  return doc[name] ?? name;
}

/** A DynamoDB client whose HTTP handler answers 200 `{}` at once: what is left is the SDK's own work per call. */
function stubbedDynamoDb(): { raw: DynamoDBClient; doc: DynamoDBDocumentClient } {
  const body = new TextEncoder().encode('{}');
  const requestHandler = {
    handle: async () => ({ response: { statusCode: 200, reason: 'OK', headers: { 'content-type': 'application/x-amz-json-1.0' }, body } }),
    updateHttpClientConfig: () => undefined,
    httpHandlerConfigs: () => ({}),
    destroy: () => undefined,
  };
  const raw = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler: requestHandler as never,
  });
  return { raw, doc: DynamoDBDocumentClient.from(raw, { marshallOptions: { removeUndefinedValues: true } }) };
}

/** Client-side µs per fenced transaction, three ways, on the stub (no network, no server). */
async function clientCpu(plan: NightPlan, reps: number): Promise<Record<string, number[]>> {
  const { raw, doc } = stubbedDynamoDb();
  const tables = { jobs: 'bench-jobs', invoices: 'bench-invoices' };
  const job = Keys.job(plan.date);
  const batches = [...chunkBatches(plan, 0)];
  // The document client's form of the same transaction: what fence.writeBatch sent before it built AttributeValues.
  const docItems = (b: Invoice[]) => [
    {
      ConditionCheck: {
        TableName: tables.jobs,
        Key: { pk: job },
        ConditionExpression: 'fence <= :t',
        ExpressionAttributeValues: { ':t': 12 },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
      },
    },
    ...b.map((i) => ({
      Put: {
        TableName: tables.invoices,
        Item: { pk: i.pk, customer: i.customer, amount: i.amount, token: 12 },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    })),
  ];
  const ways: Record<string, () => Promise<void>> = {
    'fence.writeBatch, AttributeValues built directly (today)': async () => {
      const deps = { jobs: new DynamoJobStore(doc, tables.jobs), invoices: tables.invoices, clock: systemClock };
      for (const b of batches) await writeInvoices(deps, job, 12, b);
    },
    'document client marshalling, with the token (before)': async () => {
      for (const b of batches) {
        const token = invoiceTransaction(
          { jobs: new DynamoJobStore(doc, tables.jobs), invoices: tables.invoices, clock: systemClock },
          job,
          12,
          b,
        ).ClientRequestToken;
        await doc.send(new TransactWriteCommand({ ClientRequestToken: token, TransactItems: docItems(b) }));
      }
    },
    'document client marshalling, without the token': async () => {
      for (const b of batches) await doc.send(new TransactWriteCommand({ TransactItems: docItems(b) }));
    },
  };
  const out: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (const w of Object.values(ways)) await w(); // warm-up (JIT)
  for (let r = 1; r <= reps; r++) {
    for (const k of rotate(Object.keys(ways), r)) {
      const t0 = performance.now();
      await ways[k]();
      out[k].push(((performance.now() - t0) * 1000) / batches.length);
    }
  }
  raw.destroy();
  return out;
}

/** Count client sockets opened, per remote port, while `body` runs. */
async function countingSockets<T>(body: () => Promise<T>): Promise<{ result: T; byPort: Map<number, number> }> {
  const byPort = new Map<number, number>();
  const onSocket = (msg: unknown) => {
    const socket = (msg as { socket: Socket }).socket;
    socket.once('connect', () => byPort.set(socket.remotePort ?? 0, (byPort.get(socket.remotePort ?? 0) ?? 0) + 1));
  };
  diagnostics.subscribe('net.client.socket', onSocket);
  try {
    return { result: await body(), byPort };
  } finally {
    diagnostics.unsubscribe('net.client.socket', onSocket);
  }
}

function depsOf(clients: Clients, tables: BillingTables, bucket: string, events: Events): BillingDeps {
  return billingDeps(clients, tables, bucket, systemClock, events);
}

/**
 * PROTOTYPE (not in lib/constructs/): the night with each chunk's tail (render + chunk object + manifest commit + progress)
 * overlapped with the next chunk's transactions. Tails stay in order (one manifest writer, If-Match chain); the job
 * row's progress still follows its manifest commit; the stop-time check still precedes every act.
 */
async function billOverlapped(deps: BillingDeps, date: string, worker: string, config: BillingConfig): Promise<number> {
  const plan: NightPlan = { date, invoices: config.invoices, chunkSize: config.chunkSize, putsPerTransaction: config.putsPerTransaction };
  const jobId = Keys.job(date);
  const lease = await claim(deps, Keys.lock(date), worker, config);
  lease.startHeartbeat();
  try {
    const night = await raiseNight(deps, lease, date, config);
    const fdeps = deps;
    let tail: Promise<void> = Promise.resolve();
    let transactions = 0;
    for (const chunk of night.chunksToDo) {
      for (const batch of chunkBatches(plan, chunk)) {
        lease.check();
        transactions += (await writeInvoices(fdeps, jobId, lease.token, batch)).transactions;
      }
      const previous = tail;
      tail = (async () => {
        await previous;
        lease.check();
        const object = await night.manifest.putChunkObject(chunk, [...renderChunkLines(plan, chunk, lease.token)].join(''));
        lease.check();
        const { first, end } = chunkRange(plan, chunk);
        await night.manifest.commitChunk(chunk, { key: object.key, etag: object.etag, records: end - first });
        await fence.markChunkDone(fdeps, jobId, lease.token, chunk);
      })();
      tail.catch(() => undefined); // surfaced by the await below
    }
    await tail;
    await completeNight(deps, lease, night.manifest, date);
    await lease.release();
    return transactions;
  } finally {
    await lease.stopHeartbeat();
  }
}

export const waste: Measurement = {
  name: 'waste',
  title: "8. Looking for waste: where a night's time goes, and prototypes measured before/after",
  fullMinutes: 7,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const invoices = ctx.quick ? 5_000 : 50_000;
    const config = validateBillingConfig({ invoices });
    // ---- profile: a warm-up night on other clients, then the profiled night on fresh ones (so every socket counts)
    const warmClients = localClients(stack.endpoints);
    const warm = await stack.namespace('ww');
    await runBilling(depsOf(warmClients, warm.tables, warm.bucket, new Events('warm', systemClock)), {
      date: '2026-09-28',
      worker: 'warm',
      config: validateBillingConfig({ invoices: 5_000 }),
    });
    await stack.drop(warm);
    warmClients.destroy();
    const inst = instrumented(stack);
    try {
      const ns = await stack.namespace('wp');
      const recorded: FencepostEvent[] = [];
      const events = new Events('profile', systemClock).on((e) => recorded.push(e));
      const date = freshDate();
      const t0 = performance.now();
      const { result: summary, byPort } = await countingSockets(() =>
        runBilling(depsOf(inst.clients, ns.tables, ns.bucket, events), { date, worker: 'profile', config }),
      );
      const nightMs = performance.now() - t0;
      await stack.drop(ns);
      const ddbPort = Number(new URL(stack.endpoints.dynamodb).port),
        s3Port = Number(new URL(stack.endpoints.s3).port);
      const rows = [...inst.calls.entries()]
        .sort((a, b) => b[1].totalMs - a[1].totalMs)
        .map(([name, c]) => [
          name,
          fmt(c.calls),
          fmt(c.totalMs),
          fmt(c.wireMs),
          fmt(c.totalMs - c.wireMs),
          fmt(((c.totalMs - c.wireMs) / c.calls) * 1000),
          pct(c.totalMs / nightMs).replace('+', ''),
        ]);
      const tx = { ...inst.calls.get('ddb:TransactWriteItems')! }; // a snapshot: the later phases run on the same instrumented clients
      const eventBytes = recorded.reduce((s, e) => s + Buffer.byteLength(JSON.stringify(e)) + 1, 0);
      report.blocks.push(
        `profile: one direct night of ${fmt(invoices)} invoices in the bench process (${(nightMs / 1000).toFixed(1)} s, ${fmt(summary.transactions)} transactions); ` +
          `total = at the call site, wire = around the HTTP handler, client = total − wire (renewals overlap the writes, so shares can add past 100%)\n` +
          table(['call', 'calls', 'total ms', 'wire ms', 'client ms', 'client µs/call', 'share of night'], rows),
        `sockets opened during the night: DynamoDB ${fmt(byPort.get(ddbPort) ?? 0)}, S3 ${fmt(byPort.get(s3Port) ?? 0)} ` +
          `(for ${fmt([...inst.calls.entries()].filter(([k]) => k.startsWith('ddb')).reduce((s, [, c]) => s + c.calls, 0))} DynamoDB and ` +
          `${fmt([...inst.calls.entries()].filter(([k]) => k.startsWith('s3')).reduce((s, [, c]) => s + c.calls, 0))} S3 requests, on fresh clients with the project's keep-alive agent). ` +
          `events: ${fmt(recorded.length)} (${fmt(eventBytes)} bytes of JSON lines with --events).`,
      );

      // ---- micro
      const plan: NightPlan = { date, invoices: 50_000, chunkSize: 5_000, putsPerTransaction: 99 };
      const reps = ctx.quick ? 5 : 30;
      const asString: number[] = [],
        asBuffer: number[] = [],
        hash: number[] = [],
        json: number[] = [];
      let bodyBytes = 0;
      const devnull = fs.openSync('/dev/null', 'w');
      for (let r = 0; r < reps; r++) {
        let t = performance.now();
        const s = [...renderChunkLines(plan, r % 10, 12)].join('');
        asString.push(performance.now() - t);
        bodyBytes = Buffer.byteLength(s);
        t = performance.now();
        const parts: Buffer[] = [];
        for (const line of renderChunkLines(plan, r % 10, 12)) parts.push(Buffer.from(line));
        Buffer.concat(parts);
        asBuffer.push(performance.now() - t);
        t = performance.now();
        for (const batch of chunkBatches(plan, r % 10)) {
          const h = createHash('sha256').update(`a|b|${Keys.job(date)}|12`);
          for (const inv of batch) h.update(`|${inv.pk}`);
          h.digest('hex');
        }
        hash.push((performance.now() - t) / 51);
        t = performance.now();
        for (const e of recorded) fs.writeSync(devnull, JSON.stringify(e) + '\n');
        json.push(performance.now() - t);
      }
      fs.closeSync(devnull);
      const txClientUs = ((tx.totalMs - tx.wireMs) / tx.calls) * 1000;
      const nChunks = Math.ceil(invoices / 5_000);
      report.blocks.push(
        `micro (${reps} repetitions, medians (min–max)):\n` +
          table(
            ['what', 'time', 'per night (chunks / transactions / events)', 'vs the night'],
            [
              [
                `render one chunk (${fmt(bodyBytes)} B) as one string (today)`,
                fmtStat(stat(asString), 2, ' ms'),
                `${fmt(stat(asString).median * nChunks, 1)} ms`,
                pct((stat(asString).median * nChunks) / nightMs).replace('+', ''),
              ],
              [
                'render one chunk into one Buffer',
                fmtStat(stat(asBuffer), 2, ' ms'),
                `${fmt(stat(asBuffer).median * nChunks, 1)} ms`,
                pct((stat(asBuffer).median * nChunks) / nightMs).replace('+', ''),
              ],
              [
                'ClientRequestToken (sha256 over 99 ids) per transaction',
                fmtStat(stat(hash), 3, ' ms'),
                `${fmt(stat(hash).median * tx.calls, 1)} ms`,
                pct((stat(hash).median * tx.calls) / nightMs).replace('+', ''),
              ],
              [
                `JSON.stringify + write of the night's ${fmt(recorded.length)} events`,
                fmtStat(stat(json), 2, ' ms'),
                `${fmt(stat(json).median, 1)} ms`,
                pct(stat(json).median / nightMs).replace('+', ''),
              ],
              [
                'client-side time per TransactWriteItems (profile)',
                `${fmt(txClientUs)} µs`,
                `${fmt((txClientUs * tx.calls) / 1000, 1)} ms`,
                pct((txClientUs * tx.calls) / 1000 / nightMs).replace('+', ''),
              ],
            ],
          ),
      );

      // ---- client CPU per transaction, no network
      const cpu = await clientCpu(plan, ctx.quick ? 3 : 10);
      const cpuToday = stat(cpu['fence.writeBatch, AttributeValues built directly (today)']).median;
      const cpuBefore = stat(cpu['document client marshalling, with the token (before)']).median;
      report.blocks.push(
        `client CPU of one fenced transaction (1 check + 99 puts) with no network (a stub HTTP handler), µs, ${ctx.quick ? 3 : 10} rounds of 51 transactions, medians (min–max):\n` +
          table(
            ['how the request is built', 'µs / transaction', 'per night (510)', 'vs today'],
            Object.entries(cpu).map(([k, xs]) => [
              k,
              fmtStat(stat(xs)),
              `${fmt((stat(xs).median * 510) / 1000)} ms`,
              pct(stat(xs).median / cpuToday - 1),
            ]),
          ),
      );

      // ---- overlap prototype
      const variants = {
        'runBilling (today)': async (d: BillingDeps, dt: string) => {
          await runBilling(d, { date: dt, worker: 'seq', config });
        },
        'overlapped tail (prototype)': async (d: BillingDeps, dt: string) => {
          await billOverlapped(d, dt, 'ovl', config);
        },
      } as const;
      type V = keyof typeof variants;
      const names = Object.keys(variants) as V[];
      const secs: Record<V, number[]> = { 'runBilling (today)': [], 'overlapped tail (prototype)': [] };
      for (let r = 1; r <= ctx.rounds; r++) {
        for (const n of rotate(names, r)) {
          const ons = await stack.namespace('ov');
          const t = performance.now();
          await variants[n](depsOf(inst.clients, ons.tables, ons.bucket, new Events(n, systemClock)), freshDate());
          secs[n].push((performance.now() - t) / 1000);
          await stack.drop(ons);
        }
        ctx.log(
          `waste: overlap round ${r}/${ctx.rounds}: today ${secs['runBilling (today)'].at(-1)!.toFixed(1)} s, prototype ${secs['overlapped tail (prototype)'].at(-1)!.toFixed(1)} s`,
        );
      }
      const ovl = stat(secs['overlapped tail (prototype)']),
        seq = stat(secs['runBilling (today)']);
      const paired = stat(secs['overlapped tail (prototype)'].map((x, i) => x / secs['runBilling (today)'][i] - 1));
      // What overlapping can save at most: the tails themselves (chunk object PUT + manifest PUT + progress UpdateItem
      // + render), from the profile's per-call means.
      const mean = (k: string) => {
        const c = inst.calls.get(k);
        return c ? c.totalMs / c.calls : 0;
      };
      const tailMs = 2 * mean('s3:PutObject') + mean('ddb:UpdateItem') + stat(asString).median;
      const chunks = Math.ceil(invoices / 5_000);
      report.blocks.push(
        `overlap prototype: ${fmt(invoices)} invoices, ${ctx.rounds} round(s), rotating, in this process; seconds, medians (min–max)\n` +
          table(
            ['variant', 'night s', 'invoices/s', 'vs today'],
            names.map((n) => [n, fmtStat(stat(secs[n]), 2), fmt(invoices / stat(secs[n]).median), pct(stat(secs[n]).median / seq.median - 1)]),
          ),
        `per-round change ${pct(paired.median)} (${pct(paired.min)} to ${pct(paired.max)}). Upper bound of what overlapping can save: ${chunks} tails × ` +
          `≈ ${fmt(tailMs, 1)} ms (2 PutObject + 1 UpdateItem + render, profile means) = ${fmt((chunks * tailMs) / 1000, 2)} s = ${pct((chunks * tailMs) / nightMs).replace('+', '')} of the night; ` +
          `a measured change larger than that is noise.`,
      );

      // ---- synth: the workflow engine's start-up, cold synth (before) vs the synth cache (today), in children
      type Probe = { mode: 'cold' | 'cached'; loadMs: number; synthMs: number };
      const synth: Probe[] = [];
      await runToEnd(spawnProbe('cached'), 'synth probe'); // fills the cache
      for (let r = 0; r < Math.max(ctx.rounds, 1); r++) {
        for (const mode of rotate(['cold', 'cached'] as const, r)) {
          const probe = spawnProbe(mode);
          await runToEnd(probe, 'synth probe');
          synth.push(JSON.parse(probe.other.at(-1)!.line) as Probe);
        }
      }
      const startUp = (mode: Probe['mode']) => stat(synth.filter((p) => p.mode === mode).map((p) => p.loadMs + p.synthMs));
      report.blocks.push(
        `workflow engine start-up in a fresh process, ${Math.max(ctx.rounds, 1)} round(s) alternating; loading lib/local/workflow.ts + getting the definition, ms, medians (min–max):\n` +
          table(
            ['how the definition is got', 'load ms', 'synth ms', 'together'],
            (['cold', 'cached'] as const).map((mode) => {
              const ps = synth.filter((p) => p.mode === mode);
              return [
                mode === 'cold' ? 'synthesized in-process (before)' : 'synth cache (today)',
                fmtStat(stat(ps.map((p) => p.loadMs))),
                fmtStat(stat(ps.map((p) => p.synthMs))),
                fmtStat(startUp(mode)),
              ];
            }),
          ),
      );
      report.verdicts.push(
        {
          measurement: this.name,
          what: 'client-side time per fenced transaction (profile)',
          figure: `${fmt(txClientUs)} µs (${pct((txClientUs * tx.calls) / 1000 / nightMs).replace('+', '')} of the night)`,
          target: 'informational',
          met: undefined,
        },
        {
          measurement: this.name,
          what: "overlapping each chunk's tail with the next chunk",
          figure: `${pct(ovl.median / seq.median - 1)} night time (at most ${pct((chunks * tailMs) / nightMs).replace('+', '-')} possible)`,
          target: 'informational (prototype, not adopted)',
          met: undefined,
        },
        {
          measurement: this.name,
          what: 'client CPU per fenced transaction, no network: document client (before) → AttributeValues built directly (today)',
          figure: `${fmt(cpuBefore)} → ${fmt(cpuToday)} µs (${pct(cpuToday / cpuBefore - 1)})`,
          target: 'lower than before',
          met: cpuToday < cpuBefore,
        },
        {
          measurement: this.name,
          what: 'workflow engine start-up per run: cold synth (before) → synth cache (today)',
          figure: `${fmt(startUp('cold').median)} → ${fmt(startUp('cached').median)} ms`,
          target: 'lower than before',
          met: startUp('cached').median < startUp('cold').median,
        },
      );
      Object.assign(report.data, {
        invoices,
        nightMs,
        calls: Object.fromEntries(inst.calls),
        sockets: Object.fromEntries(byPort),
        events: recorded.length,
        eventBytes,
        micro: { asString: stat(asString), asBuffer: stat(asBuffer), hash: stat(hash), json: stat(json), bodyBytes, txClientUs },
        cpu,
        overlap: secs,
        synth,
      });
      return report;
    } finally {
      inst.clients.destroy();
    }
  },
};

/** A child that times loading lib/local/workflow.ts and getting one definition, cold or from the cache. */
function spawnProbe(mode: 'cold' | 'cached') {
  return spawnScript(path.join(ROOT, 'bench/synth-probe.ts'), [mode]);
}

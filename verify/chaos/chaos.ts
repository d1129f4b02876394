/**
 * The fault suite: randomized schedules of real faults against real worker processes on the embedded stack,
 * each audited against the design's invariants (docs/DESIGN.md "The fault suite"). Used by `npm test` (20 schedules) and `fencepost chaos`
 * (200 or more). Every schedule has its own seed: a failure prints it, and `fencepost chaos --seed S --schedules 1`
 * replays that schedule.
 *
 * Kinds of schedule:
 *   pause        a holder is stopped (SIGSTOP) at a random point, longer than its lease, then continued
 *   crash        a holder is killed (SIGKILL) mid-chunk; a waiting worker or the sweeper brings the night to DONE
 *   duplicates   2–3 runs of the same night started together
 *   clock        a worker whose wall clock runs 3 s fast or is stepped back 3 s mid-run (libfaketime)
 *   store        throttling and lost-after-applied responses injected in the AWS SDK middleware (a workflow worker
 *                runs the handlers' sources for it: the middleware is the worker's own clients')
 *   sweeper-race a sweeper's re-queue racing a takeover and a paused holder's late renewal
 *   conflict     a pause, crash, duplicate or sweeper race through a DynamoDB proxy whose in-flight transactions
 *                cancel others on a shared item (TransactionConflict) with a wide window (50–250 ms), workflow chunks 3 at once
 *   cancel-throttle  the same through a proxy that cancels transactions at random with ThrottlingError or
 *                ProvisionedThroughputExceeded reasons and answers some calls 500 (lib/local/dynamodb-proxy.ts)
 *   election     3-5 `fencepost elect` candidates for a role, with pauses of the leader (one between its check and
 *                an append), kills, a resignation, late joiners and faked clocks; audited by the ledger checker
 *                (verify/chaos/election-chaos.ts), not by the billing audit
 *
 * Checks per schedule: invariants 1–4 by the auditor; 6 (the night is DONE once the faults stop, within the
 * liveness bound for crashes); 5 for clock schedules (the faked-clock holder's stop times follow its monotonic
 * clock); and, when a pause lands between a check and a batch, that batch's invoices never carry the zombie's token.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { audit, auditDeps } from '../../apps/billing/audit';
import { readJob } from '../../lib/core/fence';
import { DynamoJobStore } from '../../lib/core/aws/job-store';
import { chunkBatches, chunkCount, transactionsPerChunk } from '../../apps/billing/invoices';
import { billingTables as tableNames } from '../../apps/billing/schema';
import { provisionBilling as provision } from '../billing-stores';
import { Keys } from '../../apps/billing/keys';
import type { Clients, Endpoints } from '../../lib/core/aws/clients';
import { startDynamoDbProxy, type DynamoDbProxyOptions } from '../../lib/local/dynamodb-proxy';
import { prng } from '../../lib/core/prng';
import { startProcess, type SeenEvent, type WorkerOptions, type WorkerProcess } from './worker-process';
import { runElectionSchedule } from './election-chaos';

export const KINDS = ['pause', 'crash', 'duplicates', 'clock', 'store', 'sweeper-race', 'conflict', 'cancel-throttle', 'election'] as const;
export type Kind = (typeof KINDS)[number];

/** `fencepost chaos` without options: the long mode's schedule count, and a fifth of the schedules on the workflow. */
export const CHAOS_DEFAULTS = { schedules: 200, workflowShare: 0.2 } as const;

const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const DATE = '2026-09-28';
const LEASE = { leaseMs: 1500, renewMs: 400, marginMs: 500 };

export interface ScheduleResult {
  readonly index: number;
  readonly seed: number;
  readonly kind: Kind;
  readonly engine: string;
  readonly ok: boolean;
  readonly violations: string[];
  readonly faults: Record<string, number>;
  readonly takeovers: number;
  readonly fencedRejections: number;
  readonly seconds: number;
  readonly detail: string;
}

export interface ChaosReport {
  readonly seed: number;
  readonly schedules: number;
  readonly violations: number;
  readonly faultsByKind: Record<string, number>;
  readonly schedulesByKind: Record<string, number>;
  readonly takeovers: number;
  readonly fencedRejections: number;
  readonly seconds: number;
  readonly results: ScheduleResult[];
}

export interface ChaosOptions {
  readonly endpoints: Endpoints;
  readonly clients: Clients;
  readonly schedules: number;
  readonly seed: number;
  readonly kinds?: readonly Kind[];
  /** Share of schedules whose workers run the synthesized workflow (slower: a synth per process). @default CHAOS_DEFAULTS.workflowShare */
  readonly workflowShare?: number;
  readonly onResult?: (r: ScheduleResult) => void;
}

function libfaketimeAvailable(): boolean {
  return existsSync(LIBFAKETIME);
}

/** A process's wall clock under libfaketime: `env` to start it with; `set` moves it (read at every call). Its monotonic clock is left alone. */
export interface FakeClock {
  readonly env: Record<string, string>;
  set(offset: string): void;
}

/** A faked wall clock starting at `offset` ('+3s' runs fast; '+0', then `set('-3s')`, steps back). */
export function fakeClock(offset: string): FakeClock {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-faketime-'));
  const file = path.join(dir, 'offset');
  writeFileSync(file, `${offset}\n`);
  return {
    env: { LD_PRELOAD: LIBFAKETIME, FAKETIME_TIMESTAMP_FILE: file, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
    set: (to) => writeFileSync(file, `${to}\n`),
  };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const started = performance.now();
  const kinds = o.kinds ?? KINDS;
  if (kinds.includes('clock') && !libfaketimeAvailable()) {
    throw new Error(`clock schedules need libfaketime (${LIBFAKETIME}): apt-get install -y faketime`);
  }
  const results: ScheduleResult[] = [];
  for (let i = 0; i < o.schedules; i++) {
    const seed = (o.seed + i * 7919) >>> 0;
    const kind = o.schedules >= kinds.length ? kinds[i % kinds.length] : kinds[Math.floor(prng(seed)() * kinds.length)];
    const r = await runSchedule(o, i, seed, kind);
    results.push(r);
    o.onResult?.(r);
  }
  const faultsByKind: Record<string, number> = {};
  const schedulesByKind: Record<string, number> = {};
  for (const r of results) {
    schedulesByKind[r.kind] = (schedulesByKind[r.kind] ?? 0) + 1;
    for (const [k, n] of Object.entries(r.faults)) faultsByKind[k] = (faultsByKind[k] ?? 0) + n;
  }
  return {
    seed: o.seed,
    schedules: results.length,
    violations: results.reduce((n, r) => n + r.violations.length, 0),
    faultsByKind,
    schedulesByKind,
    takeovers: results.reduce((n, r) => n + r.takeovers, 0),
    fencedRejections: results.reduce((n, r) => n + r.fencedRejections, 0),
    seconds: Math.round(performance.now() - started) / 1000,
    results,
  };
}

interface Ctx {
  readonly seed: number;
  readonly random: () => number;
  readonly prefix: string;
  readonly bucket: string;
  readonly invoices: number;
  readonly chunkSize: number;
  readonly engine: string;
  /** The stores the workers use: the suite's, or a fault proxy's in front of them. */
  endpoints: Endpoints;
  /** Chunk tasks in flight at once (workflow engine). */
  chunkConcurrency: number;
  readonly o: ChaosOptions;
  readonly faults: Record<string, number>;
  readonly violations: string[];
  readonly workers: WorkerProcess[];
  notes: string[];
  stopProxy?: () => Promise<void>;
}

const pick = <T>(random: () => number, xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const count = (ctx: Ctx, kind: string, n = 1) => {
  ctx.faults[kind] = (ctx.faults[kind] ?? 0) + n;
};

function storeArgs(ctx: Ctx): string[] {
  return ['--dynamodb-endpoint', ctx.endpoints.dynamodb, '--s3-endpoint', ctx.endpoints.s3, '--table-prefix', ctx.prefix, '--bucket', ctx.bucket];
}

function nightArgs(ctx: Ctx, engine = ctx.engine): string[] {
  return [
    '--date',
    DATE,
    '--invoices',
    String(ctx.invoices),
    '--chunk-size',
    String(ctx.chunkSize),
    '--engine',
    engine,
    '--lease-ms',
    String(LEASE.leaseMs),
    '--renew-ms',
    String(LEASE.renewMs),
    '--margin-ms',
    String(LEASE.marginMs),
    '--claim-budget',
    '60',
    ...(engine === 'stepfunctions' ? ['--chunk-concurrency', String(ctx.chunkConcurrency)] : []),
  ];
}

function worker(ctx: Ctx, name: string, options: WorkerOptions = {}, engine?: string): WorkerProcess {
  const w = startProcess(['run', ...storeArgs(ctx), ...nightArgs(ctx, engine), '--events', '--worker', `${name}-${ctx.seed}`], options);
  ctx.workers.push(w);
  return w;
}

function sweeper(ctx: Ctx, everyMs: number): WorkerProcess {
  const w = startProcess([
    'sweep',
    ...storeArgs(ctx),
    '--every',
    `${everyMs}ms`,
    '--lease-ms',
    String(LEASE.leaseMs),
    '--events',
    '--run-invoices',
    String(ctx.invoices),
    '--run-chunk-size',
    String(ctx.chunkSize),
    '--run-engine',
    'direct',
    '--run-renew-ms',
    String(LEASE.renewMs),
    '--run-margin-ms',
    String(LEASE.marginMs),
  ]);
  ctx.workers.push(w);
  return w;
}

async function jobRow(ctx: Ctx) {
  return readJob({ jobs: new DynamoJobStore(ctx.o.clients.ddb, tableNames(ctx.prefix).jobs) }, Keys.job(DATE));
}

async function jobState(ctx: Ctx): Promise<string | undefined> {
  return (await jobRow(ctx))?.state;
}

async function waitDone(ctx: Ctx, timeoutMs: number): Promise<number | undefined> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if ((await jobState(ctx)) === 'DONE') return performance.now();
    await sleep(100);
  }
  return undefined;
}

/**
 * Wait for a holder to reach the point where the fault is due. On a loaded machine a holder can lose its short
 * lease on its own first (its stop time passes: liveness, never safety); then there is nothing to inject, and the
 * schedule goes straight to recovery. Returns false in that case.
 */
async function reached(ctx: Ctx, w: WorkerProcess, pred: (e: SeenEvent) => boolean): Promise<boolean> {
  try {
    await w.waitFor(pred, 60_000);
    return true;
  } catch (err) {
    if (w.child.exitCode === null && w.child.signalCode === null) throw err;
    ctx.notes.push(`the holder ended (exit ${w.child.exitCode}) before the fault point: nothing injected`);
    return false;
  }
}

/**
 * A random event of the holder's stream to act on, once it holds the job (its fence raised): the k-th batch, a
 * renewal, or a chunk commit. A holder that dies between its claim and its fence raise leaves no claim marker for
 * the sweeper; its lease lapses and the next trigger re-runs the night (docs/DESIGN.md, "What the sweeper cannot see").
 */
function randomTrigger(ctx: Ctx): { describe: string; pred: (e: SeenEvent) => boolean } {
  const batches =
    chunkCount({ invoices: ctx.invoices, chunkSize: ctx.chunkSize }) *
    transactionsPerChunk({ date: DATE, invoices: ctx.invoices, chunkSize: ctx.chunkSize, putsPerTransaction: 99 }, 0);
  const which = pick(ctx.random, ['batch', 'batch', 'renew', 'chunk']);
  let raised = false;
  let completed = false; // a renewal that lands while the holder completes is not "mid-chunk"
  if (which === 'renew') {
    return {
      describe: 'right after a renewal',
      pred: (e) => (raised ||= e.event === 'fence-raised') && !(completed ||= e.event === 'completed') && e.event === 'renew',
    };
  }
  if (which === 'chunk') return { describe: 'between chunks', pred: (e) => e.event === 'chunk-committed' && Number(e.chunk) === 0 };
  const k = 1 + Math.floor(ctx.random() * Math.max(1, batches - 3));
  let seen = 0;
  return { describe: `mid-transaction stream (after batch ${k})`, pred: (e) => e.event === 'batch-committed' && ++seen === k };
}

async function pause(ctx: Ctx): Promise<void> {
  const inside = ctx.random() < 0.5;
  let a: WorkerProcess;
  let lateBatch: { chunk: number; batch: number } | undefined;
  if (inside) {
    // Stopped by itself right after passing its stop-time check: the gap only the fence closes (docs/DESIGN.md,
    // "Fault injection"). The point is inside the core: a workflow worker runs the handlers' sources to reach it.
    const chunks = chunkCount({ invoices: ctx.invoices, chunkSize: ctx.chunkSize });
    const chunk = Math.floor(ctx.random() * chunks);
    const point = pick(ctx.random, ['batch', 'batch', 'chunk-commit']);
    if (point === 'batch') lateBatch = { chunk, batch: Math.floor(ctx.random() * 2) };
    const sigstop = lateBatch ? `batch:${chunk}:${lateBatch.batch}` : `chunk-commit:${chunk}`;
    a = worker(ctx, 'A', { faults: { sigstop } });
    if (!(await reached(ctx, a, (e) => e.fault === 'sigstop'))) return;
    ctx.notes.push(`A stopped itself after its check (sigstop:${sigstop})`);
  } else {
    a = worker(ctx, 'A');
    const trigger = randomTrigger(ctx);
    if (!(await reached(ctx, a, trigger.pred))) return;
    a.child.kill('SIGSTOP');
    ctx.notes.push(`A stopped ${trigger.describe}`);
  }
  count(ctx, 'pause');
  const b = worker(ctx, 'B');
  await Promise.race([b.waitFor((e) => e.event === 'fence-raised', 60_000), b.exited]).catch(() => undefined);
  await sleep(Math.floor(ctx.random() * 300));
  a.child.kill('SIGCONT');
  await Promise.all([a.exited, b.exited]);
  if (lateBatch) {
    const aToken = a.events.find((e) => e.event === 'claim')?.token;
    const tokens = await invoiceTokens(ctx);
    const batch = [...chunkBatches({ date: DATE, invoices: ctx.invoices, chunkSize: ctx.chunkSize, putsPerTransaction: 99 }, lateBatch.chunk)][
      lateBatch.batch
    ];
    if (aToken !== undefined && batch.some((inv) => tokens.get(inv.pk) === aToken)) {
      ctx.violations.push(`invariant 2: A's late batch (chunk ${lateBatch.chunk}, batch ${lateBatch.batch}) landed with A's token ${aToken}`);
    }
  }
}

async function crash(ctx: Ctx): Promise<void> {
  const a = worker(ctx, 'A');
  const viaSweeper = ctx.random() < 0.5;
  const trigger = randomTrigger(ctx);
  if (!(await reached(ctx, a, (e) => e.event === 'fence-raised'))) return;
  // A waiting worker starts once A holds the job: it observes A alive and waits out A's lease, again and again.
  const b = viaSweeper ? undefined : worker(ctx, 'B');
  if (!(await reached(ctx, a, trigger.pred))) return;
  a.child.kill('SIGKILL');
  const killedAt = performance.now();
  count(ctx, 'crash');
  ctx.notes.push(`A killed ${trigger.describe}; recovery by ${viaSweeper ? 'the sweeper' : 'a waiting worker'}`);
  if (b) {
    await b.exited;
    // Liveness by the clock-free rule, counted rather than timed (timings on a loaded 2-core machine vary): once
    // A is dead its rvn stops changing, so B sights at most ONE new rvn after the kill (A's last renewal, if B's
    // poll had not seen it yet) and claims once that rvn has stayed unchanged a lease. A second would mean B missed it.
    const claimed = b.events.find((e) => e.event === 'claim');
    if (claimed) {
      const sightingsAfter = b.events.filter((e) => e.event === 'sighted' && e.seenAtMs > killedAt && e.seenAtMs < claimed.seenAtMs).length;
      ctx.notes.push(`B claimed ${Math.round(claimed.seenAtMs - killedAt)} ms after the kill, after ${sightingsAfter} sighting(s) made after it`);
      if (sightingsAfter > 1) ctx.violations.push(`invariant 6: B needed ${sightingsAfter} sightings after A's death to claim (at most 1 expected)`);
    }
    return;
  }
  const claimed = a.events.find((e) => e.event === 'claim');
  await recoverBySweeper(ctx, killedAt, claimed === undefined ? undefined : Number(claimed.token));
}

/**
 * The deployed system's liveness path (invariant 6): the sweeper, always on, finds the orphan and starts a run.
 * Checks that the re-queue comes within one lease plus one sweep period of the sweeper's first sighting, and
 * reports the whole time to DONE (sweeper start-up + that + one run, which waits out the lapsed lease itself).
 */
async function recoverBySweeper(ctx: Ctx, faultsStoppedAt: number, killedToken?: number): Promise<void> {
  if ((await jobState(ctx)) === 'DONE') {
    ctx.notes.push('the night was DONE before the fault: nothing to recover');
    return;
  }
  const everyMs = 300;
  const s = sweeper(ctx, everyMs);
  const doneAt = await waitDone(ctx, 90_000);
  s.child.kill('SIGTERM');
  await s.exited;
  const sweeps = s.events.filter((e) => e.event === 'swept' || e.event === 'sweeper-storm');
  const requeued = s.events.find((e) => e.event === 'requeued');
  // A holder killed while its complete was on the wire: the request lands after the kill (and after the check above).
  // The row says whose complete it was: DONE at the killed holder's own token, with nothing re-queued.
  const row = await jobRow(ctx);
  if (!requeued && row?.state === 'DONE' && killedToken !== undefined && row.owner_token === killedToken) {
    ctx.notes.push(`the killed holder's complete (token ${killedToken}), sent before the kill, landed after it: nothing to recover`);
    return;
  }
  if (sweeps.length === 0 || !requeued || doneAt === undefined) {
    ctx.violations.push(`invariant 6: the sweeper did not bring the night to DONE (sweeps ${sweeps.length}, re-queued ${Boolean(requeued)})`);
    return;
  }
  // On the sweeper's own monotonic clock: the re-queue comes on the first sweep at least a lease after the first
  // sighting, i.e. within a lease plus one sweep (the period, or a slow sweep's whole length if longer).
  const gaps = sweeps.slice(1).map((e, i) => Number(e.monoMs) - Number(sweeps[i].monoMs));
  const toRequeue = Number(requeued.monoMs) - Number(sweeps[0].monoMs);
  const bound = LEASE.leaseMs + Math.max(everyMs, ...gaps) + 200;
  ctx.notes.push(
    `sweeper re-queued ${Math.round(toRequeue)} ms after its first sighting (bound ${Math.round(bound)}), DONE ${Math.round(doneAt - faultsStoppedAt)} ms after the faults stopped (one run: ${Math.round(doneAt - requeued.seenAtMs)} ms)`,
  );
  if (toRequeue > bound)
    ctx.violations.push(`invariant 6: re-queued ${Math.round(toRequeue)} ms after the first sighting, above lease + sweep period (${bound} ms)`);
}

async function duplicates(ctx: Ctx): Promise<void> {
  const n = 2 + Math.floor(ctx.random() * 2);
  count(ctx, 'duplicate-trigger', n - 1);
  const ws = Array.from({ length: n }, (_, i) => worker(ctx, `D${i}`, {}, ctx.random() < 0.5 ? ctx.engine : 'direct'));
  const codes = await Promise.all(ws.map((w) => w.exited));
  const completed = ws.filter((w) => w.events.some((e) => e.event === 'completed')).length;
  ctx.notes.push(`${n} runs together: exits ${codes.join(',')}, ${completed} completed`);
  if (completed !== 1) ctx.violations.push(`duplicates: ${completed} runs completed the night (expected exactly 1)`);
  for (const c of codes) if (c !== 0 && c !== 3) ctx.violations.push(`duplicates: a run exited ${c}`);
}

/** Whether the worker is stopped (state T in /proc), waited for up to `timeoutMs`; false if it ended first. */
async function stoppedItself(w: WorkerProcess, timeoutMs = 10_000): Promise<boolean> {
  const end = performance.now() + timeoutMs;
  while (performance.now() < end && w.child.exitCode === null && w.child.signalCode === null) {
    try {
      const stat = readFileSync(`/proc/${w.child.pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('T')) return true;
    } catch {
      return false;
    }
    await sleep(5);
  }
  return false;
}

async function clock(ctx: Ctx): Promise<void> {
  const step = ctx.random() < 0.5;
  const faked = fakeClock(step ? '+0' : '+3s');
  const env = faked.env;
  // The step lands while A holds the night: A stops itself after the check of its first batch, its wall clock steps
  // back 3 s, and only then is it continued (a step after A had exited would test nothing).
  const a = worker(ctx, 'A', { env, faults: step ? { sigstop: 'batch:0:0' } : undefined });
  const withB = ctx.random() < 0.5;
  // B starts once A holds the night, so that A is the holder whose stop times are checked, not a waiter.
  if (!(await reached(ctx, a, (e) => e.event === 'claim'))) {
    ctx.violations.push(`clock: A ended (exit ${a.child.exitCode}) before it claimed the night: the schedule tested nothing`);
    return;
  }
  const b = withB ? worker(ctx, 'B') : undefined;
  if (step) {
    if (!(await reached(ctx, a, (e) => e.event === 'fault'))) return;
    faked.set('-3s'); // the wall clock A sees steps back 3 s, mid-lease
    // A announces its stop, then stops: a SIGCONT sent in between would be lost and A would stay stopped for good.
    if (!(await stoppedItself(a))) ctx.violations.push('clock: A announced its stop but was not seen stopped within 10 s');
    a.child.kill('SIGCONT');
  }
  count(ctx, step ? 'clock-step-back' : 'clock-fast');
  await Promise.all([a.exited, b?.exited]);
  ctx.notes.push(
    `A's wall clock ${step ? 'stepped back 3 s while it held the night (stopped after the check of its first batch)' : 'ran 3 s fast'}${b ? ', B ran beside it' : ''}; ` +
      `A renewed ${a.events.filter((e) => e.event === 'renew').length} times`,
  );
  // Invariant 5: A's stop times follow its monotonic clock, whatever its wall clock does.
  for (const e of a.events.filter((x) => x.event === 'renew' || x.event === 'claim')) {
    const ahead = Number(e.stopAtMs) - Number(e.monoMs);
    if (ahead > LEASE.leaseMs - LEASE.marginMs + 5)
      ctx.violations.push(`invariant 5: A's stop time is ${ahead} ms ahead of its monotonic now (> lease - margin)`);
  }
}

async function store(ctx: Ctx): Promise<void> {
  const spec = `seed=${ctx.seed},throttle=${(0.03 + ctx.random() * 0.1).toFixed(3)},lost=${(0.03 + ctx.random() * 0.1).toFixed(3)}`;
  // The faults live in the worker's own SDK clients: a workflow worker runs the handlers' sources to use them (verify/chaos/faults.ts).
  const a = worker(ctx, 'A', { faults: { store: spec } });
  const b = ctx.random() < 0.4 ? worker(ctx, 'B', { faults: { store: spec.replace(/seed=\d+/, `seed=${ctx.seed + 1}`) } }) : undefined;
  await Promise.all([a.exited, b?.exited]);
  for (const w of [a, b]) {
    const line = w?.stderr.find((l) => l.startsWith('store-faults '));
    if (!line) continue;
    const counts = JSON.parse(line.slice('store-faults '.length)) as Record<string, number>;
    count(ctx, 'store-throttle', counts.throttle);
    count(ctx, 'store-lost-response', counts.lost);
  }
  ctx.notes.push(`store faults ${spec}${b ? ' on two workers' : ''}`);
}

async function sweeperRace(ctx: Ctx): Promise<void> {
  const a = worker(ctx, 'A');
  const trigger = randomTrigger(ctx);
  if (!(await reached(ctx, a, trigger.pred))) return;
  a.child.kill('SIGSTOP');
  count(ctx, 'pause');
  count(ctx, 'sweeper-race');
  const s = sweeper(ctx, 200);
  const b = worker(ctx, 'B');
  await waitDone(ctx, 90_000);
  a.child.kill('SIGCONT'); // A's late renewal meets a lease it lost
  await Promise.all([a.exited, b.exited]);
  s.child.kill('SIGTERM');
  await s.exited;
  const requeued = s.events.filter((e) => e.event === 'requeued').length;
  ctx.notes.push(
    `A stopped ${trigger.describe}; sweeper re-queued ${requeued}, B ${b.events.some((e) => e.event === 'completed') ? 'completed' : 'did not complete'}`,
  );
}

async function invoiceTokens(ctx: Ctx): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let start: Record<string, unknown> | undefined;
  do {
    const page = await ctx.o.clients.ddb.send(
      new ScanCommand({ TableName: tableNames(ctx.prefix).invoices, ConsistentRead: true, ExclusiveStartKey: start }),
    );
    for (const i of page.Items ?? []) out.set(String(i.pk), Number(i.token));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

/**
 * Run one of the process-fault scenarios with the workers' DynamoDB behind a proxy of its own (lib/local/dynamodb-proxy.ts),
 * so AWS's concurrency rules and cancellation reasons meet the pauses, crashes and races; its counts are the faults.
 */
async function throughProxy(ctx: Ctx, options: Omit<DynamoDbProxyOptions, 'target'>, label: string): Promise<void> {
  const proxy = await startDynamoDbProxy({ target: ctx.o.endpoints.dynamodb, ...options });
  ctx.endpoints = { ...ctx.o.endpoints, dynamodb: proxy.endpoint };
  ctx.chunkConcurrency = 3;
  const scenario = pick(ctx.random, ['pause', 'crash', 'duplicates', 'sweeper-race'] as const);
  try {
    await SCENARIOS[scenario](ctx);
  } finally {
    const st = proxy.stats();
    count(ctx, 'conflict', st.transactionConflicts + st.writeConflicts);
    for (const [k, n] of Object.entries(st.injected)) if (n > 0) count(ctx, `proxy-${k}`, n);
    ctx.notes.push(
      `${label}: ${scenario} through the proxy (${st.transactionConflicts} transaction and ${st.writeConflicts} write conflicts, injected ${JSON.stringify(st.injected)})`,
    );
    // Recovery and the audit that follow use the proxy too; it is stopped once the schedule is over.
    ctx.stopProxy = () => proxy.stop();
  }
}

async function conflict(ctx: Ctx): Promise<void> {
  // Wide, so that a zombie's late transaction and the new holder's raise, which meet only for a moment, overlap.
  await throughProxy(ctx, { conflictWindowMs: 50 + Math.floor(ctx.random() * 200) }, 'conflict window');
}

async function cancelThrottle(ctx: Ctx): Promise<void> {
  const rate = 0.02 + ctx.random() * 0.08;
  await throughProxy(
    ctx,
    {
      conflictWindowMs: 5,
      randomFaults: { seed: ctx.seed, rates: { 'throttle-cancel': rate, 'throughput-cancel': rate, 'http-500': rate / 4 } },
    },
    `cancellations at ${(rate * 100).toFixed(1)}%`,
  );
}

/** The billing night's kinds; `election` has its own schedule and checker (verify/chaos/election-chaos.ts). */
const SCENARIOS: Record<Exclude<Kind, 'election'>, (ctx: Ctx) => Promise<void>> = {
  pause,
  crash,
  duplicates,
  clock,
  store,
  'sweeper-race': sweeperRace,
  conflict,
  'cancel-throttle': cancelThrottle,
};

async function runSchedule(o: ChaosOptions, index: number, seed: number, kind: Kind): Promise<ScheduleResult> {
  // No billing night and no billing audit: the candidates' ledger is audited by its own checker.
  if (kind === 'election') return runElectionSchedule(o, index, seed, libfaketimeAvailable() ? fakeClock : undefined);
  const t0 = performance.now();
  const random = prng(seed);
  const ctx: Ctx = {
    seed,
    random,
    o,
    prefix: `c${seed.toString(36)}-`,
    bucket: `chaos-${seed.toString(36)}`,
    invoices: 300 + Math.floor(random() * 600),
    chunkSize: pick(random, [150, 200, 250]),
    engine: random() < (o.workflowShare ?? CHAOS_DEFAULTS.workflowShare) ? 'stepfunctions' : 'direct',
    endpoints: o.endpoints,
    chunkConcurrency: 1,
    faults: {},
    violations: [],
    workers: [],
    notes: [],
  };
  await provision(o.clients.raw, o.clients.s3, ctx.prefix, ctx.bucket);
  try {
    await SCENARIOS[kind](ctx);
  } catch (err) {
    ctx.violations.push(`the schedule could not run: ${(err as Error).message}`);
  } finally {
    for (const w of ctx.workers)
      if (w.child.exitCode === null && w.child.signalCode === null) {
        w.child.kill('SIGCONT');
        w.child.kill('SIGKILL');
      }
  }
  // Invariant 6: the faults have stopped. A holder may have given up on its own (its stop time passed on a loaded
  // machine: liveness, never safety); the deployed system's sweeper then brings the night to DONE.
  const after = await jobState(ctx);
  if (after === 'RUNNING') {
    ctx.notes.push('not DONE when the faults stopped: recovery by the sweeper');
    await recoverBySweeper(ctx, performance.now());
  } else if (after === undefined) {
    ctx.notes.push('never claimed when the faults stopped: a clean run');
    await worker(ctx, 'R').exited;
  }
  // Invariants 1–4 on the stores, and 6: once the faults stop, the night is DONE.
  await ctx.stopProxy?.();
  const report = await audit(auditDeps(o.clients, tableNames(ctx.prefix), ctx.bucket), DATE, ctx.invoices);
  for (const c of report.checks) if (!c.ok) ctx.violations.push(`invariant ${c.invariant}: ${c.name}: ${c.detail}`);
  if (report.state !== 'DONE') ctx.violations.push(`invariant 6: the night ended ${report.state ?? 'never claimed'}, not DONE`);
  const tokens = new Set(ctx.workers.flatMap((w) => w.events.filter((e) => e.event === 'claim').map((e) => e.token)));
  const fencedRejections = ctx.workers.reduce(
    (n, w) => n + w.events.filter((e) => e.event === 'batch-rejected' || e.event === 'commit-rejected').length,
    0,
  );
  return {
    index,
    seed,
    kind,
    engine: ctx.engine,
    ok: ctx.violations.length === 0,
    violations: ctx.violations,
    faults: ctx.faults,
    takeovers: Math.max(0, tokens.size - 1),
    fencedRejections,
    seconds: Math.round(performance.now() - t0) / 1000,
    detail: `${ctx.invoices} invoices / ${ctx.chunkSize}; ${ctx.notes.join('; ')}`,
  };
}

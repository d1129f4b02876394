/**
 * The reference's billing story, replayed with real processes on the embedded stack:
 *
 *   1. A holds the job;                                   4. B dies holding it (SIGKILL);
 *   2. A freezes (SIGSTOP, right after a passed check);   5. the sweeper finds the orphan through the sparse index,
 *   3. B takes over with a higher token and raises the       re-queues it, and C takes over and completes;
 *      fence first; A wakes and its late batch is refused    the lock is released.
 *      (B held still meanwhile, so A's batch meets the fence alone);
 *
 * The table is built only from the events the processes emitted (and the story's own signals, marked as such),
 * timed by their arrival here: one clock for every actor. With --time-scale below 1 A's and B's leases, renewals
 * and margins shrink in proportion, so the story runs faster than real time with the same shape; C keeps the
 * reference's own (takeoverLease).
 */
import { audit, auditDeps, type AuditReport } from '../apps/billing/audit';
import { type LeaseConfig } from '../lib/core/config';
import { DEFAULTS } from '../apps/billing/settings';
import { billingTables as tableNames } from '../apps/billing/schema';
import { provisionBilling as provision } from './billing-stores';
import type { Clients, Endpoints } from '../lib/core/aws/clients';
import { textTable } from './text-table';
import { startProcess, type SeenEvent, type WorkerProcess } from './chaos/worker-process';

export interface StoryRow {
  readonly t: number;
  readonly actor: string;
  readonly event: string;
  readonly token?: number;
  readonly fence?: number;
  readonly state?: string;
  readonly note?: string;
}

export interface StoryResult {
  readonly rows: StoryRow[];
  readonly audit: AuditReport;
  readonly seconds: number;
}

const DATE = '2026-09-28';
/** The story's night: its invoices and chunk size (the simulator's prediction of the story uses the same). */
export const STORY_NIGHT = { invoices: 2_000, chunkSize: 500 } as const;
const INVOICES = STORY_NIGHT.invoices;
const CHUNK = STORY_NIGHT.chunkSize;

/** The story in real time: the reference's own lease, renewal and margin. */
export const STORY_DEFAULTS = { timeScale: 1 } as const;

/** The reference's lease, renewal and margin (lib/core/config.ts DEFAULTS), scaled: the same story, faster or slower. */
export function storyLease(timeScale: number): Pick<LeaseConfig, 'leaseMs' | 'renewMs' | 'marginMs'> {
  return {
    leaseMs: Math.round(DEFAULTS.leaseMs * timeScale),
    renewMs: Math.round(DEFAULTS.renewMs * timeScale),
    marginMs: Math.round(DEFAULTS.marginMs * timeScale),
  };
}

/**
 * C's lease: the reference's own at least. Nobody waits out C's lease (C releases it when the night is done), so its
 * length costs the story nothing, while scaled it would leave C only (lease - margin - renew) = 1.25 s at time scale
 * 0.25 for a late renewal before its stop time; a loaded machine (2 cores, load 15) reached that, and C, rightly,
 * stopped and released the night part-billed. A's and B's leases stay scaled: their running out is their beats.
 */
export function takeoverLease(timeScale: number): Pick<LeaseConfig, 'leaseMs' | 'renewMs' | 'marginMs'> {
  return storyLease(Math.max(1, timeScale));
}

export async function playStory(endpoints: Endpoints, clients: Clients, timeScale: number, onRow?: (r: StoryRow) => void): Promise<StoryResult> {
  const { leaseMs, renewMs, marginMs } = storyLease(timeScale);
  const id = `${Date.now().toString(36)}`; // wall: only a name
  const prefix = `story${id}-`;
  const bucket = `story-${id}`;
  await provision(clients.raw, clients.s3, prefix, bucket);
  const stores = ['--dynamodb-endpoint', endpoints.dynamodb, '--s3-endpoint', endpoints.s3, '--table-prefix', prefix, '--bucket', bucket];
  const night = [
    '--date',
    DATE,
    '--invoices',
    String(INVOICES),
    '--chunk-size',
    String(CHUNK),
    '--engine',
    'direct',
    '--lease-ms',
    String(leaseMs),
    '--renew-ms',
    String(renewMs),
    '--margin-ms',
    String(marginMs),
  ];

  const t0 = performance.now();
  const rows: StoryRow[] = [];
  let fence: number | undefined;
  let state: string | undefined;
  const add = (row: Omit<StoryRow, 't' | 'fence' | 'state'> & { t?: number }) => {
    const r: StoryRow = { ...row, t: Math.round(((row.t ?? performance.now()) - t0) / 10) / 100, fence, state };
    rows.push(r);
    onRow?.(r);
  };
  const actors = new Map<string, string>([
    ['A', 'A'],
    ['B', 'B'],
  ]);
  const actorOf = (worker: string) => {
    if (!actors.has(worker)) actors.set(worker, worker.startsWith('sweeper-run') ? 'C' : worker.startsWith('sweeper') ? 'sweeper' : worker);
    return actors.get(worker)!;
  };
  const follow = (w: WorkerProcess) =>
    w.onEvent((e: SeenEvent) => {
      const actor = actorOf(String(e.worker));
      const at = e.seenAtMs;
      switch (e.event) {
        case 'fault':
          add({
            t: at,
            actor,
            event: `freezes (${e.fault.toUpperCase()}, after a passed check)`,
            note: `chunk ${String(e.chunk)}, batch ${String(e.batch)}`,
          });
          break;
        case 'sighted':
          if (e.holder !== undefined)
            add({
              t: at,
              actor,
              event: `sees ${actorOf(String(e.holder))}'s lease, watches its rvn for ${String(e.waitMs)} ms`,
              note: 'clock-free: rvn noted',
            });
          break;
        case 'claim':
          add({ t: at, actor, event: 'claims the lease', token: e.token });
          break;
        case 'fence-raised':
          fence = e.token;
          state = 'RUNNING';
          add({ t: at, actor, event: 'raises the fence first', token: e.token, note: `was ${String(e.previousFence ?? 'unset')}` });
          break;
        case 'chunk-committed':
          add({ t: at, actor, event: `commits chunk ${String(e.chunk)}`, token: e.token });
          break;
        case 'batch-rejected':
          add({ t: at, actor, event: 'late batch REFUSED by the fence', token: e.token, note: `met fence ${String(e.fence)}; nothing written` });
          break;
        case 'commit-rejected':
          add({ t: at, actor, event: 'manifest commit REFUSED (412)', token: e.token });
          break;
        case 'lease-lost':
          add({ t: at, actor, event: 'learns its lease is lost', token: e.token });
          break;
        case 'requeued':
          // The re-queue only counts: the row stays RUNNING in the index until C's raise (docs/DESIGN.md "The sweeper").
          add({
            t: at,
            actor,
            event: 'finds the orphan in the sparse index, re-queues it',
            note: `owner ${String(e.ownerToken)}, fence ${String(e.fence)}; stays RUNNING`,
          });
          break;
        case 'completed':
          state = 'DONE';
          add({ t: at, actor, event: 'completes the night', token: e.token });
          break;
        case 'released':
          add({ t: at, actor, event: 'releases the lock', token: e.token });
          break;
        default:
          break;
      }
    });

  // 1. A holds the job, and will freeze right after passing its check for chunk 1, batch 0.
  const a = startProcess(['run', ...stores, ...night, '--events', '--worker', 'A'], { faults: { sigstop: 'batch:1:0' } });
  follow(a);
  await a.waitFor((e) => e.fault === 'sigstop', 120_000);
  // 2.–3. B takes over after a full lease on its own clock; A is continued once B has raised the fence. B holds still
  // (at its own first batch, after its check) until A's late batch has met the fence: a transaction of B's in flight
  // on the same fence item would cancel A's with TransactionConflict, and A's resend would then stop at its stop time
  // without reaching the fence (safe, but not this beat). B goes on once A has exited.
  const b = startProcess(['run', ...stores, ...night, '--events', '--worker', 'B'], { faults: { sigstop: 'batch:1:0' } });
  follow(b);
  await b.waitFor((e) => e.fault === 'sigstop', 120_000);
  a.child.kill('SIGCONT');
  add({ actor: 'story', event: 'SIGCONT A' });
  await a.exited;
  b.child.kill('SIGCONT');
  add({ actor: 'story', event: 'SIGCONT B' });
  // 4. B dies holding the job, after committing one chunk.
  await b.waitFor((e) => e.event === 'chunk-committed', 120_000);
  b.child.kill('SIGKILL');
  add({ actor: 'story', event: 'SIGKILL B (B dies holding the job)', token: b.events.find((e) => e.event === 'claim')?.token });
  await b.exited;
  // 5. The sweeper sights the orphan twice, a lease apart (the lease B's lock item declares), re-queues it and starts
  // C, with C's own lease (its --lease-ms is the runs'). Once it has re-queued, the story asks the sweeper to stop
  // (SIGTERM to the sweeper alone, not its group: it ends its loop and waits for C, forwarding C's events): a later
  // sweep that found the row unchanged because C, still starting or waiting out B's lease, had not yet raised would
  // start a second C (the sweeper's answer to a run that dies before its raise); the story has one re-queue.
  const c = takeoverLease(timeScale);
  const s = startProcess([
    'sweep',
    ...stores,
    '--every',
    `${Math.max(100, Math.round(leaseMs / 2))}ms`,
    '--lease-ms',
    String(c.leaseMs),
    '--events',
    '--run-invoices',
    String(INVOICES),
    '--run-chunk-size',
    String(CHUNK),
    '--run-engine',
    'direct',
    '--run-renew-ms',
    String(c.renewMs),
    '--run-margin-ms',
    String(c.marginMs),
  ]);
  follow(s);
  s.onEvent((e) => {
    if (e.event !== 'requeued' || s.child.pid === undefined || s.child.exitCode !== null) return;
    try {
      process.kill(s.child.pid, 'SIGTERM');
    } catch {
      /* already gone: nothing left to stop */
    }
  });
  await s.waitFor((e) => e.event === 'requeued', 120_000);
  // The sweeper exits once C has: C's outcome (completed, or lost) is in its events.
  await s.exited;

  const report = await audit(auditDeps(clients, tableNames(prefix), bucket), DATE, INVOICES);
  return { rows, audit: report, seconds: Math.round(performance.now() - t0) / 1000 };
}

export function storyTable(result: StoryResult): string {
  const header = ['t (s)', 'actor', 'event', 'token', 'fence', 'state', 'note'];
  const body = result.rows.map((r) => [r.t.toFixed(2), r.actor, r.event, String(r.token ?? ''), String(r.fence ?? ''), r.state ?? '', r.note ?? '']);
  return [
    textTable(header, body),
    '',
    `audit: ${result.audit.ok ? 'all invariants hold' : 'INVARIANT BROKEN'}; state ${result.audit.state}, fence ${result.audit.fence}, epoch ${result.audit.epoch}, ${result.audit.invoicesFound}/${result.audit.invoicesExpected} invoices, tokens ${JSON.stringify(result.audit.tokensSeen)}`,
  ].join('\n');
}

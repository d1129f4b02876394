/**
 * The safety checks the worlds share, each written once: what the stores accepted under a fence, and the epochs the
 * lock handed out. Each returns its violations as sentences for the schedule's report.
 */
import type { LeaseConfig } from '../core/config';
import { jobKeys } from '../core/job-keys';
import type { BatchOutcome, FenceItem, JobStore } from '../core/store/jobs';
import { type CallLog, type FenceHistory, fenceOrderChecks, HOLDER_ACTS, type LockHistory, leaseOverlapChecks, stopTimeChecks } from './history';
import type { Check } from './world';

/** A fenced batch the store accepted, with the fence item's value just before it. */
export interface Accepted {
  readonly actor: string;
  readonly token: number;
  readonly fenceBefore: number | undefined;
  readonly fenceKey: string;
  readonly keys: readonly string[];
}

/** A successful claim: who was handed which epoch of which lock key. */
export interface Grant {
  readonly actor: string;
  readonly key: string;
  readonly epoch: number;
}

/** No batch below its fence, none below a batch already accepted under the same fence, each item recorded once. */
function acceptedChecks(accepted: readonly Accepted[]): string[] {
  const violations: string[] = [];
  const recordedBy = new Map<string, number>();
  const lastToken = new Map<string, number>();
  for (const a of accepted) {
    if (a.fenceBefore !== undefined && a.token < a.fenceBefore)
      violations.push(`${a.actor}'s batch at token ${a.token} accepted below the fence ${a.fenceBefore} (${a.fenceKey})`);
    const last = lastToken.get(a.fenceKey);
    if (last !== undefined && a.token < last)
      violations.push(`${a.actor}'s batch at token ${a.token} accepted after a batch at token ${last} (${a.fenceKey})`);
    lastToken.set(a.fenceKey, Math.max(a.token, last ?? -Infinity));
    for (const k of a.keys) recordedBy.set(k, (recordedBy.get(k) ?? 0) + 1);
  }
  for (const [k, n] of recordedBy) if (n > 1) violations.push(`item ${k} recorded ${n} times`);
  return violations;
}

/** Epochs strictly rise per lock key: one handed out twice (or a lower one after a higher) is a repeat. */
export function epochChecks(grants: readonly Grant[]): string[] {
  const violations: string[] = [];
  const lastEpoch = new Map<string, number>();
  for (const g of grants) {
    const last = lastEpoch.get(g.key);
    if (last !== undefined && g.epoch <= last)
      violations.push(`${g.actor} was handed epoch ${g.epoch} after epoch ${last} (${g.key}): an epoch repeated`);
    lastEpoch.set(g.key, Math.max(g.epoch, last ?? -Infinity));
  }
  return violations;
}

/** The outside records a world of fenced holders keeps for its checks. */
export interface HolderRecords {
  /** Each batch the store accepted, with the fence just before it (recordingBatches). */
  readonly accepted: readonly Accepted[];
  readonly fenceWrites: FenceHistory;
  readonly calls: CallLog;
  readonly lockWrites: LockHistory;
}

/**
 * The safety checks every world of fenced holders runs, named once: the batches against their fences, never two
 * holders at once, no act past its stop time, no claim while another lease runs, epochs never repeat.
 * @param settings - the schedule's lease, and the largest rate error its clocks were drawn with
 * @param twoHolders - "never two holders at once" over the world's own lock keys (twoHoldersChecks, per key)
 */
export function holderChecks<S extends HolderRecords>(
  settings: (w: S) => { readonly lease: Pick<LeaseConfig, 'leaseMs' | 'marginMs'>; readonly monoRate: number },
  twoHolders: Check<S>['check'],
): Check<S>[] {
  return [
    { name: 'batches: none below its fence or a newer one, each item once', check: (w) => acceptedChecks(w.accepted) },
    { name: "batches: each under its fence as raised, from the store's writes", check: (w) => fenceOrderChecks(w.fenceWrites.writes) },
    { name: 'never two holders at once', check: twoHolders },
    { name: 'no act past its stop time', check: (w) => stopTimeChecks(w.calls.calls, settings(w).lease, HOLDER_ACTS) },
    { name: 'no claim while another lease runs', check: (w) => leaseOverlapChecks(w.lockWrites.writes, settings(w).monoRate) },
    { name: 'epochs never repeat', check: (w) => epochChecks(w.lockWrites.claims()) },
  ];
}

/** What a DONE run's items are: how many, in `itemsTable`, those whose `pk` starts with `itemPrefix` (other runs' share the table). */
export interface RunItems {
  readonly count: number;
  readonly itemsTable: string;
  readonly itemPrefix?: string;
}

/** A DONE run has every item stored: the table's items as stored, counted. */
export async function itemsChecks(
  jobs: { dump(table: string): readonly unknown[] | Promise<readonly unknown[]> },
  items: RunItems,
): Promise<string[]> {
  const prefix = items.itemPrefix ?? '';
  const stored = (await jobs.dump(items.itemsTable)).filter((i) => String((i as { pk?: unknown }).pk).startsWith(prefix)).length;
  return stored === items.count ? [] : [`DONE with ${stored} items stored, the run has ${items.count}`];
}

/** A DONE run has every chunk fence recorded done (and every item stored, when `items` says how many). */
export async function doneChecks(
  jobs: JobStore & { dump(table: string): readonly unknown[] | Promise<readonly unknown[]> },
  run: {
    readonly jobId: string;
    readonly date: string;
    readonly chunks: number;
    /** The items a DONE run has. @default not counted */
    readonly items?: RunItems;
    readonly jobsTable: string;
  },
  keys: ReturnType<typeof jobKeys>,
): Promise<string[]> {
  const row = await jobs.readJob(run.jobId);
  if (row?.state !== 'DONE') return [];
  const violations = run.items ? await itemsChecks(jobs, run.items) : [];
  for (let c = 0; c < run.chunks; c++) {
    const fence = await jobs.readFence({ table: run.jobsTable, key: { pk: keys.chunkFence(run.date, c) } });
    if (fence?.done_by === undefined) violations.push(`DONE over chunk ${c}, not recorded done`);
  }
  return violations;
}

/** What `recordingBatches` fills in and reports to. */
export interface BatchLog {
  /** Every batch accepted: the first send of a request only (a replay under its ClientRequestToken wrote nothing). */
  readonly accepted: Accepted[];
  readonly seenRequests: Set<string>;
  readonly violations: string[];
  readonly log: (line: string) => void;
  /** Also log the batches the fence refused (the workflow world's trace does). */
  readonly logRefused?: boolean;
}

/**
 * `inner` as `actor` sees it, with every accepted batch recorded with the fence's value as it stood just before
 * (read from `truth`, the store itself, not the actor's view). A batch whose items were all recorded already still
 * passed the fence's check: below the fence, that is a violation too.
 */
export function recordingBatches(actor: string, inner: JobStore, truth: JobStore, into: BatchLog): JobStore {
  return new Proxy(inner, {
    get: (t, prop, receiver) => {
      if (prop !== 'recordBatch') return Reflect.get(t, prop, receiver) as unknown;
      return async (fence: FenceItem, token: number, puts: Parameters<JobStore['recordBatch']>[2], requestToken: string) => {
        const before = await truth.readFence(fence);
        const out: BatchOutcome = await t.recordBatch(fence, token, puts, requestToken);
        const fenceBefore = before?.fence === undefined ? undefined : Number(before.fence);
        const fenceKey = String(fence.key.pk);
        // Already recorded: the fence's check passed, only puts were refused (a check refused is fenced out).
        if (out.kind === 'already-recorded' && fenceBefore !== undefined && token < fenceBefore)
          into.violations.push(`${actor}'s batch at token ${token} passed the fence ${fenceBefore} (${fenceKey}), its items already recorded`);
        if (out.kind === 'recorded' && !into.seenRequests.has(requestToken)) {
          into.seenRequests.add(requestToken);
          const keys = puts.map((p) => JSON.stringify(p.item?.pk ?? p.document?.pk));
          into.accepted.push({ actor, token, fenceBefore, fenceKey, keys });
          into.log(`${actor} batch accepted token ${token} fence ${fenceBefore} ${fenceKey}`);
        } else if (out.kind === 'fenced-out' && into.logRefused) {
          into.log(`${actor} batch REFUSED token ${token} below fence ${fenceBefore} ${fenceKey}`);
        }
        return out;
      };
    },
  });
}

/**
 * What the checks read instead of the code under test's own verdicts: the record an outside observer keeps.
 *
 * - `CallLog` and `LockHistory` (lib/testing/call-log.ts, shared with the user's explorer): each actor's store calls
 *   as the actor made them, on its own clock and in true time; every lock write the lock store applied.
 * - `FenceHistory`: every fence raise and every batch the job store applied, in order: a batch accepted before its
 *   fence was raised to its token, or below the fence, is found in it, not in the store's answer.
 */
import type { VirtualClock } from '../core/clock';
import type { LeaseConfig } from '../core/config';
import type { BatchOutcome, Conditional, FenceItem, FenceStore } from '../core/store/jobs';
import { type Grant, type LockHistory, type LockWrite, type SentCall, leaseGrants, stopTimeAt } from './call-log';
import { through } from './process';

// The call log and the lock's write history live with the user's explorer, which computes the same stop times.
export { CallLog, LockHistory, type LockWrite, type SentCall } from './call-log';

/**
 * The largest monotonic rate error the margin covers, the same bound for a holder's clock and a claimant's: a holder
 * whose clock runs slow by r stops (lease - margin) / (1 - r) after its send, in true time; a claimant whose clock
 * runs fast by r claims lease / (1 + r) after it saw the holder's last write, at the soonest. The first must not
 * pass the second: (lease - margin)(1 + r) <= lease (1 - r), so r <= margin / (2 lease - margin).
 */
export function rateErrorCovered(lease: Pick<LeaseConfig, 'leaseMs' | 'marginMs'>): number {
  return lease.marginMs / (2 * lease.leaseMs - lease.marginMs);
}

/** The job-store writes that act for a holder: each carries its token. */
export const HOLDER_ACTS: ReadonlySet<string> = new Set(['raiseJob', 'raiseFence', 'recordBatch', 'markChunkDone', 'complete']);

/** The token an act carries: its second argument, or the raise's. */
function tokenOfAct(call: SentCall): number {
  const arg = call.args[1];
  return typeof arg === 'number' ? arg : Number((arg as { token: number }).token);
}

/**
 * Never two holders at once: no act (a write carrying a token) sent, in true time, after a newer token's claim of
 * `key` took effect. The lease's promise: while a holder's check passes, no other claim can have been granted. From
 * outside: the acts as the holders sent them, the claims as the store applied them.
 */
export function twoHoldersChecks(calls: readonly SentCall[], history: LockHistory, key: string, acts: ReadonlySet<string>): string[] {
  const claims = history.claims().filter((c) => c.key === key);
  const out: string[] = [];
  for (const a of calls) {
    if (!acts.has(a.method)) continue;
    const token = tokenOfAct(a);
    const newer = claims.find((c) => c.epoch > token && c.at <= a.trueSentAt);
    if (newer)
      out.push(
        `two holders at once: ${a.actor} sent ${a.method} at ${a.trueSentAt} ms with token ${token}, after ${newer.actor} claimed token ${newer.epoch} at ${newer.at} ms`,
      );
  }
  return out;
}

/** One write under a fence that the job store applied: a fence item raised to a token, or a batch accepted under one. */
export interface FenceWrite {
  readonly kind: 'raise' | 'batch';
  /** The fence item's key. */
  readonly fence: string;
  readonly token: number;
  /** When the store applied it, in true time. */
  readonly at: number;
}

/** The job store's applied fence writes: put `observe` around the one store every actor's view ends in. */
export class FenceHistory {
  readonly writes: FenceWrite[] = [];
  /** A batch resent under its request token writes nothing: only its first acceptance is a write. */
  private readonly requests = new Set<string>();

  constructor(private readonly clock: VirtualClock) {}

  observe<T extends FenceStore>(store: T): T {
    return through(store, (method, args, apply) => {
      if (method !== 'raiseFence' && method !== 'recordBatch') return apply(); // the rest as they are (a dump is not async)
      return apply().then((result) => {
        const at = this.clock.monotonicMs();
        const fence = () => String((args[0] as FenceItem).key.pk);
        if (method === 'raiseFence' && (result as Conditional<unknown>).ok)
          this.writes.push({ kind: 'raise', fence: fence(), token: Number(args[1]), at });
        if (method === 'recordBatch' && (result as BatchOutcome).kind === 'recorded' && !this.requests.has(String(args[3]))) {
          this.requests.add(String(args[3]));
          this.writes.push({ kind: 'batch', fence: fence(), token: Number(args[1]), at });
        }
        return result;
      });
    });
  }
}

/**
 * Every batch accepted under its fence exactly as raised, from the fence writes the store applied: the fence raised
 * to the batch's token before it (a holder raises first, then writes: a write before its raise can be followed by an
 * older holder's), and not above it (below the fence, a write must be refused).
 */
export function fenceOrderChecks(writes: readonly FenceWrite[]): string[] {
  const violations: string[] = [];
  const raised = new Map<string, number>();
  for (const w of writes) {
    const fence = raised.get(w.fence);
    if (w.kind === 'raise') raised.set(w.fence, Math.max(w.token, fence ?? -Infinity));
    else if (fence === undefined || fence < w.token)
      violations.push(
        `a batch at token ${w.token} was accepted into ${w.fence} at ${w.at} ms before its fence was raised to it (raised to ${fence ?? 'nothing'})`,
      );
    else if (fence > w.token) violations.push(`a batch at token ${w.token} was accepted into ${w.fence} at ${w.at} ms below the fence ${fence}`);
  }
  return violations;
}

/**
 * No claim while another holder's lease still runs, from the lock's write history: a lease runs from the write
 * that last claimed or renewed it (applied) for the lease its claim wrote, until then or its release. A claimant
 * times the lease on its own clock: one running fast by up to `maxRateError` waits lease / (1 + maxRateError) of
 * true time, and that is allowed.
 */
export function leaseOverlapChecks(writes: readonly LockWrite[], maxRateError = 0): string[] {
  const violations: string[] = [];
  const held = new Map<string, { holder: string; leaseMs: number; at: number }>();
  for (const w of writes) {
    const before = held.get(w.key);
    const runsTo = before ? before.at + before.leaseMs / (1 + maxRateError) : -Infinity;
    if (w.method === 'claim' && before && before.holder !== w.holder && w.at < runsTo)
      violations.push(`${w.holder} claimed ${w.key} at ${w.at} ms while ${before.holder}'s lease ran to ${runsTo} ms`);
    if (w.method === 'release') held.delete(w.key);
    else if (w.method === 'claim') held.set(w.key, { holder: w.holder, leaseMs: w.leaseMs ?? 0, at: w.at });
    else if (before?.holder === w.holder) held.set(w.key, { ...before, at: w.at });
  }
  return violations;
}

/**
 * No act past the holder's stop time, computed from outside: an act (a write carrying the holder's token) sent at
 * `t` needs a claim or renewal of the holder's own that was answered by `t`, before the stop time then standing, and
 * sent no earlier than `t - (lease - margin)`: the stop time counts from when a renewal was SENT, on the holder's
 * clock (stopTimeAt).
 * @param acts - the store methods that act for the holder
 */
export function stopTimeChecks(calls: readonly SentCall[], lease: Pick<LeaseConfig, 'leaseMs' | 'marginMs'>, acts: ReadonlySet<string>): string[] {
  const violations: string[] = [];
  // Each holder's grants, in the order it knew them (a stable sort: those known at once in the order of the calls).
  const grantsOf = new Map<string, Grant[]>();
  for (const g of leaseGrants(calls).sort((a, b) => a.knownAt - b.knownAt)) {
    const own = grantsOf.get(g.actor);
    if (own) own.push(g);
    else grantsOf.set(g.actor, [g]);
  }
  for (const act of calls) {
    if (!acts.has(act.method)) continue;
    const stopAt = stopTimeAt(grantsOf.get(act.actor) ?? [], act.sentAt, lease.leaseMs - lease.marginMs);
    if (stopAt === -Infinity) violations.push(`${act.actor} sent ${act.method} at ${act.sentAt} ms with no claim or renewal of its own answered`);
    else if (act.sentAt >= stopAt)
      violations.push(
        `${act.actor} sent ${act.method} at ${act.sentAt} ms, past its stop time ${stopAt} ms (its last renewal answered in time + lease - margin)`,
      );
  }
  return violations;
}

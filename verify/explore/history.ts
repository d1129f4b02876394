/**
 * What the checks read instead of the code under test's own verdicts: the record an outside observer keeps.
 *
 * - `CallLog`: each actor's store calls as the actor made them: when it sent each one and when (and whether) its
 *   answer came back, on the actor's own monotonic clock (which may run at its own rate), and when it sent it in
 *   true time. A stop time is computed from the actor's own readings, not read from the lease; whether two holders
 *   acted at once, from the true times.
 * - `LockHistory`: every lock write the lock store applied, when, and for whom: a claim while another holder's lease
 *   still runs is found in it, not in what the claimant believed.
 * - `FenceHistory`: every fence raise and every batch the job store applied, in order: a batch accepted before its
 *   fence was raised to its token, or below the fence, is found in it, not in the store's answer.
 */
import type { Clock, VirtualClock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import type { ClaimWrite, Holding, JoinRequest, LockItem, LockStore, WriteOutcome } from '../../lib/core/store/lock';
import type { BatchOutcome, Conditional, FenceItem, FenceStore } from '../../lib/core/store/jobs';
import { through } from '../../lib/testing/process';

/** One store call an actor sent. */
export interface SentCall {
  readonly actor: string;
  readonly method: string;
  readonly args: readonly unknown[];
  /** When the actor sent it, on the actor's own monotonic clock. */
  readonly sentAt: number;
  /** When the actor sent it, in true time (the world's clock). */
  readonly trueSentAt: number;
  /** When its answer reached the actor, on its own clock; absent while it has none (a crashed or paused actor's) or it was an error. */
  answeredAt?: number;
  /** The answer (absent with `answeredAt`). */
  result?: unknown;
}

/** An actor as the log sees it: its name and its own clock (lib/testing/process.ts SimProcess is one). */
export type Observed = Pick<Clock, 'monotonicMs'> & { readonly name: string };

/** Each actor's store calls, seen from outside the actor: put `observe` around what the actor's code is given. */
export class CallLog {
  readonly calls: SentCall[] = [];

  constructor(private readonly clock: VirtualClock) {}

  /** `store` as `actor`'s code calls it, every call recorded. Not a step boundary: it only watches. */
  observe<T extends object>(actor: Observed, store: T): T {
    return through(store, (method, args, apply) => {
      const call = this.sent(actor, method, args);
      return apply().then((result) => {
        call.answeredAt = actor.monotonicMs();
        call.result = result;
        return result;
      });
    });
  }

  /** An act of `actor`'s that makes no store call (a leader serving), recorded as sent now, with no answer. */
  act(actor: Observed, what: string, args: readonly unknown[] = []): void {
    this.sent(actor, what, args);
  }

  private sent(actor: Observed, method: string, args: readonly unknown[]): SentCall {
    const call: SentCall = { actor: actor.name, method, args, sentAt: actor.monotonicMs(), trueSentAt: this.clock.monotonicMs() };
    this.calls.push(call);
    return call;
  }
}

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

/** One lock write the store applied. */
export interface LockWrite {
  readonly method: 'claim' | 'renew' | 'release';
  readonly key: string;
  readonly holder: string;
  /** The lease the claim wrote (a renewal keeps its claim's). */
  readonly leaseMs?: number;
  /** The epoch a claim took (its token). */
  readonly epoch?: number;
  /** When the store applied it, in true time. */
  readonly at: number;
}

/** The lock store's applied writes: put `observe` around the one store every actor's view ends in. */
export class LockHistory {
  readonly writes: LockWrite[] = [];

  constructor(private readonly clock: VirtualClock) {}

  observe(store: LockStore): LockStore {
    return through(store, (method, args, apply) =>
      apply().then((result) => {
        this.record(method, args, result);
        return result;
      }),
    );
  }

  /**
   * One call the lock store has just applied, with its answer: kept if it is a write that took effect. (A world whose
   * scheduler already sees each call as it is applied records them from there, with no store of its own between.)
   */
  record(method: string, args: readonly unknown[], result: unknown): void {
    if ((method === 'claim' || method === 'renew' || method === 'release') && (result as WriteOutcome).ok) {
      const key = String(args[0]);
      const holder = method === 'claim' ? (args[2] as ClaimWrite).holder : (args[1] as Holding).holder;
      const leaseMs = method === 'claim' ? (args[2] as ClaimWrite).leaseMs : undefined;
      const epoch = method === 'claim' ? Number((result as Extract<WriteOutcome, { ok: true }>).item.epoch) : undefined;
      this.writes.push({ method, key, holder, leaseMs, epoch, at: this.clock.monotonicMs() });
    }
  }

  /** The claims that took effect, in the order applied: who, which key, the epoch it took, when. */
  claims(): { readonly actor: string; readonly key: string; readonly epoch: number; readonly at: number }[] {
    return this.writes.filter((w) => w.method === 'claim').map((w) => ({ actor: w.holder, key: w.key, epoch: w.epoch!, at: w.at }));
  }
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

/** A claim, renewal or join that took effect: when it was sent, when its holder knew it, and whether it starts a lease. */
interface Grant {
  readonly actor: string;
  readonly sentAt: number;
  readonly knownAt: number;
  /** A claim or a join starts a lease; a renewal extends the one held. */
  readonly starts: boolean;
}

/**
 * Each claim, renewal or election join that took effect, by whom, when it was sent and when the holder knew it:
 * answered, or (its answer lost) when its retry found the item holding its own rvn, counted from the first send.
 */
function leaseGrants(calls: readonly SentCall[]): Grant[] {
  // The first send of each request, by its actor, method and rvn (a retry resends the request with its rvn).
  const firstSends = new Map<string, SentCall>();
  const sendKey = (actor: string, method: string, rvn: unknown) => `${actor} ${method} ${String(rvn)}`;
  for (const c of calls) {
    const rvn =
      c.method === 'join'
        ? (c.args[0] as JoinRequest | undefined)?.candidate?.rvn
        : c.method === 'claim'
          ? (c.args[2] as ClaimWrite | undefined)?.rvn
          : undefined;
    if (rvn === undefined) continue;
    const key = sendKey(c.actor, c.method, rvn);
    if (!firstSends.has(key)) firstSends.set(key, c);
  }
  const out: Grant[] = [];
  for (const c of calls) {
    if (c.method === 'join' && c.answeredAt !== undefined) {
      // A join writes the candidate's own item, its lease from the first send of the request (retries resend it).
      const request = c.args[0] as JoinRequest;
      const first = firstSends.get(sendKey(c.actor, 'join', request.candidate.rvn))!;
      const known = (c.result as { ok: boolean } | undefined)?.ok
        ? c.answeredAt
        : calls.find(
            (o) =>
              o.actor === c.actor &&
              o.method === 'read' &&
              o.args[0] === request.candidateKey &&
              o.sentAt >= c.answeredAt! &&
              (o.result as LockItem | undefined)?.rvn === request.candidate.rvn,
          )?.answeredAt;
      if (known !== undefined) out.push({ actor: c.actor, sentAt: first.sentAt, knownAt: known, starts: true });
      continue;
    }
    if ((c.method !== 'claim' && c.method !== 'renew') || c.answeredAt === undefined) continue;
    const answer = c.result as WriteOutcome | undefined;
    if (answer?.ok) out.push({ actor: c.actor, sentAt: c.sentAt, knownAt: c.answeredAt, starts: c.method === 'claim' });
    else if (c.method === 'claim') {
      const write = c.args[2] as ClaimWrite;
      const current = answer?.current as { holder?: unknown; rvn?: unknown } | undefined;
      if (current?.holder !== write.holder || current?.rvn !== write.rvn) continue;
      const first = firstSends.get(sendKey(c.actor, 'claim', write.rvn))!;
      out.push({ actor: c.actor, sentAt: first.sentAt, knownAt: c.answeredAt, starts: true });
    }
  }
  return out;
}

/**
 * A holder's stop time at `t`, from its grants known by then (`grants` in the order it knew them): a claim or join
 * starts it at its send + `spanMs`; a renewal answered before the stop time moves it on from the renewal's send; one
 * answered at or after it moves nothing, and no later renewal does either: past its stop time the lease is over in
 * that process for good. A renewal with no lease before it (a lease taken up in another process) starts one.
 */
function stopTimeAt(grants: readonly Grant[], t: number, spanMs: number): number {
  let stopAt = -Infinity;
  let startedAt = -Infinity;
  let over = false;
  for (const g of grants) {
    if (g.knownAt > t) break;
    const own = g.sentAt + spanMs;
    // A lease started by a later send replaces the one held; an older start learnt late (a join whose answer was
    // lost, found by a read after the process had joined again) is a lease the process no longer acts under.
    if (g.starts && g.sentAt < startedAt) continue;
    if (g.starts || stopAt === -Infinity) [stopAt, over, startedAt] = [own, false, g.sentAt];
    else if (over || g.knownAt >= stopAt) over = true;
    else stopAt = Math.max(stopAt, own);
  }
  return stopAt;
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

/**
 * What an outside observer keeps of each actor's store calls, shared by the repository's worlds (verify/explore) and
 * the user's explorer (explore-job.ts): when each actor sent each call and when (and whether) its answer came back,
 * on the actor's own monotonic clock (which may run at its own rate), and when it sent it in true time. A holder's
 * stop time is computed from these readings (its own claims and renewals), never read from its lease. And the lock's
 * write history (`LockHistory`): every lock write the lock store applied, when, and for whom: a claim while another
 * holder's lease still runs is found in it, not in what the claimant believed.
 */
import type { Clock, VirtualClock } from '../core/clock';
import type { ClaimWrite, Holding, JoinRequest, LockItem, LockStore, WriteOutcome } from '../core/store/lock';
import { through } from './process';

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

/** A claim, renewal or join that took effect: when it was sent, when its holder knew it, and whether it starts a lease. */
export interface Grant {
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
export function leaseGrants(calls: readonly SentCall[]): Grant[] {
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
export function stopTimeAt(grants: readonly Grant[], t: number, spanMs: number): number {
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

/**
 * The user's explorer's check "no holder acts past its stop time", for the acts the fence cannot refuse: a plain write
 * of the user's own tables and a call on a fake service. Computed from outside, never from the lease's own `check()`:
 *
 *   - when the worker sent the act, on its own monotonic clock and in true time: read as the scheduler lets the call
 *     leave (after a pause that lands on it, so a pause right after a passed check makes a late send);
 *   - its stop time then, from its own readings of its claims and renewals (call-log.ts stopTimeAt: from the send of
 *     the last one answered in time), over the lease its claim wrote. The margin is not in any store call, so the
 *     check takes the latest stop time any margin allows (the lease itself): what it flags is past every stop time;
 *   - whether another worker's claim of a key the sender claimed had taken effect by then, in true time (the lock
 *     store's write history, LockHistory).
 *
 * An act past its stop time after another worker claimed is a violation, unless it is covered:
 *   - a fenced write is covered by its fence (the store refuses it below the fence), so it is not an act here;
 *   - a fake call carrying an idempotency key whose intent the fence accepted FOR THE SENDER before the call was sent
 *     (sendOnce: the intent recorded through the fence, then the call with its key). A holder paused between the two
 *     sends past its stop time all the same; the reference's answer for that gap is the key, which the provider
 *     dedupes (lib/core/effects.ts), not the stop time.
 */
import { Attr } from '../core/schema';
import type { BatchOutcome, BatchPut } from '../core/store/jobs';
import type { ClaimWrite } from '../core/store/lock';
import { type Grant, type LockHistory, type SentCall, leaseGrants, stopTimeAt } from './call-log';

/** One act the fence cannot refuse, as its worker sent it. */
export interface Act {
  readonly actor: string;
  /** The step's name: `tables.put`, `fakes.send`, … */
  readonly method: string;
  readonly args: readonly unknown[];
  /** A plain write of a table, or a call on a fake. */
  readonly kind: 'write' | 'effect';
  /** When the call left the worker, on its own monotonic clock. */
  readonly sentAt: number;
  /** When it left, in true time. */
  readonly trueSentAt: number;
  /** The store or the fake applied it (a call refused before it applied, or never sent, changed nothing). */
  applied: boolean;
}

/** The strings an argument carries, to a few levels down (a key passed alone, in an options object, in its headers). */
function stringsOf(value: unknown, depth = 3): string[] {
  if (typeof value === 'string') return [value];
  if (depth === 0 || typeof value !== 'object' || value === null) return [];
  return Object.values(value).flatMap((v) => stringsOf(v, depth - 1));
}

/** The idempotency keys whose intent the fence accepted for each worker, with when the worker read the answer. */
function acceptedIntents(calls: readonly SentCall[]): Map<string, { readonly key: string; readonly at: number }[]> {
  const out = new Map<string, { readonly key: string; readonly at: number }[]>();
  for (const c of calls) {
    if (c.method !== 'recordBatch' || c.answeredAt === undefined || (c.result as BatchOutcome).kind === 'fenced-out') continue;
    for (const put of c.args[2] as readonly BatchPut[]) {
      const key = put.document?.[Attr.idempotencyKey];
      if (typeof key === 'string') out.set(c.actor, [...(out.get(c.actor) ?? []), { key, at: c.answeredAt }]);
    }
  }
  return out;
}

/**
 * The acts sent past their senders' stop times after another holder claimed (see the file's opening).
 * @param calls - every worker's lock and job store calls, as its code sent them (CallLog)
 * @param locks - the lock writes the store applied
 * @param holderOf - the holder an actor acts for: itself (a worker of `exploreJob`), or its execution (a chunk
 *   function's invocation, which resumes the lease another invocation of its execution claimed)
 */
export function actsPastStopTime(
  acts: readonly Act[],
  calls: readonly SentCall[],
  locks: LockHistory,
  holderOf: (actor: string) => string = (actor) => actor,
): string[] {
  const intents = acceptedIntents(calls);
  const claims = locks.claims();
  // Each worker's own calls and the grants its readings give, read once for all its acts.
  const readings = new Map<string, { readonly own: readonly SentCall[]; readonly grants: readonly Grant[] }>();
  const readingsOf = (actor: string) => {
    let r = readings.get(actor);
    if (r === undefined) {
      const own = calls.filter((c) => c.actor === actor);
      r = { own, grants: leaseGrants(own).sort((a, b) => a.knownAt - b.knownAt) };
      readings.set(actor, r);
    }
    return r;
  };
  const violations: string[] = [];
  for (const act of acts) {
    if (!act.applied) continue;
    if (act.kind === 'effect') {
      const carried = act.args.flatMap((a) => stringsOf(a));
      if ((intents.get(act.actor) ?? []).some((i) => i.at <= act.sentAt && carried.includes(i.key))) continue;
    }
    const { own, grants } = readingsOf(act.actor);
    const holder = holderOf(act.actor);
    const claimsSent = own.filter((c) => c.method === 'claim' && c.sentAt <= act.sentAt);
    // The holder's claims the store applied by then: an invocation that resumed a lease claimed by another of its
    // execution's acts under that claim, for the lease it wrote.
    const held = locks.writes.filter((w) => w.method === 'claim' && w.holder === holder && w.at <= act.trueSentAt);
    const leaseMs = (claimsSent.at(-1)?.args[2] as ClaimWrite | undefined)?.leaseMs ?? held.at(-1)?.leaseMs ?? 0;
    const stopAt = stopTimeAt(grants, act.sentAt, leaseMs);
    if (act.sentAt < stopAt) continue;
    // Another holder's claim of a key the sender's holder claimed (of any key, if it claimed none), after its own.
    const keys = new Set([...claimsSent.map((c) => String(c.args[0])), ...held.map((w) => w.key)]);
    const newer = claims.find((c) => {
      if (c.actor === holder || c.at > act.trueSentAt || (keys.size > 0 && !keys.has(c.key))) return false;
      const mine = claims.filter((m) => m.actor === holder && m.key === c.key && m.at <= act.trueSentAt).at(-1);
      return mine === undefined || c.at > mine.at;
    });
    if (newer === undefined) continue;
    const what =
      act.kind === 'write'
        ? 'a plain write the fence cannot refuse: write it through the fence'
        : 'an effect with no intent accepted by the fence: send it through sendOnce';
    const ms = (t: number) => `${Math.round(t)} ms`;
    const stop = stopAt === -Infinity ? 'with no claim or renewal of its own answered' : `past its stop time ${ms(stopAt)}`;
    violations.push(
      `acted past its stop time: ${act.actor} sent ${act.method} at ${ms(act.sentAt)} on its clock (${ms(act.trueSentAt)} true), ${stop}, after ${newer.actor} claimed ${newer.key} at ${ms(newer.at)}: ${what}`,
    );
  }
  return violations;
}

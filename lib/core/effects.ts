/**
 * Side effects the fence cannot reach: an email, a payment, a webhook. The store that refuses a late holder's write
 * cannot refuse its call to someone else's API, so each effect is made safe in three steps around the call:
 *
 *   1. the intent, recorded THROUGH the fence (one transaction: the fence's check and the effect's record): a holder
 *      the fence refuses cannot record it, and does not call;
 *   2. the call, after the stop-time check, with an idempotency key derived from the job's fence and the effect's own
 *      id, never from the token: every holder that makes the call sends the same key;
 *   3. the call's answer recorded DONE (not fenced: the call was made, whoever holds the lease now).
 *
 * A later holder (a takeover, a retry) finds each effect's record: DONE is skipped; an intent without DONE means the
 * holder before it may or may not have called, so it calls again with the same key.
 *
 * What this guarantees, with a provider that deduplicates by idempotency key (Stripe, SES's and most payment APIs'
 * keys, a Lambda behind Powertools' idempotency): each effect is delivered once. With one that does not: each
 * effect is delivered at least once and twice at most where a holder called and then died, or paused past its stop
 * time, before recording it DONE. What it does not: it cannot take a call back, and it cannot stop a holder paused
 * between its stop-time check and its call from making that call (with the same key, which the provider dedupes).
 */
import { createHash } from 'node:crypto';
import { wallIso } from './clock';
import { backoffOf, retryTransient } from './conditions';
import { ConfigError } from './errors';
import { transact, type FenceHold } from './fenced-record';
import { Attr } from './schema';

/** Where the effects' records go, for `sendOnce` and `held.sendOnce`. */
export interface EffectOptions {
  /**
   * The table of the effects' records (partition key `pk`, a string): the fence's own table by default (the job
   * table has that key). @defaultValue the fence item's table
   */
  readonly table?: string;
}

/** What `sendOnce` did. */
export interface EffectOutcome {
  /** The idempotency key the call was (or had been) sent with. */
  readonly idempotencyKey: string;
  /** True when this holder made the call; false when an earlier holder's call was recorded DONE, and nothing was sent. */
  readonly sent: boolean;
  /** What the call answered, as recorded (this holder's, or the earlier holder's). */
  readonly result?: string;
}

/**
 * The idempotency key of effect `effect` of the job whose fence is `held`'s: the same for every holder (no token in
 * it), apart for every job and effect. 40 hex digits after `fp-`, within every provider's limit we know of.
 */
export function idempotencyKeyOf(held: Pick<FenceHold, 'fence'>, effect: string): string {
  const { table, key } = held.fence.item;
  return `fp-${createHash('sha256')
    .update(JSON.stringify([table, Object.entries(key).sort(), effect]))
    .digest('hex')
    .slice(0, 40)}`;
}

/**
 * Make `send` once for the job, whatever the holders before this one did: record the intent through the fence,
 * check the stop time, call `send(idempotencyKey)`, record its answer DONE. An effect an earlier holder recorded DONE
 * is not sent again; one it recorded only as an intent is sent again, with the same key.
 * @param held - the fence the lease holds (`lease.fenced(fence)`), raised first
 * @param effect - the effect's own id in the job (`email#ana`): never reused for another effect of the job
 * @param send - the call; give the provider the key (an `Idempotency-Key` header, a ClientToken, …); what it returns
 * (a message id) is recorded
 * @throws FencedOutError when a newer holder raised the fence: nothing recorded, nothing sent; the holder's
 * StopTimePassedError or LeaseLostError from its check (before the call: not sent); what `send` throws (the intent
 * stays recorded; the next holder, or a retry, sends again with the same key)
 */
export async function sendOnce(
  held: FenceHold,
  effect: string,
  send: (idempotencyKey: string) => Promise<string | void>,
  options: EffectOptions = {},
): Promise<EffectOutcome> {
  if (effect.length === 0 || effect.length > 512) throw new ConfigError([`an effect's id must be 1-512 characters, got ${effect.length}`]);
  const fence = held.fence;
  const store = fence.store;
  const table = options.table ?? fence.item.table;
  const idempotencyKey = idempotencyKeyOf(held, effect);
  const pk = `effect#${idempotencyKey}`;
  const backoff = backoffOf(fence.target);
  const seen = await store.readEffect(table, pk);
  if (seen?.state === 'DONE') return { idempotencyKey, sent: false, ...(seen.result === undefined ? {} : { result: seen.result }) };
  // The intent is an act: checked right before it is sent, not before the read (a holder paused in the read would
  // send it past its stop time).
  held.check();
  // 1. The intent, through the fence. Recorded already (an earlier holder's intent, or this send's own answer lost):
  // the fence's check passed all the same, which is what lets this holder call.
  const record = {
    [Attr.pk]: pk,
    [Attr.state]: 'INTENT',
    [Attr.effect]: effect,
    [Attr.idempotencyKey]: idempotencyKey,
    [Attr.token]: held.token,
    [Attr.intentAt]: wallIso(fence.target.clock),
  };
  // The fenced writer's one transaction: resent unchanged after a transient failure (the check first), a refusal
  // thrown as FencedOutError or FenceNotRaisedError.
  const out = await transact(held, [{ table, keyAttribute: Attr.pk, document: record }], 'effect');
  if (out.alreadyRecorded.length > 0) {
    const now = await store.readEffect(table, pk);
    if (now?.state === 'DONE') return { idempotencyKey, sent: false, ...(now.result === undefined ? {} : { result: now.result }) };
  }
  // 2. The call, checked first: past the stop time, nothing is sent (the intent stays for the next holder).
  held.check();
  const result = (await send(idempotencyKey)) ?? undefined;
  // 3. DONE, with the answer. A holder that dies here leaves the intent: the next one sends again, with the same key.
  await retryTransient(backoff, () =>
    store.markEffectDone(table, pk, { token: held.token, wallIso: wallIso(fence.target.clock), ...(result === undefined ? {} : { result }) }),
  );
  return { idempotencyKey, sent: true, ...(result === undefined ? {} : { result }) };
}

/**
 * One fenced transaction of the store (FenceStore.recordBatch) as a holder sends it, and what its outcomes mean: the
 * one place both the fenced writer (lib/core/batch.ts) and the side effects' intent (lib/core/effects.ts) send through.
 * It takes the fence as its holder holds it, structurally (a HeldFence is one), so neither the fence's module nor the
 * modules it builds on need to import the other's.
 */
import { createHash } from 'node:crypto';
import type { Clock } from './clock';
import { backoffOf, retryTransient } from './conditions';
import { FenceNotRaisedError, FencedOutError } from './errors';
import { Attr } from './schema';
import type { BatchPut, FenceItem, FenceStore } from './store/jobs';

/** What a fenced transaction needs of the fence its holder holds (a HeldFence is one): its item, store and clock, the token, the check. */
export interface FenceHold {
  readonly fence: {
    readonly resource: string;
    /** @internal */
    readonly item: FenceItem;
    /** @internal */
    readonly store: FenceStore;
    readonly target: { readonly clock: Clock; readonly random?: () => number };
  };
  readonly token: number;
  check(): void;
}

/**
 * One cut (at most 99 puts) under the fence, until every put is recorded or found recorded; positions in `puts`.
 * What each outcome means (docs/DESIGN.md "Retry classification"):
 *   - fenced out (the check failed): the fence no longer accepts our token → FencedOutError, nothing was written;
 *     a fence item that does not exist or has no fence was never raised → FenceNotRaisedError;
 *   - already recorded (a put's condition failed): drop those puts and send the rest (a new request, so a new
 *     ClientRequestToken). A conflict reported beside it changes nothing: the condition decides;
 *   - a transient failure (thrown): the SAME request again after a full-jitter backoff (one budget for the cut), with
 *     the same ClientRequestToken.
 */
export async function transact(held: FenceHold, puts: readonly BatchPut[], call: string): Promise<Positions> {
  const { fence, token } = held;
  let pending = puts.map((_, i) => i);
  const alreadyRecorded: number[] = [];
  let transactions = 0;
  let sends = 0;
  // The loop keeps its state across retryTransient's attempts: a transient failure resends the same pending request.
  return retryTransient(backoffOf(fence.target), async () => {
    while (pending.length > 0) {
      // The first send is the caller's act, checked by the caller; a retry after a backoff, or the rest after some
      // were found recorded, comes later than the caller's check: the holder's stop time first.
      if (sends++ > 0) held.check();
      transactions++;
      const request = pending.map((i) => puts[i]);
      const out = await fence.store.recordBatch(fence.item, token, request, requestToken(held, request, call));
      if (out.kind === 'recorded') return { recorded: pending, alreadyRecorded, transactions };
      if (out.kind === 'fenced-out') {
        const met = out.current?.[Attr.fence];
        // The check's ALL_OLD is the fence item: none (or no fence on it) means nobody ever raised it.
        if (met === undefined) throw new FenceNotRaisedError(fence.resource, token, { cause: out.cause });
        throw new FencedOutError(fence.resource, token, Number(met), { cause: out.cause });
      }
      const refused = new Set(out.positions.map((p) => pending[p]));
      alreadyRecorded.push(...pending.filter((i) => refused.has(i)));
      pending = pending.filter((i) => !refused.has(i));
    }
    return { recorded: [], alreadyRecorded, transactions };
  });
}

/** What one cut did, by position in its puts. */
export interface Positions {
  readonly recorded: readonly number[];
  readonly alreadyRecorded: readonly number[];
  readonly transactions: number;
}

/**
 * Same request in the same call, same ClientRequestToken; any other request or call, another one. DynamoDB scopes the
 * token to the account, not the table, and rejects a reused token with other parameters, so the tables and every
 * item's content are in it.
 */
export function requestToken(held: Pick<FenceHold, 'fence' | 'token'>, puts: readonly TokenPut[], call = ''): string {
  const h = createHash('sha256').update(`${call}|${held.fence.item.table}|${JSON.stringify(held.fence.item.key)}|${held.token}`);
  // The items as the caller built them: the same request serialises the same way (JSON.stringify is native, and an
  // item's attributes keep their order), any other content another way.
  for (const p of puts) {
    h.update(`|${p.table}|${p.keyAttribute ?? 'pk'}|`);
    h.update(p.item ? JSON.stringify(p.item) : `doc:${JSON.stringify(p.document, documentJson)}`);
  }
  return h.digest('hex').slice(0, 36);
}

/** A put as the request token reads it: a FencedPut, or a BatchPut (wire item or document). */
type TokenPut = Pick<BatchPut, 'table' | 'item' | 'document'> & { readonly keyAttribute?: string };

/** Sets, bytes and bigints as JSON, so their content is in the token (JSON.stringify writes a Set as `{}`). */
function documentJson(_key: string, v: unknown): unknown {
  if (v instanceof Set) return { set: [...(v as Set<unknown>)] };
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('base64') };
  return typeof v === 'bigint' ? { bigint: String(v) } : v;
}

/**
 * The fenced write (reference Part 5): one transaction of 1 check on a fence (`Fence.guard`) + up to 99 puts, each
 * item recorded once (only if its key is absent). The check and the puts commit together or not at all, so a holder
 * whose token the fence no longer accepts writes nothing. The transaction itself is the store's (FenceStore
 * .recordBatch; on DynamoDB, core/aws/job-store.ts); this file decides what its outcomes mean.
 *
 * What this guarantees: every put of a call lands at most once, and only while the fence accepts the token; a call
 * that returns has every put recorded (by this call or before it). What it does NOT guarantee: that an item
 * recorded before was recorded by the same holder or with the same content (a takeover redoing a batch finds the
 * earlier holder's items, "already recorded"), nor anything about writes that do not carry the guard.
 *
 * Items are given in the low-level wire form and sent as they are: the document client's generic marshalling cost a
 * third of the client CPU per transaction on the billing night (bench/waste.ts).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Clock } from './clock';
import { backoffOf, retryTransient } from './conditions';
import { MAX_PUTS_PER_TRANSACTION } from './config';
import { ConfigError, FencedOutError } from './errors';
import { Attr } from './schema';
import type { AttributeValue } from './aws/document-client';
import type { BatchPut, FenceItem, FenceStore } from './store/jobs';

/** One item to record once under the fence. */
export interface FencedPut {
  /** The table to put the item in. */
  readonly table: string;
  /** The whole item, in AttributeValue form (`{ pk: { S: 'inv#1' }, amount: { N: '100' } }`). */
  readonly item: Readonly<Record<string, AttributeValue>>;
  /** The item's partition key attribute: the put lands only if no item with this key exists. @default 'pk' */
  readonly keyAttribute?: string;
}

/**
 * What a fenced batch did. Fenced out is not a result: it is thrown (FencedOutError), since the holder must stop.
 */
export interface BatchResult {
  /**
   * The puts this call's own transactions wrote: each is counted here by exactly one call, the one that wrote it (its
   * ClientRequestToken is this call's alone, so a success is never another call's transaction replayed).
   */
  readonly recorded: readonly FencedPut[];
  /**
   * The puts refused because an item with their key already existed: recorded before this call, by an earlier holder
   * (a takeover redoing a batch) or an earlier call of the same holder (a retried chunk, also one that never heard
   * the answer to its write). Not an error: each item is recorded once. Their content was not compared with ours.
   */
  readonly alreadyRecorded: readonly FencedPut[];
  /** Transactions sent, including the retries. */
  readonly transactions: number;
}

/** What a batch needs of its fence: pass the `Fence` that `fenceOn` made (its item, name, store and clock). */
export interface BatchFence {
  /** What FencedOutError reports. */
  readonly resource: string;
  /**
   * Where the fence item lives.
   * @internal
   */
  readonly item: FenceItem;
  /**
   * Where the transaction goes.
   * @internal
   */
  readonly store: FenceStore;
  /** Times the retry backoff, and its jitter source. */
  readonly target: { readonly clock: Clock; readonly random?: () => number };
}

/**
 * The puts as the store takes them (the key attribute made explicit).
 * @throws ConfigError for more than 99 puts: a transaction holds 100 actions and one is the fence's check
 */
export function batchPuts(puts: readonly FencedPut[]): BatchPut[] {
  if (puts.length > MAX_PUTS_PER_TRANSACTION) {
    throw new ConfigError([
      `a fenced batch holds at most ${MAX_PUTS_PER_TRANSACTION} puts (a transaction holds 100 actions and one is the fence check), got ${puts.length}`,
    ]);
  }
  return puts.map((p) => ({ table: p.table, item: p.item, keyAttribute: p.keyAttribute ?? 'pk' }));
}

/**
 * Write `puts` under the fence, in one transaction of 1 check + the puts (at most 99). What its outcome means
 * (docs/DESIGN.md "Retry classification"):
 *   - fenced out (the check failed): the fence no longer accepts our token → FencedOutError, nothing was written;
 *   - already recorded (a put's condition failed): drop those puts and send the rest (a new request, so a new
 *     ClientRequestToken). A conflict reported beside it changes nothing: the condition decides;
 *   - a transient failure (thrown: TransactionConflict, throttling, …): the SAME request again after a full-jitter
 *     backoff (retryTransient, one budget for the whole call), with the same ClientRequestToken, so a retry of a
 *     transaction that was applied but whose answer was lost succeeds without writing again (10 minutes).
 * The token is this call's own: a success is this call's transaction, applied by it (now, or by an earlier send of
 * this call whose answer was lost), so its puts are `recorded` by this call. Another call with the same puts (a
 * retried chunk) sends another token, and the store evaluates the conditions: the puts come back `alreadyRecorded`,
 * never counted a second time as a replayed success would.
 * @param fence - the fence whose check the transaction carries (its store, clock and jitter source are used)
 * @param token - the holder's fencing token
 * @param puts - at most 99 items; none sends nothing
 * @returns which puts this call recorded and which were already recorded
 * @throws ConfigError for more than 99 puts (before anything is sent); FencedOutError when the fence refused the
 * token; the store's error for anything permanent, or transient past the retries
 */
export async function writeBatch(fence: BatchFence, token: number, puts: readonly FencedPut[]): Promise<BatchResult> {
  batchPuts(puts); // throws ConfigError before the first send
  let pending = puts;
  const alreadyRecorded: FencedPut[] = [];
  let transactions = 0;
  const call = randomUUID();
  // The loop keeps its state across retryTransient's attempts: a transient failure resends the same pending request.
  return retryTransient(backoffOf(fence.target), async () => {
    while (pending.length > 0) {
      transactions++;
      const out = await fence.store.recordBatch(fence.item, token, batchPuts(pending), requestToken(fence, token, pending, call));
      if (out.kind === 'recorded') return { recorded: pending, alreadyRecorded, transactions };
      if (out.kind === 'fenced-out') {
        const met = out.current?.[Attr.fence];
        throw new FencedOutError(fence.resource, token, met === undefined ? undefined : Number(met), { cause: out.cause });
      }
      const refused = new Set(out.positions);
      alreadyRecorded.push(...pending.filter((_, i) => refused.has(i)));
      pending = pending.filter((_, i) => !refused.has(i));
    }
    return { recorded: [], alreadyRecorded, transactions };
  });
}

/**
 * Same request in the same call, same ClientRequestToken; any other request or call, another one. DynamoDB scopes the
 * token to the account, not the table, and rejects a reused token with other parameters, so the tables and every
 * item's content are in it.
 */
export function requestToken(fence: Pick<BatchFence, 'item'>, token: number, puts: readonly FencedPut[], call = ''): string {
  const h = createHash('sha256').update(`${call}|${fence.item.table}|${JSON.stringify(fence.item.key)}|${token}`);
  // The items as the caller built them: the same request serialises the same way (JSON.stringify is native, and an
  // item's attributes keep their order), any other content another way.
  for (const p of puts) h.update(`|${p.table}|${p.keyAttribute ?? 'pk'}|`).update(JSON.stringify(p.item));
  return h.digest('hex').slice(0, 36);
}

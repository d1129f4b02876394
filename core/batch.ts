/**
 * The fenced write (reference Part 5): one TransactWriteItems of 1 ConditionCheck on a fence (`Fence.guard`) + up to
 * 99 Puts, each item recorded once (attribute_not_exists on its key). The check and the puts commit together or not
 * at all, so a holder whose token the fence no longer accepts writes nothing.
 *
 * What this guarantees: every put of a call lands at most once, and only while the fence accepts the token; a call
 * that returns has every put recorded (by this call or before it). What it does NOT guarantee: that an item
 * recorded before was recorded by the same holder or with the same content (a takeover redoing a batch finds the
 * earlier holder's items, "already recorded"), nor anything about writes that do not carry the guard.
 *
 * Items are given in the low-level AttributeValue form and sent as they are: the document client's generic
 * marshalling cost a third of the client CPU per transaction on the billing night (bench/waste.ts).
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  TransactWriteItemsCommand,
  type AttributeValue,
  type TransactWriteItem,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import { DEFAULT_BACKOFF, cancellationReasons, classifyCancellation, fullJitterMs, isTransient } from './conditions';
import { MAX_PUTS_PER_TRANSACTION } from './config';
import { ConfigError } from './errors';
import type { Fence } from './fence';

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
  /** TransactWriteItems calls made, including the retries. */
  readonly transactions: number;
}

/**
 * The request for one fenced transaction: `fence.guard(token)` at position 0, then one Put per item with
 * attribute_not_exists on its key, and a ClientRequestToken derived from the whole request and the call sending it
 * (the same request in the same call, the same token; any other request or call, another one: DynamoDB rejects a
 * reused token with other parameters).
 * @param call - names the writeBatch call that sends it @default none: the token follows the request alone
 * @throws ConfigError for more than 99 puts: a transaction holds 100 actions and one is the fence's check
 */
export function fencedTransaction(fence: Fence, token: number, puts: readonly FencedPut[], call?: string): TransactWriteItemsCommandInput {
  if (puts.length > MAX_PUTS_PER_TRANSACTION) {
    throw new ConfigError([
      `a fenced batch holds at most ${MAX_PUTS_PER_TRANSACTION} puts (a transaction holds 100 actions and one is the fence check), got ${puts.length}`,
    ]);
  }
  const items = puts.map((p): TransactWriteItem => ({
    Put: {
      TableName: p.table,
      Item: p.item,
      // Recorded once: the put lands only if no holder recorded this key before.
      ConditionExpression: 'attribute_not_exists(#key)',
      ExpressionAttributeNames: { '#key': p.keyAttribute ?? 'pk' },
    },
  }));
  return { ClientRequestToken: requestToken(fence, token, puts, call), TransactItems: [fence.guard(token), ...items] };
}

/**
 * Write `puts` under the fence, in one transaction of 1 check + the puts (at most 99). A cancellation is decided by
 * its reasons (conditions.classifyCancellation; docs/DESIGN.md "Retry classification"):
 *   - ConditionalCheckFailed on the check (position 0): the fence no longer accepts our token → FencedOutError,
 *     nothing was written;
 *   - ConditionalCheckFailed on a Put: that item was already recorded; drop it and send the rest (a new request,
 *     so a new ClientRequestToken). A conflict reported beside it changes nothing: the condition decides;
 *   - only transient reasons (TransactionConflict: another transaction or write held one of our items, the fence
 *     item we only check included; throttling), or any other transient error: send the SAME request again after a
 *     full-jitter backoff, with the same ClientRequestToken, so a retry of a transaction that was applied but whose
 *     answer was lost succeeds without writing again (DynamoDB keeps the token for 10 minutes).
 * The token is this call's own: a success is this call's transaction, applied by it (now, or by an earlier send of
 * this call whose answer was lost), so its puts are `recorded` by this call. Another call with the same puts (a
 * retried chunk) sends another token, and DynamoDB evaluates the conditions: the puts come back `alreadyRecorded`,
 * never counted a second time as a replayed success would.
 * @param fence - the fence whose guard the transaction carries (its client, clock and jitter source are used)
 * @param token - the holder's fencing token
 * @param puts - at most 99 items; none sends nothing
 * @returns which puts this call recorded and which were already recorded
 * @throws ConfigError for more than 99 puts (before anything is sent); FencedOutError when the fence refused the
 * token; the store's error for anything permanent, or transient past the retries
 */
export async function writeBatch(fence: Fence, token: number, puts: readonly FencedPut[]): Promise<BatchResult> {
  let pending = puts;
  const alreadyRecorded: FencedPut[] = [];
  let transactions = 0;
  let transientRetries = 0;
  const { ddb, clock, random = Math.random } = fence.target;
  const call = randomUUID();
  while (pending.length > 0) {
    const request = fencedTransaction(fence, token, pending, call); // throws ConfigError before the first send
    transactions++;
    try {
      await ddb.send(new TransactWriteItemsCommand(request));
      return { recorded: pending, alreadyRecorded, transactions };
    } catch (err) {
      const reasons = cancellationReasons(err);
      const cancellation = reasons === undefined ? undefined : classifyCancellation(reasons);
      if (reasons !== undefined && cancellation?.kind === 'condition') {
        const fencedOut = fence.fencedOut(err, token); // the guard sits at position 0
        if (fencedOut) throw fencedOut;
        const refused = new Set(cancellation.failed.map((i) => i - 1)); // position i is pending[i - 1]
        alreadyRecorded.push(...pending.filter((_, i) => refused.has(i)));
        pending = pending.filter((_, i) => !refused.has(i));
        continue;
      }
      if (isTransient(err) && transientRetries < DEFAULT_BACKOFF.retries) {
        await clock.sleep(fullJitterMs(transientRetries++, random));
        continue;
      }
      throw err;
    }
  }
  return { recorded: [], alreadyRecorded, transactions };
}

/**
 * Same request in the same call, same ClientRequestToken; any other request or call, another one. DynamoDB scopes the
 * token to the account, not the table, and rejects a reused token with other parameters, so the tables and every
 * item's content are in it.
 */
function requestToken(fence: Fence, token: number, puts: readonly FencedPut[], call = ''): string {
  const h = createHash('sha256').update(`${call}|${fence.target.table}|${JSON.stringify(fence.target.key)}|${token}`);
  // The items as the caller built them: the same request serialises the same way (JSON.stringify is native, and an
  // item's attributes keep their order), any other content another way.
  for (const p of puts) h.update(`|${p.table}|${p.keyAttribute ?? 'pk'}|`).update(JSON.stringify(p.item));
  return h.digest('hex').slice(0, 36);
}

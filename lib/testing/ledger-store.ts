/**
 * The epoch ledger's store in memory, keeping DynamoDB's rules for what the epoch fence uses (the conformance suite
 * test/store/ledger-store-conformance.test.ts runs the same tests on it and on DynamoDB Local):
 *   - a raise is a conditional update: refused with the fence item as it was (ALL_OLD), nothing written;
 *   - an append is one transaction of two actions, all or nothing: when a condition fails nothing is written, and
 *     the answer gives a reason per action at its position (ConditionalCheckFailed or None) and the fence item as it
 *     was when its own condition failed;
 *   - ClientRequestToken: an append sent again with the same token within 10 minutes (on the injected clock) of the
 *     first one that completed answers ok and writes nothing; the same token with another request within those 10
 *     minutes throws IdempotentParameterMismatchException; after them the token is new;
 *   - reads are strongly consistent; items are copied in and out, so a caller never shares an object with the store.
 * Not emulated: TransactionConflict (every call is applied at once, so no two transactions overlap; a harness
 * injects conflicts and throttles around the store), TransactionInProgressException for a token whose first request
 * is still running, capacity and item-size limits, Scan paging.
 */
import type { Clock } from '../core/clock';
import { RequestTokens } from './dynamo-rules';
import { copyOf } from './dynamo-rules';
import type { ActionReason, AppendOutcome, LedgerEntry, LedgerHead, LedgerStore, RaiseOutcome } from '../core/store/ledger';

interface FenceItem {
  fence?: number;
  version?: number;
}

/** The ledgers of one table, in memory. */
export class MemoryLedgerStore implements LedgerStore {
  private readonly fences = new Map<string, FenceItem>();
  private readonly items = new Map<string, LedgerEntry>();
  private readonly tokens: RequestTokens;

  constructor(
    /** Times the tokens' 10 minutes (monotonic). */
    clock: Clock,
  ) {
    this.tokens = new RequestTokens(clock);
  }

  async head(key: string): Promise<LedgerHead> {
    return headOf(this.fences.get(key));
  }

  async raise(key: string, epoch: number): Promise<RaiseOutcome> {
    const item = this.fences.get(key);
    if (item?.fence !== undefined && item.fence > epoch) return { ok: false, current: headOf(item) };
    const next = { ...item, fence: epoch };
    this.fences.set(key, next);
    return { ok: true, head: headOf(next) };
  }

  async append(key: string, entry: LedgerEntry, requestToken: string): Promise<AppendOutcome> {
    const request = JSON.stringify([key, entry]);
    if (this.tokens.replayed(requestToken, request)) return { ok: true }; // the same request again: its first answer, nothing written
    const item = this.fences.get(key);
    const fenceOk = item?.fence === undefined || item.fence <= entry.epoch;
    const followsOk = entry.version === 1 ? item?.version === undefined : item?.version === entry.version - 1;
    const reasons: [ActionReason, ActionReason] = [
      fenceOk && followsOk ? 'None' : 'ConditionalCheckFailed',
      this.items.has(entry.pk) ? 'ConditionalCheckFailed' : 'None',
    ];
    if (reasons.includes('ConditionalCheckFailed')) {
      return { ok: false, reasons, current: reasons[0] === 'ConditionalCheckFailed' && item ? headOf(item) : undefined };
    }
    this.fences.set(key, { ...item, fence: entry.epoch, version: entry.version });
    this.items.set(entry.pk, copyOf(entry));
    this.tokens.succeeded(requestToken, request);
    return { ok: true };
  }

  async entries(key: string): Promise<LedgerEntry[]> {
    return [...this.items.values()]
      .filter((e) => e.pk.startsWith(`${key}#`))
      .map((e) => copyOf(e))
      .sort((a, b) => a.version - b.version);
  }
}

function headOf(item: FenceItem | undefined): LedgerHead {
  return { epoch: item?.fence ?? 0, version: item?.version ?? 0 };
}

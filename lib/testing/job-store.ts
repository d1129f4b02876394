/**
 * The job store in memory (lib/core/store/jobs.ts), keeping DynamoDB's rules for what the job/chunk protocol and the
 * fenced batch use, so the real core runs on it in virtual time (issue 19, item 3). It passes the same conformance
 * suite as the DynamoDB store (test/store/job-store-conformance.test.ts).
 *
 * What it keeps:
 *   - conditional single-item writes that answer with the old item (ALL_OLD), on success and on failure;
 *   - strongly consistent reads;
 *   - the fenced batch as ONE transaction, all or nothing, cancelled (TransactionCanceledException) with a reason per
 *     action in request order: ConditionalCheckFailed at the check (with the fence item, ALL_OLD) or at a put whose
 *     key exists; TransactionConflict at an item another transaction in flight holds. A transaction is in flight from
 *     its request until `transactionMs` later on the clock (0: until the next turn of the event loop's microtasks),
 *     and a single-item write to an item it holds fails with TransactionConflictException; reads see the last commit;
 *   - ClientRequestToken: the same token and the same request within 10 minutes (on the clock) of the first success
 *     is a success that writes nothing; the same token with another request is IdempotentParameterMismatchException;
 *     the same token while its first send is in flight is TransactionInProgressException;
 *   - the sparse index `claimed` eventually consistent: each change of a row reaches it `indexLagMs * random()`
 *     later (never before an earlier change of the same row), and a query pages through it.
 * A put's item is either wire form (turned into plain values) or a plain document (kept as given, never marshalled).
 * What it does not emulate: throttling and capacity, item and request size limits, tables with a sort key for puts
 * (a put's key is its `keyAttribute` alone), attribute types beyond S, N, BOOL, NULL, M, L, SS and NS in a put's
 * item, the 1 MB page (pages are `pageSize` items), and the order of the 100-action limit's error among others.
 */
import { RequestTokens, copyOf, dynamoError, transactionCanceled } from './dynamo-rules';
import { ConfigError } from '../core/errors';
import { timeToLiveProblem } from '../core/store/tables';
import type { Clock } from '../core/clock';
import { cancellationReasons, classifyCancellation, type CancellationReason } from '../core/conditions';
import { Attr } from '../core/schema';
import type {
  BatchOutcome,
  BatchPut,
  ChunkFence,
  Conditional,
  EffectRecord,
  FenceItem,
  JobRow,
  JobStore,
  Page,
  RequeueSighting,
  RowRaise,
  WireItem,
} from '../core/store/jobs';

/** An item as the memory store holds it: plain values, sets as Sets. */
export type StoredItem = Record<string, unknown>;

/** A transaction holds at most 100 actions. */
const MAX_ACTIONS = 100;

/** How the in-memory store behaves where DynamoDB leaves room. */
export interface MemoryJobStoreOptions {
  /** Times the token window, the index lag and the transactions' flight. */
  readonly clock: Clock;
  /** The job table's name (job rows, chunk fence items, the sparse index). */
  readonly jobs: string;
  /** Uniform in [0, 1): draws each index change's lag. @default () => 1 (every change takes the full lag) */
  readonly random?: () => number;
  /** The most a change of a row takes to reach the sparse index. @default 0 */
  readonly indexLagMs?: number;
  /** How long a transaction is in flight, holding its items. @default 0 (until its first await) */
  readonly transactionMs?: number;
  /** Items per page of a query or scan. @default 100 */
  readonly pageSize?: number;
  /**
   * The attribute TTL is enabled on, if it is (a misconfigured table): the first raise is then refused with a
   * ConfigError, as the DynamoDB store's table check refuses it (lib/core/aws/table-check.ts). @default none: no TTL
   */
  readonly timeToLive?: string;
}

/** DynamoDB's wire form to plain values (what the document client gives back). */
function fromWire(value: object): unknown {
  const v = value as Record<string, unknown>;
  if ('S' in v) return v.S;
  if ('N' in v) return Number(v.N);
  if ('BOOL' in v) return v.BOOL;
  if ('NULL' in v) return null;
  if ('M' in v) return Object.fromEntries(Object.entries(v.M as Record<string, object>).map(([k, x]) => [k, fromWire(x)]));
  if ('L' in v) return (v.L as object[]).map(fromWire);
  if ('SS' in v) return new Set(v.SS as string[]);
  if ('NS' in v) return new Set((v.NS as string[]).map(Number));
  throw dynamoError('ValidationException', `the in-memory store does not take the attribute type of ${JSON.stringify(value)}`);
}

/** A put's key value, from its wire item or its document (kept as the caller gave it). */
const keyValue = (p: BatchPut): unknown => (p.item ? fromWire(p.item[p.keyAttribute]) : p.document[p.keyAttribute]);
/** Sets compare by their members in a request (JSON.stringify would write every Set as `{}`). */
const sets = (_: string, v: unknown): unknown => (v instanceof Set ? { set: [...(v as Set<unknown>)] } : typeof v === 'bigint' ? String(v) : v);
const plain = (item: WireItem): StoredItem => Object.fromEntries(Object.entries(item).map(([k, v]) => [k, fromWire(v)]));
const keyOf = (table: string, key: Readonly<Record<string, unknown>>): string =>
  JSON.stringify([table, Object.entries(key).sort(([a], [b]) => a.localeCompare(b))]);
const copy = <T>(item: T | undefined): T | undefined => (item === undefined ? undefined : copyOf(item));

/** One version of a row as the sparse index will show it, from `visibleAt` on. */
interface IndexVersion {
  readonly visibleAt: number;
  readonly row: JobRow | undefined;
}

/** The job store in memory, keeping DynamoDB's rules (see the file's opening). */
export class MemoryJobStore implements JobStore {
  readonly table: string;
  private readonly items = new Map<string, StoredItem>();
  /** Item keys held by a transaction in flight. */
  private readonly held = new Set<string>();
  /** ClientRequestTokens: in flight, or succeeded within their 10 minutes. */
  private readonly tokens: RequestTokens;
  /** The sparse index's view of each job row, version by version. */
  private readonly index = new Map<string, IndexVersion[]>();

  constructor(private readonly options: MemoryJobStoreOptions) {
    this.table = options.jobs;
    this.tokens = new RequestTokens(options.clock);
  }

  /** Every item of a table, as stored (for tests that look behind the store's back). */
  dump(table: string): StoredItem[] {
    const prefix = JSON.stringify([table]).slice(0, -1);
    return [...this.items].filter(([k]) => k.startsWith(prefix + ',')).map(([, v]) => copyOf(v));
  }

  // ─── Single-item operations ────────────────────────────────────────────────────────────────────────────────────

  async readFence(item: FenceItem): Promise<StoredItem | undefined> {
    return copy(this.items.get(keyOf(item.table, item.key)));
  }

  async readEffect(table: string, key: string): Promise<EffectRecord | undefined> {
    return copy(this.items.get(keyOf(table, { [Attr.pk]: key }))) as EffectRecord | undefined;
  }

  async markEffectDone(
    table: string,
    key: string,
    done: { readonly token: number; readonly result?: string; readonly wallIso: string },
  ): Promise<boolean> {
    const old = this.items.get(keyOf(table, { [Attr.pk]: key }));
    // if_not_exists on each, as the DynamoDB update: the first DONE's token, time and answer stay.
    const set: StoredItem = { [Attr.state]: 'DONE' };
    if (old?.[Attr.doneBy] === undefined) set[Attr.doneBy] = done.token;
    if (old?.[Attr.doneAt] === undefined) set[Attr.doneAt] = done.wallIso;
    if (done.result !== undefined && old?.[Attr.result] === undefined) set[Attr.result] = done.result;
    return this.update(table, { [Attr.pk]: key }, (o) => o !== undefined, set).ok;
  }

  async readJob(jobId: string): Promise<JobRow | undefined> {
    return copy(this.items.get(this.jobKey(jobId))) as JobRow | undefined;
  }

  async raiseFence(item: FenceItem, token: number, set: Readonly<Record<string, unknown>> = {}): Promise<Conditional<StoredItem>> {
    return this.update<StoredItem>(item.table, item.key, (old) => unraisedOrNotLower(old, token), { ...copyOf({ ...set }), [Attr.fence]: token });
  }

  async raiseJob(jobId: string, r: RowRaise): Promise<Conditional<JobRow>> {
    // A table with TTL enabled is refused before anything is written: a TTL delete would forget the fence.
    if (this.options.timeToLive !== undefined) throw new ConfigError([timeToLiveProblem(this.options.jobs, 'job', this.options.timeToLive)]);
    const set = {
      [Attr.pk]: jobId,
      [Attr.fence]: r.token,
      [Attr.state]: 'RUNNING',
      [Attr.ownerToken]: r.token,
      [Attr.owner]: r.owner,
      [Attr.chunkCount]: r.chunkCount,
      [Attr.claimShard]: r.shard,
      [Attr.claimedSince]: r.claimedSince,
    };
    return this.update<JobRow>(this.table, { [Attr.pk]: jobId }, (old) => unraisedOrNotLower(old, r.token) && notDone(old), set);
  }

  async markChunkDone(chunkKey: string, token: number): Promise<Conditional<ChunkFence>> {
    return this.update<ChunkFence>(this.table, { [Attr.pk]: chunkKey }, (old) => old?.[Attr.fence] === token, { [Attr.doneBy]: token });
  }

  async complete(jobId: string, token: number): Promise<Conditional<JobRow>> {
    const stillOwner = (old: StoredItem | undefined) => old?.[Attr.fence] === token && old?.[Attr.ownerToken] === token;
    return this.update<JobRow>(this.table, { [Attr.pk]: jobId }, stillOwner, { [Attr.state]: 'DONE' }, [Attr.claimShard, Attr.claimedSince]);
  }

  async requeue(jobId: string, seen: RequeueSighting): Promise<Conditional<JobRow>> {
    const asSighted = (old: StoredItem | undefined) =>
      old?.[Attr.state] === 'RUNNING' &&
      old?.[Attr.ownerToken] === seen.ownerToken &&
      old?.[Attr.fence] === seen.fence &&
      (old?.[Attr.requeues] ?? 0) === seen.requeues &&
      (seen.requeues !== 0 || old?.[Attr.requeues] === undefined);
    return this.update<JobRow>(this.table, { [Attr.pk]: jobId }, asSighted, { [Attr.requeues]: seen.requeues + 1 });
  }

  /** A single-item write to an item a transaction holds is refused, as DynamoDB refuses it. */
  private refuseIfHeld(k: string): void {
    if (this.held.has(k)) throw dynamoError('TransactionConflictException', 'Transaction is ongoing for the item');
  }

  /** One conditional UpdateItem: SET `set`, REMOVE `remove`, if `condition` holds on the old item; ALL_OLD either way. */
  private update<T>(
    table: string,
    key: Readonly<Record<string, unknown>>,
    condition: (old: StoredItem | undefined) => boolean,
    set: StoredItem,
    remove: readonly string[] = [],
  ): Conditional<T> {
    const k = keyOf(table, key);
    this.refuseIfHeld(k);
    const old = this.items.get(k);
    if (!condition(old)) return { ok: false, current: copy(old) as T | undefined };
    const next: StoredItem = { ...old, ...key, ...set };
    for (const name of remove) delete next[name];
    this.items.set(k, next);
    if (table === this.table) this.indexed(next);
    return { ok: true, old: copy(old) as T | undefined };
  }

  // ─── Your own tables' plain writes: what a DocumentClient's PutCommand, GetCommand, UpdateCommand and DeleteCommand do ───

  /**
   * PutItem with no condition: the item replaces the item with its key, whole, or creates it
   * (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html). Refused with
   * TransactionConflictException while a transaction in flight holds the item, and with ValidationException when the
   * item lacks its key attribute.
   */
  async putItem(table: string, keyAttribute: string, item: Readonly<Record<string, unknown>>): Promise<void> {
    const keyValue = item[keyAttribute];
    if (keyValue === undefined) throw dynamoError('ValidationException', 'One of the required keys was not given a value');
    const k = keyOf(table, { [keyAttribute]: keyValue });
    this.refuseIfHeld(k);
    const next = copyOf({ ...item }) as StoredItem;
    this.items.set(k, next);
    if (table === this.table) this.indexed(next);
  }

  /** GetItem, strongly consistent (ConsistentRead): the item with this key, or undefined. */
  async getItem(table: string, key: Readonly<Record<string, unknown>>): Promise<StoredItem | undefined> {
    return copy(this.items.get(keyOf(table, key)));
  }

  /**
   * UpdateItem with a SET of each attribute and no condition: edits the item's attributes, or creates the item with
   * its key and them (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).
   */
  async updateItem(table: string, key: Readonly<Record<string, unknown>>, set: Readonly<Record<string, unknown>>): Promise<void> {
    this.update(table, key, () => true, copyOf({ ...set }));
  }

  /**
   * DeleteItem with no condition: the item with this key is gone; deleting an absent item succeeds
   * (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_DeleteItem.html).
   */
  async deleteItem(table: string, key: Readonly<Record<string, unknown>>): Promise<void> {
    const k = keyOf(table, key);
    this.refuseIfHeld(k);
    this.items.delete(k);
    if (table === this.table) this.indexed({ ...key });
  }

  // ─── The sparse index ──────────────────────────────────────────────────────────────────────────────────────────

  /** A job-table item changed: its new version reaches the index after the lag (chunk items are never in it). */
  private indexed(item: StoredItem): void {
    const pk = String(item[Attr.pk]);
    const versions = this.index.get(pk) ?? [];
    const lag = (this.options.indexLagMs ?? 0) * (this.options.random ?? (() => 1))();
    const previous = versions.at(-1)?.visibleAt ?? -Infinity;
    const row = item[Attr.claimShard] === undefined ? undefined : (copyOf(item) as unknown as JobRow);
    versions.push({ visibleAt: Math.max(previous, this.options.clock.monotonicMs() + lag), row });
    this.index.set(pk, versions);
  }

  async claimedPage(shard: string, start?: string): Promise<Page<JobRow>> {
    const now = this.options.clock.monotonicMs();
    const rows: JobRow[] = [];
    for (const versions of this.index.values()) {
      const seen = versions.filter((v) => v.visibleAt <= now).at(-1)?.row;
      if (seen?.claim_shard === shard) rows.push(copyOf(seen));
    }
    // The index's sort key is claimed_since; ties (and pagination) by the table's key.
    const order = (r: JobRow) => JSON.stringify([r.claimed_since ?? '', r.pk]);
    rows.sort((a, b) => order(a).localeCompare(order(b)));
    return this.page(rows, order, start);
  }

  async scanPage(start?: string): Promise<Page<StoredItem>> {
    const items = this.dump(this.table);
    const order = (i: StoredItem) => JSON.stringify([String(i[Attr.pk])]);
    items.sort((a, b) => order(a).localeCompare(order(b)));
    return this.page(items, order, start);
  }

  private page<T>(sorted: T[], order: (t: T) => string, start: string | undefined): Page<T> {
    const from = start === undefined ? 0 : sorted.findIndex((t) => order(t) > start);
    const rest = from < 0 ? [] : sorted.slice(from);
    const size = this.options.pageSize ?? 100;
    const items = rest.slice(0, size);
    // As DynamoDB's Limit: a full page ends with a key to go on from, even when nothing follows it.
    return items.length === size ? { items, next: order(items[items.length - 1]) } : { items };
  }

  // ─── The fenced batch: one transaction ─────────────────────────────────────────────────────────────────────────

  async recordBatch(fence: FenceItem, token: number, puts: readonly BatchPut[], requestToken: string): Promise<BatchOutcome> {
    try {
      await this.transact(fence, token, puts, requestToken);
      return { kind: 'recorded' };
    } catch (err) {
      // The reasons decide, as on DynamoDB (lib/core/aws/job-store.ts): only-transient cancellations are thrown.
      const reasons = cancellationReasons(err);
      const cancellation = reasons === undefined ? undefined : classifyCancellation(reasons);
      if (reasons === undefined || cancellation?.kind !== 'condition') throw err;
      if (cancellation.failed.includes(0)) return { kind: 'fenced-out', current: reasons[0].Item, cause: err };
      return { kind: 'already-recorded', positions: cancellation.failed.map((i) => i - 1) };
    }
  }

  /** TransactWriteItems of the check and the puts: idempotent per token, all or nothing, reasons per action. */
  private async transact(fence: FenceItem, token: number, puts: readonly BatchPut[], requestToken: string): Promise<void> {
    if (puts.length + 1 > MAX_ACTIONS) throw dynamoError('ValidationException', `at most ${MAX_ACTIONS} actions in a transaction`);
    const request = JSON.stringify([fence.table, keyOf(fence.table, fence.key), token, puts], sets);
    if (this.tokens.replayed(requestToken, request)) return; // the first send's success, replayed: nothing written again
    const actions = [keyOf(fence.table, fence.key), ...puts.map((p) => keyOf(p.table, { [p.keyAttribute]: keyValue(p) }))];
    // Another transaction in flight holds one of our items: cancelled, TransactionConflict at that item.
    if (actions.some((k) => this.held.has(k))) {
      throw transactionCanceled(
        actions.map((k) => (this.held.has(k) ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' } : { Code: 'None' })),
      );
    }
    actions.forEach((k) => this.held.add(k));
    this.tokens.begin(requestToken, request);
    try {
      await (this.options.transactionMs ? this.options.clock.sleep(this.options.transactionMs) : Promise.resolve());
      const check = this.items.get(actions[0]);
      const reasons: CancellationReason[] = [
        fenceAccepts(check, token)
          ? { Code: 'None' }
          : { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', ...(check ? { Item: copy(check) } : {}) },
        ...actions
          .slice(1)
          .map((k): CancellationReason =>
            this.items.has(k) ? { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' } : { Code: 'None' },
          ),
      ];
      if (reasons.some((r) => r.Code !== 'None')) throw transactionCanceled(reasons);
      puts.forEach((p, i) => this.items.set(actions[i + 1], p.item ? plain(p.item) : (copyOf(p.document) as StoredItem)));
      this.tokens.succeeded(requestToken, request);
    } catch (err) {
      this.tokens.failed(requestToken); // only a success is remembered under its token
      throw err;
    } finally {
      actions.forEach((k) => this.held.delete(k));
    }
  }

  private jobKey(jobId: string): string {
    return keyOf(this.table, { [Attr.pk]: jobId });
  }
}

// The same clauses as lib/core/aws/job-store.ts, as predicates on the old item.
/** Never raised, or not above our token (fence <= :t). */
function unraisedOrNotLower(old: StoredItem | undefined, token: number): boolean {
  return old?.[Attr.fence] === undefined || Number(old[Attr.fence]) <= token;
}
/** A DONE job stays DONE. */
function notDone(old: StoredItem | undefined): boolean {
  return old?.[Attr.state] !== 'DONE';
}
/** The fence comparison (fence <= :t): a missing fence accepts nothing. */
export function fenceAccepts(item: StoredItem | undefined, token: number): boolean {
  return item?.[Attr.fence] !== undefined && Number(item[Attr.fence]) <= token;
}

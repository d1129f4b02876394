/**
 * The fenced write: one transaction of 1 check on a fence (`Fence.guard`) + up to 99 puts, each
 * item recorded once (only if its key is absent). The check and the puts commit together or not at all, so a holder
 * whose token the fence no longer accepts writes nothing. The transaction itself is the store's (FenceStore
 * .recordBatch; on DynamoDB, lib/core/aws/job-store.ts); what its outcomes mean, lib/core/fenced-record.ts; this file
 * cuts and checks the items.
 *
 * What this guarantees: every put of a call lands at most once, and only while the fence accepts the token; a call
 * that returns has every put recorded (by this call or before it). What it does NOT guarantee: that an item
 * recorded before was recorded by the same holder or with the same content (a takeover redoing a batch finds the
 * earlier holder's items, "already recorded"), nor anything about writes that do not carry the guard.
 *
 * Two ways in, each given the fence as its holder holds it (`lease.fenced(fence)`: the fence and the lease's token).
 * `writeFenced(held, items, { table })`, the writer for users: any number of plain document
 * items, checked before anything is sent (an item over 400 KB is refused), cut into transactions of 1 check + at most
 * 99 puts and at most 4 MB (one transaction after another, in order), marshalled by the DynamoDB store only. `writeBatch(held, puts)`: at most 99 puts already
 * in the low-level wire form, sent as they are (the document client's generic marshalling cost a third of the client
 * CPU per transaction on the reference app's run, bench/waste.ts).
 */
import { randomUUID } from 'node:crypto';
import { MAX_PUTS_PER_TRANSACTION } from './config';
import { ConfigError } from './errors';
import { requestToken, transact } from './fenced-record';
import type { AttributeValue } from './aws/document-client';
import type { HeldFence } from './aws/fence';
import { DynamoFenceStore } from './aws/job-store';
import type { BatchPut, DocumentItem } from './store/jobs';

/** One item to record once under the fence. */
export interface FencedPut {
  /** The table to put the item in. */
  readonly table: string;
  /** The whole item, in AttributeValue form (`{ pk: { S: 'order#1' }, qty: { N: '3' } }`). */
  readonly item: Readonly<Record<string, AttributeValue>>;
  /** The item's partition key attribute: the put lands only if no item with this key exists. @default 'pk' */
  readonly keyAttribute?: string;
}

/**
 * What a fenced write did, item by item (the very objects passed, in their order). Fenced out is not a result: it is
 * thrown (FencedOutError), since the holder must stop.
 * @typeParam P - what was written: a FencedPut (writeBatch), or the caller's own document items (writeFenced)
 */
export interface BatchResult<P> {
  /**
   * The items this call's own transactions wrote: each is counted here by exactly one call, the one that wrote it (its
   * ClientRequestToken is this call's alone, so a success is never another call's transaction replayed).
   */
  readonly recorded: readonly P[];
  /**
   * The puts refused because an item with their key already existed: recorded before this call, by an earlier holder
   * (a takeover redoing a batch) or an earlier call of the same holder (a retried chunk, also one that never heard
   * the answer to its write). Not an error: each item is recorded once. Their content was not compared with ours.
   */
  readonly alreadyRecorded: readonly P[];
  /** Transactions sent, including the retries. */
  readonly transactions: number;
}

/** Where `writeFenced` writes, and how it cuts the items. */
export interface FencedWriteOptions {
  /** The table the items go in (every item: one table per call). */
  readonly table: string;
  /** The items' partition key attribute: an item lands only if no item with this key exists. @default 'pk' */
  readonly keyAttribute?: string;
  /** Puts per transaction, besides the fence's check: 1 to 99. @default MAX_PUTS_PER_TRANSACTION (99) */
  readonly putsPerTransaction?: number;
  /**
   * Run before each transaction, e.g. `() => lease.check()`: what it throws stops the
   * write there, the transactions before it recorded, none after it sent. @default none
   */
  readonly check?: () => void;
}

/**
 * The puts as the store takes them (the key attribute made explicit).
 * @throws ConfigError for more than 99 puts: a transaction holds 100 actions and one is the fence's check
 */
function batchPuts(puts: readonly FencedPut[]): BatchPut[] {
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
 *   - fenced out (the check failed): the fence no longer accepts our token → FencedOutError, nothing was written
 *     (FenceNotRaisedError when the fence item was never raised);
 *   - already recorded (a put's condition failed): drop those puts and send the rest (a new request, so a new
 *     ClientRequestToken). A conflict reported beside it changes nothing: the condition decides;
 *   - a transient failure (thrown: TransactionConflict, throttling, …): the SAME request again after a full-jitter
 *     backoff (retryTransient, one budget for the whole call), with the same ClientRequestToken, so a retry of a
 *     transaction that was applied but whose answer was lost succeeds without writing again (10 minutes).
 * The token is this call's own: a success is this call's transaction, applied by it (now, or by an earlier send of
 * this call whose answer was lost), so its puts are `recorded` by this call. Another call with the same puts (a
 * retried chunk) sends another token, and the store evaluates the conditions: the puts come back `alreadyRecorded`,
 * never counted a second time as a replayed success would.
 * @param held - the fence as its holder holds it, `lease.fenced(fence)`: the transaction carries its check with the
 *   lease's token (the fence's store, clock and jitter source are used)
 * @param puts - at most 99 items; none sends nothing
 * @returns which puts this call recorded and which were already recorded
 * @throws ConfigError for more than 99 puts (before anything is sent); FencedOutError when the fence refused the
 * token; FenceNotRaisedError when it was never raised; the store's error for anything permanent, or transient past
 * the retries
 */
export async function writeBatch(held: HeldFence, puts: readonly FencedPut[]): Promise<BatchResult<FencedPut>> {
  const out = await transact(held, batchPuts(puts), randomUUID()); // batchPuts throws before the first send
  return { recorded: out.recorded.map((i) => puts[i]), alreadyRecorded: out.alreadyRecorded.map((i) => puts[i]), transactions: out.transactions };
}

/**
 * The request for one fenced transaction, as writeBatch sends it to DynamoDB: `held.guard()` at position 0,
 * then one Put per item with attribute_not_exists on its key, and a ClientRequestToken derived from the whole request
 * and the call sending it (the same request in the same call, the same token; any other request or call, another
 * one: DynamoDB rejects a reused token with other parameters).
 * @param call - names the writeBatch call that sends it @default none: the token follows the request alone
 * @throws ConfigError for more than 99 puts: a transaction holds 100 actions and one is the fence's check
 */
export function fencedTransaction(held: HeldFence, puts: readonly FencedPut[], call?: string): ReturnType<typeof DynamoFenceStore.transaction> {
  const batch = batchPuts(puts);
  return DynamoFenceStore.transaction(held.fence.item, held.token, batch, requestToken(held, puts, call));
}

/**
 * Write any number of plain document items under the fence: checked first (nothing is sent if any is bad, or over
 * DynamoDB's 400 KB an item), then cut into transactions of 1 check + at most `putsPerTransaction` puts whose items
 * stay under DynamoDB's 4 MB a transaction (the check's item counted too), sent one after another, each as writeBatch sends
 * one (its own ClientRequestToken, its own retry budget). Each item lands once: one an earlier holder or call recorded
 * comes back in `alreadyRecorded`, not written again.
 *
 * A holder fenced out part-way keeps what its earlier transactions wrote (each item recorded once: the new holder
 * finds them already recorded) and nothing of the refused one.
 * @param held - the fence as its holder holds it, `lease.fenced(fence)`, raised first (the fence's store, clock and
 *   jitter source are used)
 * @param items - plain documents (`{ pk: 'order#1', qty: 3 }`), each with its key; none sends nothing
 * @returns which items this call recorded and which were already recorded, and the transactions sent
 * @throws ConfigError naming every bad item or option, and every item over 400 KB by its key (before anything is
 * sent); FenceNotRaisedError when the fence was never raised; FencedOutError when a newer holder raised it; the store's error for anything permanent, or
 * transient past the retries
 */
export async function writeFenced<T extends Readonly<Record<string, unknown>>>(
  held: HeldFence,
  items: readonly T[],
  options: FencedWriteOptions,
): Promise<BatchResult<T>> {
  const { puts, sizes } = documentPuts(items as readonly DocumentItem[], options);
  const most = options.putsPerTransaction ?? MAX_PUTS_PER_TRANSACTION;
  const call = randomUUID();
  const recorded: T[] = [];
  const alreadyRecorded: T[] = [];
  let transactions = 0;
  for (let from = 0, to = 0; from < puts.length; from = to) {
    // A cut ends at `most` puts or before the item that would take it past PUTS_BYTES, whichever comes first.
    for (let bytes = 0; to < puts.length && to - from < most && (to === from || bytes + sizes[to] <= PUTS_BYTES); to++) bytes += sizes[to];
    options.check?.();
    const out = await transact(held, puts.slice(from, to), call);
    recorded.push(...out.recorded.map((i) => items[from + i]));
    alreadyRecorded.push(...out.alreadyRecorded.map((i) => items[from + i]));
    transactions += out.transactions;
  }
  return { recorded, alreadyRecorded, transactions };
}

// ─── Sizes, as DynamoDB counts them ───────────────────────────────────────────────────────────────────────────────

/**
 * The most an item may be: 400 KB, its attribute names and values counted together
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html#limits-items; 1 KB = 1024 bytes).
 */
const MAX_ITEM_BYTES = 400 * 1024;

/**
 * "The aggregate size of the items in the transaction cannot exceed 4 MB"
 * (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html). The fence's check is
 * one of those items, and a fence item may itself be up to an item's size, so the puts of one cut take 4 MB less that.
 */
const PUTS_BYTES = 4 * 1024 * 1024 - MAX_ITEM_BYTES;

/**
 * An item's size as DynamoDB documents it: for each attribute, the UTF-8 bytes of its name plus its value's size
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
 */
function itemBytes(item: Readonly<Record<string, unknown>>): number {
  let n = 0;
  for (const [name, value] of Object.entries(item)) n += Buffer.byteLength(name) + valueBytes(value);
  return n;
}

/**
 * A value's size: a string its UTF-8 bytes; a number 1 byte per two significant digits + 1; bytes their length; null
 * or a boolean 1; a list or map 3 + 1 per element + the elements (a map's with their names). A set is counted as a
 * list of its members: the page gives no figure for sets, and an overestimate only cuts a little earlier.
 */
function valueBytes(v: unknown): number {
  if (typeof v === 'string') return Buffer.byteLength(v);
  if (typeof v === 'number' || typeof v === 'bigint') return Math.ceil(significantDigits(v) / 2) + 1;
  if (v instanceof Uint8Array) return v.byteLength;
  if (v === null || typeof v === 'boolean') return 1;
  const elements: [string, unknown][] = Array.isArray(v) || v instanceof Set ? [...v].map((x) => ['', x]) : Object.entries(v as object);
  return 3 + elements.reduce((n, [name, x]) => n + 1 + Buffer.byteLength(name) + valueBytes(x), 0);
}

/** The significant digits of a number as DynamoDB stores it (leading and trailing zeroes trimmed; at least 1). */
function significantDigits(v: number | bigint): number {
  const mantissa = String(v).replace(/^-/, '').split(/e/i)[0].replace('.', '');
  return Math.max(1, mantissa.replace(/^0+/, '').replace(/0+$/, '').length);
}

// ─── The writer's input, checked before anything is sent ──────────────────────────────────────────────────────────

/** The most problems a ConfigError lists: one per bad item could run to thousands. */
const MAX_PROBLEMS = 10;

/**
 * The items as the store takes them, or a ConfigError naming every problem (items, key, values, options): DynamoDB's
 * rules checked here, the same on every store, so a bad item is refused before the first transaction, not after.
 */
function documentPuts(items: readonly DocumentItem[], options: FencedWriteOptions): { puts: BatchPut[]; sizes: number[] } {
  const problems: string[] = [];
  const { table, keyAttribute = 'pk', putsPerTransaction = MAX_PUTS_PER_TRANSACTION } = options ?? ({} as FencedWriteOptions);
  if (typeof table !== 'string' || table === '') problems.push(`table must be a table name, got ${show(table)}`);
  if (typeof keyAttribute !== 'string' || keyAttribute === '') problems.push(`keyAttribute must be an attribute name, got ${show(keyAttribute)}`);
  if (!Number.isInteger(putsPerTransaction) || putsPerTransaction < 1 || putsPerTransaction > MAX_PUTS_PER_TRANSACTION)
    problems.push(
      `putsPerTransaction must be an integer from 1 to ${MAX_PUTS_PER_TRANSACTION} (a transaction holds 100 actions and one is the fence check), got ${show(putsPerTransaction)}`,
    );
  if (options?.check !== undefined && typeof options.check !== 'function') problems.push(`check must be a function, got ${show(options.check)}`);
  if (!Array.isArray(items)) problems.push(`items must be an array of documents, got ${show(items)}`);
  const seen = new Map<string, number>();
  const sizes: number[] = [];
  (Array.isArray(items) ? items : []).forEach((item: unknown, i) => {
    if (!isPlainObject(item)) {
      problems.push(`item ${i} is not an object (a document such as { pk: 'a#1', qty: 3 }), got ${show(item)}`);
      return;
    }
    const key = item[keyAttribute];
    if (key === undefined) problems.push(`item ${i} has no '${keyAttribute}' (its key attribute)`);
    else if (!((typeof key === 'string' && key !== '') || (typeof key === 'number' && Number.isFinite(key))))
      problems.push(`item ${i}: its key '${keyAttribute}' must be a string or a number, got ${show(key)}`);
    else {
      const id = `${typeof key}:${String(key)}`;
      const first = seen.get(id);
      // DynamoDB refuses two actions on one item in a transaction; across transactions the second would be reported
      // already recorded, its content never written: either way a caller's mistake.
      if (first !== undefined) problems.push(`item ${i} repeats the key of item ${first} ('${keyAttribute}' = ${show(key)})`);
      else seen.set(id, i);
    }
    const before = problems.length;
    for (const [name, value] of Object.entries(item)) valueProblems(value, `'${name}'`, (p) => problems.push(`item ${i}: ${p}`));
    // DynamoDB would refuse the whole transaction, every time: a permanent error, found here before anything is sent.
    const bytes = problems.length === before ? itemBytes(item) : 0;
    sizes[i] = bytes;
    if (bytes > MAX_ITEM_BYTES)
      problems.push(
        `item ${i} ('${keyAttribute}' = ${typeof key === 'string' ? `'${key}'` : String(key)}) is ${bytes} bytes as DynamoDB counts it (attribute names and values): an item holds at most 400 KB (${MAX_ITEM_BYTES} bytes)`,
      );
  });
  if (problems.length > 0)
    throw new ConfigError(
      problems.length > MAX_PROBLEMS ? [...problems.slice(0, MAX_PROBLEMS), `and ${problems.length - MAX_PROBLEMS} more`] : problems,
    );
  return { puts: items.map((document) => ({ table, keyAttribute, document })), sizes };
}

/** What DynamoDB cannot hold in a value (the marshaller's refusals): undefined, NaN, an unsafe number, a class. */
function valueProblems(v: unknown, at: string, problem: (p: string) => void): void {
  if (v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'bigint' || v instanceof Uint8Array) return;
  if (v === undefined) return problem(`${at} is undefined (leave it out, or use null)`);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) problem(`${at} is not a finite number, got ${String(v)}`);
    else if (Math.abs(v) > Number.MAX_SAFE_INTEGER) problem(`${at} is beyond Number.MAX_SAFE_INTEGER: pass a bigint`);
    return;
  }
  if (Array.isArray(v)) return v.forEach((x, i) => valueProblems(x, `${at}[${i}]`, problem));
  if (v instanceof Set) {
    const kinds = new Set([...(v as Set<unknown>)].map((x) => typeof x));
    if (v.size === 0) problem(`${at} is an empty set (DynamoDB holds no empty set)`);
    else if (kinds.size > 1 || ![...kinds].every((k) => k === 'string' || k === 'number' || k === 'bigint'))
      problem(`${at} is a set of ${[...kinds].join(' and ')}: a set holds strings only, or numbers only`);
    return;
  }
  if (isPlainObject(v)) return Object.entries(v).forEach(([k, x]) => valueProblems(x, `${at}.${k}`, problem));
  problem(`${at} is ${show(v)}: a value is a string, number, boolean, null, bytes, a set, a list or a map`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A value, short, for a problem's sentence. */
function show(v: unknown): string {
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && !isPlainObject(v)) return `a ${v.constructor?.name ?? 'class instance'}`;
  const s = typeof v === 'string' ? `'${v}'` : typeof v === 'bigint' ? `${v}n` : (JSON.stringify(v) ?? String(v));
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

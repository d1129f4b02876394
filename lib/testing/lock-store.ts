/**
 * The lock store in memory, keeping DynamoDB's rules for what the lock table uses (lib/core/store/lock.ts), so the core's
 * real logic can run on virtual time with no endpoint:
 *   - a conditional write that fails changes nothing and returns the item as it was (ALL_OLD);
 *   - reads are strongly consistent: they see every write that was answered before them;
 *   - the election's join and removal are transactions, all or nothing; a transaction holds its items from when it
 *     is sent until it is answered (`conflictWindowMs` on the injected clock, or the rest of the current turn when
 *     0). A second transaction on a held item cancels one of the two (chosen by the injected `random`: AWS does not
 *     say which) with reason TransactionConflict at that item's position; a single-item write on a held item fails
 *     with TransactionConflictException. Both are transient (lib/core/conditions.ts isTransient).
 *
 * The claim that creates an item reads the epoch floor in the same step (AWS: a read, then the write; the restore bump,
 * the only writer of the floor, runs before the table is used, so nothing moves the floor in between).
 *
 * Not emulated: throttling and capacity, item size limits, scan pages of 1 MB (a page here is `scanPageSize`
 * items, in key order; DynamoDB's order is its hash order), and ClientRequestToken (the lock table's writes do not
 * use one). Nothing here reads a global clock or random.
 */
import { copyOf, dynamoError, transactionCanceled } from './dynamo-rules';
import { ConfigError } from '../core/errors';
import { timeToLiveProblem } from '../core/store/tables';
import type { Clock } from '../core/clock';
import {
  EPOCH_FLOOR_KEY,
  type BumpPage,
  ClaimOn,
  ClaimWrite,
  Holding,
  JoinRequest,
  LockItem,
  LockStore,
  RemoveOn,
  RoleItem,
  WriteOutcome,
} from '../core/store/lock';

type Item = Record<string, unknown> & { readonly pk: string };

/** What the in-memory store is given. */
export interface MemoryLockStoreOptions {
  /** Times the conflict window. @default none: a transaction holds its items for the rest of the turn only */
  readonly clock?: Pick<Clock, 'sleep'>;
  /** How long a transaction holds its items (needs `clock`). @default 0 */
  readonly conflictWindowMs?: number;
  /** Uniform in [0, 1): which of two overlapping transactions is cancelled. @default always the later one */
  readonly random?: () => number;
  /** Items per scan page. @default 100 */
  readonly scanPageSize?: number;
  /** The table's name, for what a refusal names. @default 'locks' */
  readonly table?: string;
  /**
   * The attribute TTL is enabled on, if it is (a misconfigured table): the first claim or join is then refused with a
   * ConfigError, as the DynamoDB store's table check refuses it (lib/core/aws/table-check.ts). @default none: no TTL
   */
  readonly timeToLive?: string;
}

const copy = (item: Item | undefined): Item | undefined => (item === undefined ? undefined : copyOf(item));

/** One in-flight transaction: the keys it holds, and whether another transaction cancelled it. */
interface InFlight {
  readonly keys: readonly string[];
  cancelledAt?: number;
}

/**
 * The lock store in memory, for tests and exploration on virtual time: DynamoDB's rules for the lock table (see the
 * top of this file for what it does not emulate). One process only; nothing persists.
 */
export class MemoryLockStore implements LockStore {
  private readonly items = new Map<string, Item>();
  private readonly inFlight = new Set<InFlight>();

  constructor(private readonly options: MemoryLockStoreOptions = {}) {}

  async read(key: string): Promise<LockItem | undefined> {
    return copy(this.items.get(key)) as LockItem | undefined;
  }

  async claim(key: string, on: ClaimOn, write: ClaimWrite): Promise<WriteOutcome> {
    this.refuseIfExpiring();
    this.refuseIfHeld(key);
    const old = this.items.get(key);
    const holds =
      'free' in on
        ? old?.holder === undefined
        : 'rvn' in on
          ? old?.rvn === on.rvn
          : on.epoch === undefined
            ? old?.epoch === undefined
            : old?.epoch === on.epoch;
    if (!holds) return { ok: false, current: copy(old) as LockItem | undefined };
    const next: Item = {
      ...old,
      pk: key,
      holder: write.holder,
      lease_ms: write.leaseMs,
      rvn: write.rvn,
      renewed_at: write.wallIso,
      // A new item (the key's first claim) starts above the epoch floor.
      epoch: (old?.epoch === undefined ? this.floor() : Number(old.epoch)) + 1,
    };
    this.items.set(key, next);
    return { ok: true, item: copy(next) as LockItem };
  }

  renew(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>> {
    return this.writeIfStillOurs(key, holding, (old) => ({ ...old, rvn, renewed_at: wallIso }));
  }

  release(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>> {
    return this.writeIfStillOurs(key, holding, (old) => {
      const next: Item = { ...old, rvn, renewed_at: wallIso };
      delete next.holder;
      return next;
    });
  }

  private async writeIfStillOurs(key: string, holding: Holding, update: (old: Item) => Item): Promise<WriteOutcome<undefined>> {
    this.refuseIfHeld(key);
    const old = this.items.get(key);
    if (old === undefined || !stillOurs(old, holding)) return { ok: false, current: copy(old) as LockItem | undefined };
    this.items.set(key, update(old));
    return { ok: true, item: undefined };
  }

  async readRole(roleKey: string): Promise<RoleItem | undefined> {
    const item = this.items.get(roleKey);
    if (item === undefined) return undefined;
    const members = [...((item.members as Set<number> | undefined) ?? [])];
    return item.epoch === undefined ? { members } : { epoch: Number(item.epoch), members };
  }

  /** A table with TTL enabled is refused before anything is written: a TTL delete would reset the epochs. */
  private refuseIfExpiring(): void {
    if (this.options.timeToLive !== undefined)
      throw new ConfigError([timeToLiveProblem(this.options.table ?? 'locks', 'lock', this.options.timeToLive)]);
  }

  async join(r: JoinRequest): Promise<{ readonly ok: boolean }> {
    this.refuseIfExpiring();
    // The role's first join also checks the floor item: the transaction holds it too.
    const keys = r.last === undefined ? [r.roleKey, r.candidateKey, EPOCH_FLOOR_KEY] : [r.roleKey, r.candidateKey];
    return this.transact(keys, () => {
      const role = this.items.get(r.roleKey);
      const counterOk = r.last === undefined ? role?.epoch === undefined && r.seq > this.floor() : role?.epoch === r.last;
      if (!counterOk || this.items.has(r.candidateKey)) return false;
      const members = new Set((role?.members as Set<number> | undefined) ?? []);
      members.add(r.seq);
      this.items.set(r.roleKey, { ...role, pk: r.roleKey, epoch: r.seq, members });
      this.items.set(r.candidateKey, {
        pk: r.candidateKey,
        holder: r.candidate.holder,
        epoch: r.seq,
        lease_ms: r.candidate.leaseMs,
        rvn: r.candidate.rvn,
        renewed_at: r.candidate.wallIso,
      });
      return true;
    });
  }

  async removeCandidate(roleKey: string, candidateKey: string, seq: number, on: RemoveOn): Promise<{ readonly ok: boolean }> {
    return this.transact([candidateKey, roleKey], () => {
      const candidate = this.items.get(candidateKey);
      const holds = candidate !== undefined && ('rvn' in on ? candidate.rvn === on.rvn : stillOurs(candidate, on));
      if (!holds) return false;
      this.items.delete(candidateKey);
      const role = this.items.get(roleKey);
      const members = new Set((role?.members as Set<number> | undefined) ?? []);
      members.delete(seq);
      // DynamoDB has no empty sets: DELETE of the last element removes the attribute.
      const next: Item = { ...role, pk: roleKey, members };
      if (members.size === 0) delete next.members;
      this.items.set(roleKey, next);
      return true;
    });
  }

  async scanPage(start?: string): Promise<BumpPage> {
    const size = this.options.scanPageSize ?? 100;
    const keys = [...this.items.keys()].sort().filter((k) => start === undefined || k > start);
    const page = keys.slice(0, size);
    const items = page.map((key) => {
      const item = this.items.get(key)!;
      return { key, epoch: Number(item.epoch ?? 0), bumpRuns: [...((item.bump_runs as Set<string> | undefined) ?? [])] };
    });
    // As DynamoDB's Limit: a full page ends with a key to go on from, even when nothing follows it (API_Scan.html).
    return page.length === size ? { items, next: page[page.length - 1] } : { items };
  }

  async bump(key: string, by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }> {
    this.refuseIfHeld(key);
    const old = this.items.get(key);
    const runs = (old?.bump_runs as Set<string> | undefined) ?? new Set<string>();
    if (old === undefined || runs.has(runId)) return { ok: false };
    const from = Number(old.epoch ?? 0);
    this.items.set(key, { ...old, epoch: from + by, bump_runs: new Set([...runs, runId]) });
    return { ok: true, from };
  }

  async readFloor(): Promise<number> {
    return this.floor();
  }

  async raiseFloor(by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }> {
    this.refuseIfHeld(EPOCH_FLOOR_KEY);
    const old = this.items.get(EPOCH_FLOOR_KEY);
    const runs = (old?.bump_runs as Set<string> | undefined) ?? new Set<string>();
    if (runs.has(runId)) return { ok: false };
    const from = this.floor();
    this.items.set(EPOCH_FLOOR_KEY, { ...old, pk: EPOCH_FLOOR_KEY, epoch: from + by, bump_runs: new Set([...runs, runId]) });
    return { ok: true, from };
  }

  /** The epoch floor: every new item starts above it (0 until a restore bump raises it). */
  private floor(): number {
    return Number(this.items.get(EPOCH_FLOOR_KEY)?.epoch ?? 0);
  }

  /** A single-item write on an item a transaction holds fails, as DynamoDB's does. */
  private refuseIfHeld(key: string): void {
    for (const t of this.inFlight)
      if (t.cancelledAt === undefined && t.keys.includes(key))
        throw dynamoError('TransactionConflictException', 'Transaction is ongoing for the item');
  }

  /**
   * A transaction on `keys`: it holds them while in flight; an overlap cancels one of the two with TransactionConflict;
   * at its answer, `apply` checks every condition and writes all or nothing (false: a condition failed).
   */
  private async transact(keys: readonly string[], apply: () => boolean): Promise<{ readonly ok: boolean }> {
    const me: InFlight = { keys };
    for (const other of this.inFlight) {
      const at = keys.findIndex((k) => other.cancelledAt === undefined && other.keys.includes(k));
      if (at < 0) continue;
      if ((this.options.random ?? (() => 0))() < 0.5) throw cancelled(keys.length, at);
      other.cancelledAt = other.keys.indexOf(keys[at]);
    }
    this.inFlight.add(me);
    try {
      const windowMs = this.options.conflictWindowMs ?? 0;
      if (windowMs > 0 && this.options.clock) await this.options.clock.sleep(windowMs);
      else await new Promise<void>((resolve) => queueMicrotask(resolve));
    } finally {
      this.inFlight.delete(me);
    }
    if (me.cancelledAt !== undefined) throw cancelled(keys.length, me.cancelledAt);
    return { ok: apply() };
  }
}

/** Still ours: the holder and the epoch that were granted. */
function stillOurs(item: Item, holding: Holding): boolean {
  return item.holder === holding.holder && item.epoch === holding.epoch;
}

/** TransactionCanceledException with TransactionConflict at position `at`, None elsewhere. */
function cancelled(actions: number, at: number): Error {
  return transactionCanceled(
    Array.from({ length: actions }, (_, i) =>
      i === at ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' } : { Code: 'None' },
    ),
  );
}

/**
 * The fence for a role ("A leader is a lease holder" and SINGLE-WRITER HANDOVER step 5;
 * docs/DESIGN.md § Election): a consumer's ledger whose every entry carries (epoch, version).
 *
 * The fence item holds the highest epoch that has written (`fence`) and the last version written (`version`). An
 * append of version v with epoch e lands only if `fence <= e` and the head is at v - 1, and it raises the fence to e
 * in the same transaction as the entry. So the first write of a new epoch raises the fence, and every later write of
 * a lower epoch (a deposed leader's, an old writer's) is refused by the store, whatever that writer believes.
 *
 * What this guarantees: the ledger's entries are numbered 1, 2, 3, … with no gap and no version twice, and their
 * epochs never go down along the versions. What it does not guarantee: that the entries of one epoch are what its
 * leader meant to write if two processes write with the same epoch (give every leader its own epoch: an election or
 * a handover does).
 */
import { createHash } from 'node:crypto';
import { type Clock, wallIso } from '../core/clock';
import { retryTransient } from '../core/conditions';
import { FencedOutError, VersionConflictError } from '../core/errors';
import type { Events } from '../core/events';
import type { RunHooks } from '../core/job';
import type { LedgerEntry, LedgerHead, LedgerStore } from '../core/store/ledger';
import { entryKey } from '../core/election-keys';
// The keys, kept with the grants that reach them (lib/core/election-keys.ts).
export { entryKey } from '../core/election-keys';

export type { LedgerEntry, LedgerHead } from '../core/store/ledger';

/**
 * Where the fence item and its ledger live (the ledger's store: on DynamoDB, the consumer's table, partition key `pk`,
 * the fence item and the entries side by side in it), and what times the retries.
 */
export interface EpochFenceTarget {
  /** The ledger's store: `new DynamoLedgerStore(ddb, table)`, or the in-memory one. */
  readonly ledger: LedgerStore;
  /** Times the backoff of a retried transaction; its wall clock stamps `written_at` (informational). */
  readonly clock: Clock;
  /** Jitter source for the backoff. @default Math.random */
  readonly random?: () => number;
}

/** An epoch fence on one fence item of a consumer's table, with the ledger of entries it orders. */
export class EpochFence {
  private readonly store: LedgerStore;

  constructor(
    /** The store (or the table and client) and the clock. */
    readonly target: EpochFenceTarget,
    /** The fence item's key (`ledger/<role>` for an election's ledger). */
    readonly key: string,
  ) {
    this.store = target.ledger;
  }

  /** A strongly consistent read of the fence item: what the store has accepted so far. */
  head(): Promise<LedgerHead> {
    return this.store.head(this.key);
  }

  /**
   * Bump the fence to `epoch` before the first write of a new writer (SINGLE-WRITER HANDOVER step 4): from now on the
   * store refuses every write of a lower epoch. Raising to the epoch it already has changes nothing.
   * @returns the head after the bump
   * @throws FencedOutError when the fence is already above `epoch` (a newer writer has bumped it)
   */
  async raise(epoch: number): Promise<LedgerHead> {
    const out = await this.store.raise(this.key, epoch);
    if (!out.ok) throw new FencedOutError(this.key, epoch, out.current.epoch);
    return out.head;
  }

  /**
   * Append entry `version` with `epoch`: one transaction of the fence item's update (condition: `fence <= epoch` and the
   * head at version - 1; it sets both) and the entry's put (only if absent). A transient failure is retried by the
   * one retry helper, the request unchanged with the same token, so a retry of an append that landed but whose answer
   * was lost succeeds without writing twice.
   * @param fields - the entry's own attributes (not pk, epoch, version, writer, written_at)
   * @param guard - checked before each resend: a retry comes a backoff after the caller's own check, and a writer
   * past its stop time must not send again (its throw ends the append). @defaultValue none
   * @throws FencedOutError when the fence is above `epoch`: a newer epoch has written; nothing was written
   * @throws VersionConflictError when the head is not at version - 1: read the head again; nothing was written
   */
  async append(
    epoch: number,
    version: number,
    writer: string,
    fields: Record<string, unknown> = {},
    guard?: { check(): void },
  ): Promise<LedgerEntry> {
    const entry: LedgerEntry = {
      ...fields,
      pk: entryKey(this.key, version),
      epoch,
      version,
      writer,
      written_at: wallIso(this.target.clock),
    };
    // The token follows the request: the same entry sent again is the same request, another entry another one.
    const token = createHash('sha256')
      .update(JSON.stringify([this.key, entry]))
      .digest('hex')
      .slice(0, 36);
    const backoff = { sleep: (ms: number) => this.target.clock.sleep(ms), random: this.target.random };
    let sends = 0;
    const out = await retryTransient(backoff, () => {
      if (sends++ > 0) guard?.check();
      return this.store.append(this.key, entry, token);
    });
    if (out.ok) return entry;
    const fence = out.current?.epoch;
    if (fence !== undefined && fence > epoch) throw new FencedOutError(this.key, epoch, fence);
    throw new VersionConflictError(this.key, version - 1, out.current?.version);
  }

  /** Every entry of this ledger, in version order (a consistent scan: for audits and tests, not for the hot path). */
  entries(): Promise<LedgerEntry[]> {
    return this.store.entries(this.key);
  }
}

/**
 * A writer's side of the ledger: one epoch, the next version, and the check before every append. The one place a
 * leader's or a single writer's write is made: check (the stop-time rule), then append under the fence (the safety:
 * a pause can fall between the two).
 */
export class LedgerWriter {
  /** Entries this writer appended. */
  appended = 0;

  /** A writer is handed out by `leadership.ledger(fence)` or `handover(...)`, with its epoch bound. @internal */
  constructor(
    private readonly fence: EpochFence,
    /** Checked before every append: throws once the writer must stop (a Lease, a Leadership). */
    private readonly guard: { check(): void },
    /** The epoch every entry carries. */
    readonly epoch: number,
    /** The name written into every entry. */
    readonly writer: string,
    /** The version the ledger was at when this writer started. */
    private version: number,
    private readonly deps: { readonly events?: Events; readonly hooks?: RunHooks } = {},
  ) {}

  /** The last version this writer knows of. */
  get head(): number {
    return this.version;
  }

  /**
   * Check, then append the next version with this writer's epoch. A version conflict (an equal or lower epoch wrote
   * first, before this epoch's first write raised the fence) moves on from the head the store returned.
   * @throws StopTimePassedError or LeaseLostError from the check (nothing sent); FencedOutError when a newer epoch
   * has written (nothing written)
   */
  async append(fields: Record<string, unknown> = {}): Promise<LedgerEntry> {
    for (;;) {
      this.guard.check();
      await this.deps.hooks?.afterCheck?.({ step: 'append', batch: this.appended + 1 });
      const version = this.version + 1;
      try {
        const entry = await this.fence.append(this.epoch, version, this.writer, fields, this.guard);
        this.version = version;
        this.appended++;
        this.deps.events?.emit('appended', { key: this.fence.key, epoch: this.epoch, version, writtenAt: entry.written_at });
        return entry;
      } catch (err) {
        if (err instanceof FencedOutError)
          this.deps.events?.emit('append-refused', { key: this.fence.key, epoch: this.epoch, version, fence: err.fence });
        if (!(err instanceof VersionConflictError)) throw err;
        this.version = err.current ?? (await this.fence.head()).version;
      }
    }
  }
}

/**
 * The ledger's invariants, checked from its entries (the fault suite's ledger checker): versions 1..n with no gap and
 * none twice; epochs never go down along the versions, so once an epoch has written, no lower epoch writes again
 * (no write of a deposed leader after its successor's first); each epoch written by one writer only (two leaders
 * under one epoch pass every fence: only the writer names tell them apart); and no entry above the fence item's head.
 * @returns one sentence per violation; empty when the ledger is sound
 */
export function ledgerViolations(entries: readonly LedgerEntry[], head: LedgerHead): string[] {
  const problems: string[] = [];
  const seen = new Map<number, number>();
  for (const e of entries) seen.set(e.version, (seen.get(e.version) ?? 0) + 1);
  for (const [version, count] of seen) if (count > 1) problems.push(`version ${version} is in the ledger ${count} times`);
  entries.forEach((e, i) => {
    if (e.version !== i + 1) problems.push(`entry ${i + 1} carries version ${e.version}: a gap or a duplicate`);
    if (e.pk !== entryKey(e.pk.slice(0, e.pk.lastIndexOf('#')), e.version))
      problems.push(`entry ${e.pk} is keyed apart from its version ${e.version}`);
    if (i > 0 && e.epoch < entries[i - 1].epoch) {
      problems.push(
        `version ${e.version} was written with epoch ${e.epoch} after version ${entries[i - 1].version} had epoch ${entries[i - 1].epoch}`,
      );
    }
  });
  const writers = new Map<number, Set<string>>();
  for (const e of entries) writers.set(e.epoch, (writers.get(e.epoch) ?? new Set<string>()).add(e.writer));
  for (const [epoch, names] of writers)
    if (names.size > 1) problems.push(`epoch ${epoch} was written by ${[...names].join(' and ')}: two writers under one epoch`);
  if (entries.length !== head.version) problems.push(`the head says version ${head.version}, the ledger holds ${entries.length} entries`);
  const top = entries.at(-1);
  if (top && top.epoch > head.epoch) problems.push(`the last entry's epoch ${top.epoch} is above the fence ${head.epoch}`);
  return problems;
}

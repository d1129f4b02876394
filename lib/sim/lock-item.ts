/**
 * A lease kept in a DynamoDB item: holder, lease_until,
 * rvn and epoch, and the three claim rules side by side.
 *
 *   no-margin   attribute_not_exists(holder) OR lease_until < :claimant_now      (lease_until: the HOLDER's wall clock)
 *   margin      attribute_not_exists(holder) OR lease_until < :claimant_now - margin
 *   clock-free  attribute_not_exists(holder) OR rvn = :seen, after the claimant watched that rvn stay unchanged for a
 *               full lease on its own monotonic clock: lib/core/lease.ts `nextClaimStep`, the library's own rule.
 * The two clock rules compare one machine's wall clock with another's: an offset bigger than the margin
 * lets a claim in while the holder still has the right to act. The epoch is if_not_exists(epoch, 0) + 1 on every
 * claim; release clears holder and keeps the item (TTL's reset of the epoch runs on the real code: scenarios/epochs.ts).
 * Left out: the transaction conflicts and throttling of the real table, and eventually consistent reads.
 */
import { nextClaimStep, type Watch } from '../core/lease';
import type { Sim } from './engine';

/** The three claim rules: a clock compare without a margin, with a margin, and the clock-free rvn watch. */
export type ClaimRule = 'no-margin' | 'margin' | 'clock-free';
/** Every claim rule, in the order the reference gives them. */
export const CLAIM_RULES: readonly ClaimRule[] = ['no-margin', 'margin', 'clock-free'];

export interface LockItem {
  holder?: string;
  /** Wall-clock ms, written from the holder's clock (the clock rules read it). */
  leaseUntil?: number;
  leaseMs?: number;
  rvn: string;
  epoch: number;
}

export class DynamoLockItem {
  item: LockItem | undefined;
  private rvns = 0;

  constructor(
    private readonly sim: Sim,
    readonly name = 'lock item',
  ) {}

  private newRvn(): string {
    return `v${++this.rvns}`;
  }

  /** A strongly consistent read. */
  read(): LockItem | undefined {
    return this.item === undefined ? undefined : { ...this.item };
  }

  /**
   * CLAIM: the rule's condition, then SET holder, lease_until = :my_now_plus_lease, rvn = new,
   * epoch = if_not_exists(epoch, :zero) + :one. Returns the new epoch (the token), or undefined if the condition failed.
   */
  claim(me: string, rule: ClaimRule, c: { claimantWallMs: number; marginMs: number; leaseMs: number; seenRvn?: string }): number | undefined {
    const it = this.item;
    const free = it?.holder === undefined; // attribute_not_exists(holder)
    const ok =
      free ||
      (rule === 'clock-free'
        ? it.rvn === c.seenRvn // nobody renewed, claimed or released since the claimant started watching
        : it.leaseUntil! < c.claimantWallMs - (rule === 'margin' ? c.marginMs : 0)); // one clock wrote it, another reads it
    if (!ok) return undefined;
    const epoch = (it?.epoch ?? 0) + 1;
    this.item = { holder: me, leaseUntil: c.claimantWallMs + c.leaseMs, leaseMs: c.leaseMs, rvn: this.newRvn(), epoch };
    this.sim.log(me, `claims the lock item (${rule})`, {
      token: epoch,
      note: `lease_until ${(this.item.leaseUntil! / 1000).toFixed(1)} by its wall clock, rvn ${this.item.rvn}, epoch ${epoch}`,
    });
    return epoch;
  }

  /** RENEW: holder = :me AND epoch = :e; SET lease_until, new rvn. */
  renew(me: string, epoch: number, holderWallMs: number): boolean {
    const it = this.item;
    if (it?.holder !== me || it.epoch !== epoch) return false;
    it.leaseUntil = holderWallMs + it.leaseMs!;
    it.rvn = this.newRvn();
    return true;
  }

  /** RELEASE: holder = :me AND epoch = :e; REMOVE holder, lease_until = 0, new rvn. The item (and its epoch) stays. */
  release(me: string, epoch: number): boolean {
    const it = this.item;
    if (it?.holder !== me || it.epoch !== epoch) return false;
    this.item = { rvn: this.newRvn(), epoch, leaseUntil: 0 };
    this.sim.log(me, 'releases: clears holder, keeps the item', { token: epoch, note: `epoch stays ${epoch}` });
    return true;
  }
}

/**
 * A claimant that polls the item every poll and claims when its rule allows; what it carries between polls.
 * For the clock-free rule the decision is lib/core/lease.ts `nextClaimStep` itself: the same code the library runs.
 */
export class ItemClaimant {
  private watch: Watch | undefined;
  private lastSeenMono = 0;

  constructor(
    readonly rule: ClaimRule,
    private readonly leaseMs: number,
    private readonly marginMs: number,
  ) {}

  /** After one read at (monotonic, wall): claim now (with the rvn to condition on), or not yet. */
  decide(seen: LockItem | undefined, monoMs: number, wallMs: number): { claim: boolean; seenRvn?: string } {
    if (seen?.holder === undefined) return { claim: true };
    if (this.rule !== 'clock-free') return { claim: seen.leaseUntil! < wallMs - (this.rule === 'margin' ? this.marginMs : 0) };
    const sighting = { holder: seen.holder, epoch: seen.epoch, seenRvn: seen.rvn, waitMs: seen.leaseMs ?? this.leaseMs };
    const step = nextClaimStep(this.watch, sighting, monoMs - this.lastSeenMono, { leaseMs: this.leaseMs, claimBudget: Number.MAX_SAFE_INTEGER });
    [this.watch, this.lastSeenMono] = [step.watch, monoMs];
    return { claim: step.action === 'claim', seenRvn: seen.rvn };
  }
}

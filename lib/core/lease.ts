/**
 * A lease kept in a DynamoDB item, claimed without trusting anyone's clock ("A lease built on a
 * DynamoDB item", and the Lock Client's rvn rule).
 *
 * What this guarantees: at most one claim per rvn the claimant saw, and an epoch that only grows (it is +1 on every
 * claim, the item is never deleted and never TTL'd). What it does NOT guarantee: that only one process acts as
 * holder. A paused holder wakes up believing it holds the lease; only the fence at the resource stops it
 * (fence.ts). The stop-time check here is an optimisation that keeps overlap rare, never the safety.
 *
 * Clocks: every duration is timed on the process's own monotonic clock. No absolute time is stored for
 * anyone to compare; `renewed_at` is informational and no code reads it.
 */
import { createHash } from 'node:crypto';
import { heldFence, type Fence, type HeldFence } from './aws/fence';
import { type Clock, type ClockTimer, wallIso } from './clock';
import type { LeaseConfig } from './config';
import { backoffOf, fullJitterMs, isTransient, newRvn, retryTransient } from './conditions';
import { ClaimBudgetExhaustedError, ConfigError, LeaseLostError, StopTimePassedError } from './errors';
import type { Events } from './events';
import { EPOCH_FLOOR_KEY, type ClaimOn, type LockItem, type LeaseStore } from './store/lock';

export type { LockItem } from './store/lock';

/**
 * What the lease functions need, injected: the lock store (one item per lease key, never TTL'd), the clock that
 * times every duration, the events.
 */
export interface LeaseDeps {
  /** The lock table's store: `awsStores(...).locks`, or one of your own (`store.LeaseStore`). */
  readonly locks: LeaseStore;
  /** Times every duration (waits, renewals, stop times) on its monotonic clock. */
  readonly clock: Clock;
  /**
   * Where sightings, claims, renewals and losses are reported. @defaultValue no reporting
   * @internal
   */
  readonly events?: Events;
  /** Jitter source for the retry backoff (docs/DESIGN.md "Retry classification"). Default Math.random. */
  readonly random?: () => number;
}

/**
 * A strongly consistent read of the lock item: the authority's current view. Undefined if the key was never claimed.
 * It says who held the lease when the store answered, nothing about now: never act on it, claim.
 */
export async function readLock(deps: Pick<LeaseDeps, 'locks'>, key: string): Promise<LockItem | undefined> {
  return deps.locks.read(key);
}

/** What a claimant saw, and how long it must wait before claiming: a full lease if anyone holds it. */
export interface Sighting {
  /** The holder the lock item named (absent: free). */
  readonly holder?: string;
  /** The epoch the lock item carried (absent: never claimed). */
  readonly epoch?: number;
  /** The rvn seen; the claim is conditional on it being unchanged. Absent when the lock was free. */
  readonly seenRvn?: string;
  /** 0 when the lock is free; otherwise the holder's declared lease: how long the rvn must stay unchanged. */
  readonly waitMs: number;
}

/**
 * Read the lock item and say what a claimant must do about it: claim at once (free), or watch its rvn for the
 * holder's declared lease (`waitMs`). One read; the caller times the watch (nextClaimStep).
 */
export async function sight(deps: Pick<LeaseDeps, 'locks'>, key: string, config: Pick<LeaseConfig, 'leaseMs'>): Promise<Sighting> {
  const seen = await readLock(deps, key);
  if (seen?.holder === undefined) return { epoch: seen?.epoch, waitMs: 0 };
  return { holder: seen.holder, epoch: seen.epoch, seenRvn: seen.rvn, waitMs: seen.lease_ms ?? config.leaseMs };
}

/**
 * One claim attempt, made when nextClaimStep says so (the caller times the watch: a monotonic clock here, Step
 * Functions Wait states in the cloud). Condition: still free, or rvn unchanged since the sighting. Returns the new epoch, or
 * undefined if someone claimed, renewed or released in between.
 *
 * `claimRvn` is the rvn this claim writes. A retry that passes the same one (the workflow derives it from the
 * execution and the sighting) and finds it in the item knows its first try landed and its response was lost,
 * and takes that epoch; the caller must renew before acting on it. Finding only our holder name is not enough:
 * a zombie of an earlier run under the same name would then share our token.
 */
export async function tryClaim(
  deps: Pick<LeaseDeps, 'locks' | 'clock' | 'random'>,
  key: string,
  holder: string,
  config: Pick<LeaseConfig, 'leaseMs'>,
  sighting: Sighting,
  claimRvn: string = newRvn(),
): Promise<number | undefined> {
  // Never claimed (no item seen): create it above the epoch floor at once, rather than a free claim the store refuses
  // first. Free (released): the item and its epoch stay. Held: the rvn seen must be unchanged.
  const on: ClaimOn =
    sighting.seenRvn !== undefined ? { rvn: sighting.seenRvn } : sighting.epoch === undefined ? { epoch: undefined } : { free: true };
  return claimOnce(deps.locks, deps, key, on, { holder, leaseMs: config.leaseMs, rvn: claimRvn });
}

/**
 * THE CLAIM, in one place: one conditional write that sets holder, lease and rvn and adds 1 to the epoch, on condition
 * `on` (free, rvn unchanged, or, for the handover's flip, epoch unchanged). Returns the new epoch, or undefined if
 * the condition failed. A transient failure (TransactionConflictException, throttling) is sent again with the same
 * rvn: if the first try landed, the condition fails and the rvn we find says it was ours. A key's first claim starts
 * above the epoch floor (the store reads it then); the floor's own key is refused: it is no lease.
 * @throws ConfigError for the epoch floor's key (nothing written)
 */
export async function claimOnce(
  store: LeaseStore,
  deps: Pick<LeaseDeps, 'clock' | 'random'>,
  key: string,
  on: ClaimOn,
  write: { readonly holder: string; readonly leaseMs: number; readonly rvn: string },
): Promise<number | undefined> {
  if (key === EPOCH_FLOOR_KEY) throw new ConfigError([`key ${JSON.stringify(key)} is reserved for the epoch floor: it is no lease`]);
  const out = await retryTransient(backoffOf(deps), () => store.claim(key, on, { ...write, wallIso: wallIso(deps.clock) }));
  if (out.ok) return Number(out.item.epoch);
  const landed = out.current?.holder === write.holder && out.current?.rvn === write.rvn;
  return landed ? Number(out.current?.epoch) : undefined;
}

/**
 * The rvn a claim made by a stateless step writes (a workflow task that may be retried after a lost response): the
 * same holder, sighting and attempt give the same rvn, so the retry finds its own claim in the item (see tryClaim).
 * Anything else gives another rvn.
 */
export function claimRvnFor(holder: string, sighting: { readonly seenRvn?: string; readonly epoch?: number }, attempt: number): string {
  return createHash('sha256')
    .update(`${holder}|${sighting.seenRvn ?? 'free'}|${sighting.epoch ?? 0}|${attempt}`)
    .digest('hex')
    .slice(0, 32);
}

/** How often a waiting claimant re-reads the lock item: lease/20, at least 100 ms (500 ms at the default 10 s lease). */
export function pollMsOf(config: Pick<LeaseConfig, 'leaseMs'>): number {
  return Math.max(100, Math.round(config.leaseMs / 20));
}

/** What a claimant carries from one sighting to the next, every duration on its own timer. */
export interface Watch {
  /** The rvn being watched (absent while the lock is free). */
  readonly rvn?: string;
  /** How long this rvn has been seen unchanged, counted from the first response that showed it. */
  readonly unchangedMs: number;
  /** How long the claimant has waited in all: the claim budget is spent in leases of waiting. */
  readonly waitedMs: number;
}

/** What the claim rule says after one sighting: claim, wait (how long), or give up; and the watch to carry on. */
export interface ClaimStep {
  /** claim now; wait `waitMs` and sight again; or give up (the claim budget is spent). */
  readonly action: 'claim' | 'wait' | 'give-up';
  /** With 'wait': how long to wait before the next sighting (at most a poll period). 0 otherwise. */
  readonly waitMs: number;
  /** What to carry to the next sighting. */
  readonly watch: Watch;
  /** This sighting showed a free lock or an rvn not watched before: report it once, not once per poll. */
  readonly newRvn: boolean;
}

/**
 * THE CLAIM RULE, in one place (the Lock Client's clock-free rule, timed as Kubernetes times it "from when
 * it last observed a change to the lease record"). Claim at once if nobody holds the lock. Otherwise claim only
 * once the same rvn has been seen unchanged for a full lease on the claimant's own timer, re-reading every poll
 * period meanwhile; a changed rvn means the holder is alive, and the count starts again.
 *
 * `elapsedMs` is the claimant's timer since the previous sighting, and must never exceed the truth (locally the
 * monotonic clock between two responses; in the cloud the Wait state's seconds, which Step Functions waits at least).
 * Why the claim can never come early: the first response that showed rvn X arrived after the store applied X, so
 * the claim (conditional on rvn = X) is sent at least a lease after X was applied: never below the formula.
 * Why polling: a claimant that waits a whole lease per sighting can need two leases after the holder dies; a
 * poll bounds the excess by one poll period (bench/takeover.ts measured both).
 */
export function nextClaimStep(
  prev: Watch | undefined,
  s: Sighting,
  elapsedMs: number,
  config: Pick<LeaseConfig, 'leaseMs' | 'claimBudget'>,
): ClaimStep {
  const waitedMs = (prev?.waitedMs ?? 0) + (prev === undefined ? 0 : elapsedMs);
  if (s.waitMs === 0) return { action: 'claim', waitMs: 0, watch: { unchangedMs: 0, waitedMs }, newRvn: true };
  const same = prev !== undefined && prev.rvn !== undefined && prev.rvn === s.seenRvn;
  const watch: Watch = { rvn: s.seenRvn, unchangedMs: same ? prev.unchangedMs + elapsedMs : 0, waitedMs };
  if (watch.unchangedMs >= s.waitMs) return { action: 'claim', waitMs: 0, watch, newRvn: !same };
  if (waitedMs >= config.claimBudget * s.waitMs) return { action: 'give-up', waitMs: 0, watch, newRvn: !same };
  return { action: 'wait', waitMs: Math.min(pollMsOf(config), s.waitMs - watch.unchangedMs), watch, newRvn: !same };
}

/**
 * Claim the lease, clock-free, following nextClaimStep: sight; claim at once if free; otherwise watch
 * the rvn, re-reading every poll period, and claim on condition "rvn unchanged" once it has stayed so for a full
 * lease on OUR monotonic clock. A claim sets holder, lease_ms and a new rvn, and adds 1 to the epoch, which is
 * returned as the fencing token. A failed claim (someone else moved first) goes back to watching, within the budget.
 *
 * Guarantees: the token is higher than every token handed out before for this key. Does not guarantee that the
 * previous holder has stopped: it may be paused and wake up believing it holds the lease; the fence stops it.
 * @param key - the lock item's key
 * @param holder - this holder's name, written into the lock item (informational, and the renewal condition)
 * @returns the held lease; start its heartbeat (or use withLease) before working
 * @throws ClaimBudgetExhaustedError when the holder stayed alive for `claimBudget` leases of waiting
 */
export async function claim(deps: LeaseDeps, key: string, holder: string, config: LeaseConfig): Promise<Lease> {
  let watch: Watch | undefined;
  let lastSeenAt = 0;
  for (let attempt = 0; ;) {
    const sighting = await sight(deps, key, config);
    const seenAt = deps.clock.monotonicMs(); // after the response: no earlier than the write that produced its rvn
    const step = nextClaimStep(watch, sighting, seenAt - lastSeenAt, config);
    [watch, lastSeenAt] = [step.watch, seenAt];
    if (step.action === 'give-up') throw new ClaimBudgetExhaustedError(key, config.claimBudget, sighting.holder, sighting.epoch);
    if (step.newRvn) {
      attempt++;
      deps.events?.emit('sighted', { key, holder: sighting.holder, epoch: sighting.epoch, rvn: sighting.seenRvn, waitMs: sighting.waitMs, attempt });
    }
    if (step.action === 'wait') {
      await deps.clock.sleep(step.waitMs);
      continue;
    }
    // sent_at is read BEFORE the request: the stop time must not start later than the grant.
    const sentAt = deps.clock.monotonicMs();
    const epoch = await tryClaim(deps, key, holder, config, sighting);
    if (epoch === undefined) continue; // someone claimed, renewed or released in between: watch again
    const lease = Lease.held(deps, key, holder, epoch, config, sentAt);
    deps.events?.emit('claim', { key, token: epoch, attempt, waitedMs: Math.round(watch.unchangedMs), stopAtMs: Math.round(lease.stopAtMs) });
    return lease;
  }
}

/**
 * Take up a lease claimed earlier, in another process (the next Lambda of the workflow): renew FIRST, and compute
 * this process's own stop time from that renewal. A stop time never crosses a process boundary (design §5).
 * @param token - the epoch the claim returned, carried over from the process that claimed
 * @throws LeaseLostError if the lock item no longer names this holder and epoch; the store's transient error if the
 * renewal got no answer (resume again: the workflow's task retries it as TransientStoreError)
 */
export async function resume(deps: LeaseDeps, key: string, holder: string, token: number, config: LeaseConfig): Promise<Lease> {
  const lease = Lease.held(deps, key, holder, token, config, -Infinity); // no stop time until the renewal lands
  await lease.renew();
  return lease;
}

/**
 * Give back a lease claimed in another process, without renewing it first (the workflow's failure path):
 * conditional on still being ours, so it changes nothing if the lease moved on.
 */
export async function releaseClaimed(deps: LeaseDeps, key: string, holder: string, token: number, config: LeaseConfig): Promise<boolean> {
  return Lease.held(deps, key, holder, token, config, -Infinity).release();
}

/**
 * A held lease: the token to write with, the stop time, renewals, and the conditional release.
 *
 * Guarantees: while `check()` passes, no other claim of this key can have been granted (the lease has not run out on
 * our own clock, with a margin). Does not guarantee that the check still holds a moment later, when the write lands:
 * a pause can fall in between. Write through the fence it hands out (`lease.fenced(fence)`); that is the safety.
 */
export class Lease {
  /** The fencing token: this claim's epoch. */
  readonly token: number;
  private stopAt: number;
  private lost: Error | undefined;
  private timer: ClockTimer | undefined;
  private inFlight: Promise<void> | undefined;
  private readonly store: LeaseStore;

  /**
   * A lease is made by the code that claims or takes one up (`claim`, `withLease`, `resume` and its renewal, an
   * election's campaign, the handover's flip), never by a user from a bare epoch: the epoch is the token its fences carry.
   */
  private constructor(
    private readonly deps: LeaseDeps,
    /** The lock item's key. */
    readonly key: string,
    /** This holder's name. */
    readonly holder: string,
    epoch: number,
    private readonly config: LeaseConfig,
    sentAt: number,
  ) {
    this.token = epoch;
    this.stopAt = this.stopTimeFrom(sentAt);
    this.store = deps.locks;
  }

  /**
   * The lease `holder` holds on `key` at `epoch`, its stop time counted from `sentAt` (-Infinity: none until its first
   * renewal lands), for the code that claims or takes one up (claim, resume, releaseClaimed here; the election's
   * campaign; the handover's flip; a benchmark's claimant).
   * @internal
   */
  static held(deps: LeaseDeps, key: string, holder: string, epoch: number, config: LeaseConfig, sentAt: number): Lease {
    return new Lease(deps, key, holder, epoch, config, sentAt);
  }

  /** The stop-time rule, in one place: stop time = sent_at + lease - margin, on our monotonic clock. */
  private stopTimeFrom(sentAt: number): number {
    return sentAt + this.config.leaseMs - this.config.marginMs;
  }

  /** The stop time: monotonic milliseconds of this process after which `check()` throws. */
  get stopAtMs(): number {
    return this.stopAt;
  }

  /**
   * BEFORE EVERY ACTION: once monotonic now reaches `stopAtMs`, stop, don't act. An optimisation that keeps
   * overlap rare; the fence is the safety.
   * @throws StopTimePassedError past the stop time; LeaseLostError once a renewal found the lease gone
   */
  check(): void {
    const over = this.overAt(this.deps.clock.monotonicMs());
    if (over) throw over;
  }

  /**
   * THE STOP-TIME RULE, in one place ("retry until stop_at; then give up the lease locally"):
   * once monotonic `now` reaches the stop time with no renewal answered before it, the lease is over in this process
   * for good. No renewal is sent after it, and one answered after it does not bring the lease back: the holder had to
   * stop acting at the stop time, and does not start again on the same token. Returns the error every later check
   * throws (a LeaseLostError found earlier stays the reason).
   */
  private overAt(now: number): Error | undefined {
    if (this.lost === undefined && now >= this.stopAt) this.lost = new StopTimePassedError(this.key, this.token, this.stopAt, now);
    return this.lost;
  }

  /** False until this process has a stop time of its own: a lease taken up by `resume` gets one from its first renewal. */
  private get granted(): boolean {
    return this.stopAt > -Infinity;
  }

  /**
   * This lease's token bound to `fence`: what the holder raises first and writes with (`raise()`, `guard()`,
   * writeFenced), so the token reaches the store's condition without anyone carrying it by hand. It binds the token,
   * not the stop time: check the lease before each write.
   */
  fenced(fence: Fence): HeldFence {
    return heldFence(fence, this.token, () => this.check());
  }

  /**
   * Check the stop time, then act: `await lease.act(() => writeFenced(lease.fenced(fence), items, options))`. The act runs only if the check passed;
   * an act that takes long should check again inside, before each write.
   * @returns the act's result
   * @throws StopTimePassedError or LeaseLostError instead of acting
   */
  async act<T>(fn: () => T | Promise<T>): Promise<T> {
    this.check();
    return fn();
  }

  /**
   * One renewal: read sent_at before sending; condition "still ours"; new rvn.
   * A failed condition means the lease is lost. A transport error is retried until the stop time, then given up.
   * Nothing is sent at or after the stop time, and an answer that arrives after it does not move it (overAt).
   * @throws LeaseLostError when the lease is no longer ours; StopTimePassedError once the stop time passed unmoved
   */
  async renew(): Promise<void> {
    if (this.lost) throw this.lost;
    for (let retry = 0; ; retry++) {
      const sentAt = this.deps.clock.monotonicMs(); // 1. read BEFORE sending
      if (this.granted && this.overAt(sentAt)) throw this.lost;
      let out: Awaited<ReturnType<LeaseStore['renew']>>;
      try {
        out = await this.store.renew(this.key, this.holding, newRvn(), wallIso(this.deps.clock));
      } catch (err) {
        // 5. on failure: retry until stop_at (the check above refuses to send at it); then give up the lease
        // locally. Transient by reason, not by name (TransactionConflictException: a transaction held the lock
        // item); full jitter, at most renewMs/4 a wait.
        const now = this.deps.clock.monotonicMs();
        this.deps.events?.emit('renew-failed', { key: this.key, token: this.token, error: (err as Error).name });
        if (!isTransient(err)) {
          this.lost ??= new LeaseLostError(this.key, this.token, undefined, { cause: err });
          throw this.lost;
        }
        // Without a stop time yet (resume) there is none to retry until, and nothing says the lease is gone: the
        // caller gets the transient error and takes the lease up again (its condition is holder and epoch, so a
        // renewal that landed unanswered changes nothing). Taken as lost, it would end a run whose lease is ours.
        if (!this.granted) throw err;
        const waitMs = fullJitterMs(retry, this.deps.random ?? Math.random, { baseMs: 25, capMs: this.config.renewMs / 4 });
        await this.deps.clock.sleep(Math.min(waitMs, this.stopAt - now));
        continue;
      }
      if (!out.ok) {
        // Two renewals in flight (the heartbeat's and a caller's) can both meet the loss: report it once.
        if (this.lost) throw this.lost;
        this.lost = new LeaseLostError(this.key, this.token, out.current as Record<string, unknown> | undefined);
        const holderNow = out.current?.holder;
        this.deps.events?.emit('lease-lost', {
          key: this.key,
          token: this.token,
          holderNow: holderNow === undefined ? undefined : String(holderNow),
        });
        throw this.lost;
      }
      // 4. on success, if answered before the stop time: only then does it move the stop time on.
      if (this.granted && this.overAt(this.deps.clock.monotonicMs())) throw this.lost;
      this.stopAt = Math.max(this.stopAt, this.stopTimeFrom(sentAt));
      this.deps.events?.emit('renew', { key: this.key, token: this.token, stopAtMs: Math.round(this.stopAt) });
      return;
    }
  }

  /** Who must still hold the lock item for a renewal or release to land: this holder, this epoch. */
  private get holding() {
    return { holder: this.holder, epoch: this.token };
  }

  /**
   * Renew every renewMs from this process, the one doing the work: a sidecar's heartbeat proves only that the
   * sidecar is alive. A frozen process sends no renewals, so its lease runs out, as it should.
   */
  startHeartbeat(): void {
    // Fixed rate: the next renewal is due renewMs after the last one was SENT, not after it returned, so a slow
    // store cannot stretch the period past the stop time (with lease 10 s, renew 3 s, margin 2 s, a renewal
    // that takes 4 s to return still leaves the next one due at 6 s, before the stop time at 8 s).
    const tick = () => {
      const sent = this.deps.clock.monotonicMs();
      this.inFlight = this.renew()
        .catch(() => undefined) // the loss is remembered in this.lost and surfaces at the next check()
        .finally(() => {
          this.inFlight = undefined;
          const next = Math.max(0, sent + this.config.renewMs - this.deps.clock.monotonicMs());
          if (this.timer !== undefined && !this.lost) this.timer = this.deps.clock.after(next, tick);
        });
    };
    this.timer = this.deps.clock.after(this.config.renewMs, tick);
  }

  /** Stop renewing; waits for a renewal in flight, so none lands after this returns. */
  async stopHeartbeat(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    await this.inFlight;
  }

  /**
   * Release: conditional on still owning the lease; clears holder and writes a new rvn so a
   * waiting claimant sees the change. Never deletes the item: it carries the epoch. Returns false if it was no
   * longer ours (nothing changed).
   */
  async release(): Promise<boolean> {
    await this.stopHeartbeat();
    // A transient failure is sent again; if the first try landed, the retry's condition fails (holder cleared)
    // and we report false, which only means "nothing more to release".
    const out = await retryTransient(backoffOf(this.deps), () => this.store.release(this.key, this.holding, newRvn(), wallIso(this.deps.clock)));
    if (!out.ok) return false;
    this.lost ??= new LeaseLostError(this.key, this.token, undefined);
    this.deps.events?.emit('released', { key: this.key, token: this.token });
    return true;
  }
}

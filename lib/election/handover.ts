/**
 * SINGLE-WRITER HANDOVER (docs/DESIGN.md § Election).
 *
 *   1. the writer holds a lease on "I am the writer" (a lock item, `writer/<role>`)
 *   2. the old writer stops when it can't renew, by its OWN monotonic clock (its stop time)
 *   3. the new writer waits out the lease plus a margin, by its OWN monotonic clock
 *   4. the new writer bumps the epoch IN THE STORE IT WILL WRITE, before its first write
 *   5. consumers refuse anything from a lower epoch (EpochFence)
 *
 * The new writer takes the lock item over at once, conditional on the epoch it saw (the flip): from then on every
 * renewal of the old writer fails, so the old writer's right ends at its stop time, at most a lease after its last
 * good renewal, which was sent before the flip landed. The new writer counts lease + waitMargin from the flip's
 * answer, so its first write comes at least waitMargin after the old writer's right ended: a gap, never an overlap.
 * With the payment loop's numbers (10 s lease, 5 s margin) the old writer's right ends by 10 s and the new one
 * starts at 15 s.
 *
 * What this guarantees: after the bump, the store refuses every write of the old epoch, whatever the old writer
 * believes (a paused one may wake up past its stop time with a write in hand). What it does not: that nothing is
 * lost in the gap; if the old writer died at the flip, nothing is written for lease + waitMargin.
 */
import { leaseProblems, stripUndefined, type LeaseConfig } from '../core/config';
import { newRvn } from '../core/conditions';
import { ConfigError } from '../core/errors';
import { nameProblems, writerKey } from '../core/election-keys';
import { LedgerWriter, type EpochFence } from './epoch-fence';
import type { RunHooks } from '../core/job';
import { claimOnce, Lease, type LeaseDeps } from '../core/lease';
// The keys, kept with the grants that reach them (lib/core/election-keys.ts).
export { writerLedgerKey } from '../core/election-keys';

/** A writer's lease and the handover's wait: stop time = last renewal sent + lease - margin; wait = lease + waitMargin. */
export interface HandoverConfig extends LeaseConfig {
  /** What the new writer waits beyond the lease, from the flip, before it bumps and writes. @default 5000 */
  readonly waitMarginMs: number;
}

/**
 * The payment loop's numbers: a 10 s lease renewed every 3 s, the old writer's right ending at the
 * lease itself (no stop margin: "the old writer's right ends by 10"), and the new writer waiting 15 s.
 */
export const HANDOVER_DEFAULTS: HandoverConfig = { leaseMs: 10_000, renewMs: 3_000, marginMs: 0, waitMarginMs: 5_000, claimBudget: 30 };

/** Every problem with handover settings: the lease's own checks, and a non-negative wait margin. */
export function handoverProblems(c: HandoverConfig): string[] {
  const problems = leaseProblems(c);
  if (!Number.isSafeInteger(c.waitMarginMs) || c.waitMarginMs < 0)
    problems.push(`waitMarginMs must be a non-negative integer, got ${c.waitMarginMs}`);
  return problems;
}

/** The options of a handover. */
export interface HandoverOptions {
  /**
   * Hooks between a passed check and the append it guards (the fault tests' pauses).
   * @internal
   */
  readonly hooks?: RunHooks;
}

/** A writer after the handover: its epoch is bumped in the target store; it writes through `ledger`. */
export class Writer {
  /** A writer is handed out by `handover`, its epoch bumped in the store. @internal */
  constructor(
    /** The writer lease: renewed from this process; its stop time ends the writer's right. */
    readonly lease: Lease,
    /** Appends with the writer's epoch, checking the lease first. */
    readonly ledger: LedgerWriter,
  ) {}

  /** The epoch: the writer lease's token. */
  get epoch(): number {
    return this.lease.token;
  }

  /** Stop renewing and give the writer lease back (conditional on still holding it). */
  release(): Promise<boolean> {
    return this.lease.release();
  }
}

/**
 * Become the writer of `role` (steps 1, 3, 4): flip the writer lease to `writer` with the next epoch, renew it from
 * this process, wait lease + waitMargin from the flip's answer if someone held it, then bump the epoch in `fence`'s
 * store. Returns when the first write may be made.
 * @throws ConfigError for bad settings or names (nothing written); LeaseLostError if another handover flipped the
 * lease away during the wait; FencedOutError if a newer writer bumped the store first
 */
export async function handover(
  deps: LeaseDeps,
  role: string,
  writer: string,
  settings: Partial<HandoverConfig>,
  fence: EpochFence,
  options: HandoverOptions = {},
): Promise<Writer> {
  const config: HandoverConfig = { ...HANDOVER_DEFAULTS, ...stripUndefined(settings) };
  const problems = [...nameProblems('role', role), ...nameProblems('candidate', writer), ...handoverProblems(config)];
  if (problems.length > 0) throw new ConfigError(problems);
  const key = writerKey(role);
  const store = deps.locks;
  for (;;) {
    const seen = await store.read(key);
    const sentAt = deps.clock.monotonicMs(); // before the flip: our stop time never starts after it landed
    // The flip is the claim on the epoch seen: nobody else flipped or claimed since we looked. The old writer's
    // renewals change only the rvn, so they do not stop it.
    const epoch = await claimOnce(store, deps, key, { epoch: seen?.epoch }, { holder: writer, leaseMs: config.leaseMs, rvn: newRvn() });
    if (epoch === undefined) continue; // another writer flipped first: look again
    const flippedAt = deps.clock.monotonicMs(); // the flip's answer: after it landed, so after the old writer's last renewal
    const lease = Lease.held(deps, key, writer, epoch, config, sentAt);
    deps.events?.emit('claim', { key, token: epoch, waitedMs: 0, stopAtMs: Math.round(lease.stopAtMs) });
    lease.startHeartbeat();
    try {
      if (seen?.holder !== undefined) {
        // Step 3: the old writer's lease as it declared it, plus the margin, on our own monotonic clock.
        const waitMs = (seen.lease_ms ?? config.leaseMs) + config.waitMarginMs;
        await deps.clock.sleep(flippedAt + waitMs - deps.clock.monotonicMs());
      }
      lease.check(); // still ours after the wait
      const head = await fence.raise(epoch); // step 4: before the first write
      deps.events?.emit('epoch-bumped', { key: fence.key, epoch, version: head.version });
      return new Writer(lease, new LedgerWriter(fence, lease, epoch, writer, head.version, { events: deps.events, hooks: options.hooks }));
    } catch (err) {
      await lease.stopHeartbeat();
      throw err;
    }
  }
}

/**
 * A job fenced by a lease, in one call: claim, renew from this process while the work runs, release (the design:
 * docs/DESIGN.md "Where each rule lives").
 *
 * What this guarantees: the work runs only after a clock-free claim, with a token higher than every earlier one for
 * the key; renewals are sent from the process doing the work; the lease is given back however the work ends, and an
 * error from the work is rethrown as it came. What it does NOT guarantee: that no earlier holder is still writing.
 * A paused holder wakes up believing it holds the lease. Check the stop time before each act (`lease.act` or
 * `lease.check`), and write through the fence the lease holds (`lease.fenced(fence)`: its `guard()`, writeFenced): the
 * fence is what refuses the late write.
 */
import { validateLeaseConfig, type LeaseConfig } from './config';
import type { Events } from './events';
import { claim, type Lease, type LeaseDeps } from './lease';

/**
 * Claim `key`, run `work` with the held lease while a heartbeat renews it from this process, then release it.
 *
 * However the work ends, the lease is given back, conditionally (it changes nothing if the lease moved on), so the
 * next holder need not wait it out. A release that fails is reported as a `release-failed` event, never thrown: not
 * over the work's error, and not over a finished work's result (an unreleased lease simply runs out). An error from
 * the work is rethrown as it came. A lease lost during the work makes the next `lease.check()` throw LeaseLostError.
 *
 * @param deps - the lock table, the store client, the clock; `events` to hear claims, renewals and losses
 * @param key - the lock item's key: one lease per key
 * @param holder - this holder's name
 * @param config - lease timing; absent fields take the defaults (`LEASE_DEFAULTS`), and the whole is validated
 * @param work - the fenced job; receives the lease: write through the fence it holds (`lease.fenced(fence)`)
 * @returns what `work` returned
 * @throws ConfigError for bad settings (nothing written), ClaimBudgetExhaustedError if the holder stayed alive,
 * or whatever `work` threw
 */
export async function withLease<T>(
  deps: LeaseDeps,
  key: string,
  holder: string,
  config: Partial<LeaseConfig>,
  work: (lease: Lease) => Promise<T>,
): Promise<T> {
  const settings = validateLeaseConfig(config);
  // 1. claim, clock-free; 2. renew from THIS process, the one doing the work (a sidecar proves nothing)
  const lease = await claim(deps, key, holder, settings);
  lease.startHeartbeat();
  try {
    // 3. the work, checking the stop time before each act
    return await work(lease);
  } finally {
    // 4. give the lease back (stops the heartbeat first); never let the release hide the work's outcome
    await releaseQuietly(lease, deps.events);
  }
}

/**
 * Release during cleanup: a failed release must not hide the error that led to it, but it is reported (a
 * `release-failed` event), not dropped. The lease runs out on its own if the release did not land.
 */
export async function releaseQuietly(lease: Lease, events: Events | undefined): Promise<void> {
  try {
    await lease.release();
  } catch (err) {
    events?.emit('release-failed', { key: lease.key, token: lease.token, error: (err as Error).name, message: (err as Error).message });
  }
}

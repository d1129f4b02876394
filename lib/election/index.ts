/**
 * `fencepost/election`: one active instance of a role (a pacer, a relay, the writer of a ledger), on the lock table,
 * fenced at the resource by epoch.
 *
 *   election  `new Election(deps, role, config)`: candidates queue, the lowest live one leads, and its epoch (its place
 *             in the queue) is higher than every epoch the role handed out before. `run` is one term with callbacks
 *             (started leading, stopped leading and why, a new leader seen) and an AbortSignal that resigns at once;
 *             `campaign` and `resign` are the same steps by hand; `observe` and `watch` say who leads, to anyone.
 *   fence     a leader's epoch bound to what it writes: `leadership.ledger(epochFence)` (a ledger whose entries carry
 *             (epoch, version)), `leadership.fenced(fence)` (the DynamoDB fence of `fencepost`), or
 *             `postgresFence(...).held(leadership)` (`fencepost/postgres`). The store refuses a deposed leader.
 *   handover  `handover(deps, role, writer, config, epochFence)`: replace a role's single writer with a gap, never an
 *             overlap (flip the writer lease, wait the lease plus a margin on the new writer's own clock, bump the
 *             epoch in the store before the first write).
 *
 * What it does not guarantee: a single leader. A paused leader wakes up believing it leads until its stop time; only
 * the fence at the resource refuses its writes.
 *
 * @packageDocumentation
 */
export {
  Election,
  Leadership,
  type CampaignOptions,
  type ElectionDeps,
  type ElectionReads,
  type LeaderView,
  type RunOptions,
  type StopReason,
  type TermEnd,
  ledgerKey,
} from './election';
export { EpochFence, LedgerWriter, ledgerViolations, type EpochFenceTarget, type LedgerEntry, type LedgerHead } from './epoch-fence';
export { handover, HANDOVER_DEFAULTS, Writer, writerLedgerKey, type HandoverConfig, type HandoverOptions } from './handover';
export { awsLedgerStore } from './ledger-store';
// The core's types and errors this entry names or throws: the same declarations as the `fencepost` entry's.
export { ConfigError, FencedOutError, FencepostError, LeaseLostError, StopTimePassedError, VersionConflictError } from '../core/errors';
export { LEASE_DEFAULTS, type LeaseConfig } from '../core/config';
export type { Clock } from '../core/clock';
export type { Clients } from '../core/aws/clients';
export type { Lease, LeaseDeps } from '../core/lease';
export type { Fence, FenceTarget, HeldFence } from '../core/fence';
export { FenceNotRaisedError } from '../core/errors';
export type { ActionReason, AppendOutcome, LedgerStore, RaiseOutcome } from '../core/store/ledger';
export type { TableNames } from '../core/schema';
// The interfaces the lock store implements (`awsStores(...).locks` does), as the `fencepost` entry's `store` namespace has them.
export * as store from '../core/stores';

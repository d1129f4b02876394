/**
 * Typed errors a caller can act on. Every error carries what it met (the record that won, the fence it hit),
 * so the caller never needs a second read to decide what to do. Match them with `instanceof`.
 *
 * What each one means for a holder ("a rejected write means: you have lost the lock; stop and
 * discard local state"):
 *   LeaseLostError      the lock item no longer names us (or our epoch): stop, discard local state.
 *   StopTimePassedError our own stop time passed on our monotonic clock: stop, don't act.
 *   FencedOutError      the resource refused our token: a newer holder raised the fence. Stop, discard.
 *   FenceNotRaisedError the fence item does not exist (or has no fence): nobody raised it, so it guards nothing.
 *                       A bug in the caller: raise the fence before writing with it.
 *   VersionConflictError another write of the same epoch took the version first: read the head again.
 *   AlreadyDoneError    the job is DONE; nothing to do.
 *   ConfigError         bad input; nothing was written.
 *   InfrastructureError the local stack or a store could not be reached or started.
 */

/** The base of every error the library throws on purpose: match a family with `instanceof FencepostError`. */
export abstract class FencepostError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The lock item shows another holder or epoch: the lease is gone. */
export class LeaseLostError extends FencepostError {
  constructor(
    /** The lock item's key. */
    readonly lockKey: string,
    /** Our epoch: the token that is no longer ours to write with. */
    readonly epoch: number,
    /** The lock item as the store returned it when our condition failed (absent if unknown). */
    readonly current?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(
      `lease on ${lockKey} lost (our epoch ${epoch}, holder now ${String(current?.holder ?? 'none')}, epoch now ${String(current?.epoch ?? '?')})`,
      options,
    );
  }
}

/** The holder's own stop time (sent_at + lease - margin, monotonic) has passed. */
export class StopTimePassedError extends FencepostError {
  constructor(
    /** The lock item's key. */
    readonly lockKey: string,
    /** Our epoch (the fencing token). */
    readonly epoch: number,
    /** The stop time, on this process's monotonic clock. */
    readonly stopAtMs: number,
    /** The monotonic time of the check that failed. */
    readonly nowMs: number,
  ) {
    super(`stop time passed for ${lockKey} epoch ${epoch}: monotonic now ${nowMs.toFixed(0)} ms >= stop_at ${stopAtMs.toFixed(0)} ms`);
  }
}

/** A resource refused our token because it has seen a higher one. Nothing of the refused write landed. */
export class FencedOutError extends FencepostError {
  constructor(
    /**
     * Which fence refused us: 'job-row', 'chunk-fence' (a chunk's fence item), 'manifest' (the S3 manifest), or the
     * name a caller gave its own fence (`fenceOn({ resource })`, default 'fence').
     */
    readonly resource: string,
    /** Our token, refused. */
    readonly token: number,
    /** The fence we met, when the store told us (job row `fence`, manifest `token`). */
    readonly fence: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(`fenced out at ${resource}: our token ${token}, fence ${fence ?? 'unknown'}`, options);
  }
}

/**
 * A fenced write met a fence that was never raised: its item does not exist or carries no `fence`. An unraised fence
 * accepts no token (it would guard nothing), so nothing was written. Not a newer holder: the writer skipped its raise.
 */
export class FenceNotRaisedError extends FencepostError {
  constructor(
    /** Which fence was never raised. */
    readonly resource: string,
    /** Our token, which the raise should have set. */
    readonly token: number,
    options?: { cause?: unknown },
  ) {
    super(`fence '${resource}' has not been raised: raise it to ${token} first (lease.fenced(fence).raise()) before writing`, options);
  }
}

/**
 * An epoch-fenced append met another version than the one it followed (lib/election/epoch-fence.ts): a write of an equal or
 * lower epoch landed first. Nothing of the refused append was written; read the head again and continue from it.
 */
export class VersionConflictError extends FencepostError {
  constructor(
    /** The fence item's key. */
    readonly fenceKey: string,
    /** The version this append followed. */
    readonly expected: number,
    /** The version the fence item carried, when the store told us. */
    readonly current: number | undefined,
  ) {
    super(`version conflict at ${fenceKey}: the append followed version ${expected}, the head is at ${current ?? 'unknown'}`);
  }
}

/** The job row is already DONE (the raise's condition refused it, or a pre-check saw it). */
export class AlreadyDoneError extends FencepostError {
  constructor(
    /** The job row's key. */
    readonly jobId: string,
    /** The fence the DONE row carries, when known. */
    readonly fence: number | undefined,
  ) {
    super(`job ${jobId} is already DONE (fence ${fence ?? 'unknown'})`);
  }
}

/** Complete found chunks whose fence items do not record them done (docs/DESIGN.md, "Chunk fences"). */
export class RunIncompleteError extends FencepostError {
  constructor(
    /** The job row's key. */
    readonly jobId: string,
    /** The chunks whose fence items do not say done. */
    readonly chunksNotDone: readonly number[],
  ) {
    super(`job ${jobId} cannot complete: chunks ${chunksNotDone.join(', ')} are not recorded done`);
  }
}

/** The claim gave up: the holder kept renewing through the whole claim budget (`claimBudget` leases of waiting). */
export class ClaimBudgetExhaustedError extends FencepostError {
  constructor(
    /** The lock item's key. */
    readonly lockKey: string,
    /** The budget waited, in leases. */
    readonly leases: number,
    /** The holder that stayed alive, as last seen. */
    readonly holder: string | undefined,
    /** The lock's epoch as last seen: the live holder's token. */
    readonly epoch?: number,
  ) {
    super(`could not claim ${lockKey} after waiting ${leases} leases: ${holder ?? 'another holder'} is alive and renewing`);
  }
}

/** Bad input. Collects every problem, so the user fixes them all at once. Nothing has been written. */
export class ConfigError extends FencepostError {
  constructor(
    /** One sentence per problem found. */
    readonly problems: readonly string[],
  ) {
    super(problems.length === 1 ? problems[0] : `invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/** The local stack or a store could not be started or reached (missing Java, port in use, no answer). */
export class InfrastructureError extends FencepostError {}

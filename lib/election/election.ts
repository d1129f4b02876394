/**
 * Leader election on the lock table (docs/DESIGN.md § Election).
 *
 * A leader is a lease holder on a role. Candidates queue: each takes the next sequence number from the role's
 * counter, in the same transaction that writes its candidate item, and the lowest live sequence leads. The leader's
 * epoch is its sequence number: stamp it on every write, through an EpochFence, so the resource refuses a deposed
 * leader.
 *
 * Items, all in the lock table (never TTL'd):
 *   election/<role>          the role item: `epoch`, the last sequence handed out (never deleted; the restore bump
 *                            raises it like every epoch), and `members`, the set of live sequence numbers
 *   election/<role>/<seq>    a candidate item: a lock item (holder, lease_ms, rvn, epoch = seq) that its candidate
 *                            renews like any lease; deleted when the candidate resigns or is found gone
 *
 * A waiting candidate watches only its predecessor (the next lower live sequence): it polls that one item on its own
 * monotonic clock, and takes its rvn unchanged for a full lease as the sign it is gone (the claim rule,
 * lease.ts nextClaimStep): it then deletes it, conditional on that rvn, and reads the role item again. Nobody else
 * reads that item, so one departure costs one candidate's reads, not the herd's. No wall clock decides anything.
 *
 * What this guarantees: epochs only grow, and a candidate leads only once every lower candidate has resigned or has
 * been seen silent for a full lease by its successor. What it does NOT guarantee: a single leader. A paused leader
 * wakes up believing it leads until its stop time; two processes may each believe they lead for up to a lease. Only
 * the resource can refuse the deposed one: write through an EpochFence (lib/election/epoch-fence.ts).
 */
import { validateLeaseConfig, type LeaseConfig } from '../core/config';
import { backoffOf, newRvn, retryTransient } from '../core/conditions';
import { sleepUnlessAborted, wallIso, type ClockTimer } from '../core/clock';
import { ConfigError, FencedOutError, LeaseLostError, StopTimePassedError } from '../core/errors';
import { heldFence, type Fence, type HeldFence } from '../core/aws/fence';
import { Lease, nextClaimStep, type LeaseDeps, type Watch } from '../core/lease';
import type { LeaseStore, RemoveOn, RoleItem, RoleStore } from '../core/store/lock';
import { LedgerWriter, type EpochFence } from './epoch-fence';
import { candidateKey, nameProblems, roleKey } from '../core/election-keys';
// The keys, kept with the grants that reach them (lib/core/election-keys.ts).
export { candidateKey, ledgerKey, nameProblems, roleKey } from '../core/election-keys';

/** What an election needs: the lease's deps, with a lock store that also keeps the role and its candidate queue. */
export type ElectionDeps = Omit<LeaseDeps, 'locks'> & { readonly locks: LeaseStore & RoleStore };

/** Who leads a role, as the store says now: the lowest live candidate (it may be gone and not yet found so). */
export interface LeaderView {
  /** The role observed. */
  readonly role: string;
  /** The leading candidate's name; absent when nobody campaigns. */
  readonly leader?: string;
  /** The leader's epoch (its sequence number); absent when nobody campaigns. */
  readonly epoch?: number;
  /** The live sequence numbers, lowest first: the queue. */
  readonly queue: readonly number[];
  /** The last sequence handed out: every future leader's epoch is above it. */
  readonly lastEpoch: number;
}

/** How a leader's term ended: its work returned and it resigned; it lost leadership; or the caller stopped it. */
export type StopReason = 'resigned' | 'lost' | 'stopped';

/** What `Election.run` reports when a term (or the wait for one) ends. */
export interface TermEnd {
  /** Why the term ended. */
  readonly why: StopReason;
  /** The term's epoch; absent if the candidate never led. */
  readonly epoch?: number;
  /** Why it was lost (StopTimePassedError, LeaseLostError, FencedOutError), or what the work threw. */
  readonly error?: Error;
}

/** The callbacks and the cancellation of `Election.run`. */
export interface RunOptions {
  /**
   * The leader's work, called once it leads: write with `leadership.epoch` through a fence (`leadership.fenced`,
   * `leadership.ledger`, a PostgreSQL fence's `held(leadership)`), check before every action (`leadership.act`), and
   * return when `leadership.signal` aborts. The term ends when it returns.
   */
  readonly onStartedLeading: (leadership: Leadership) => void | Promise<void>;
  /** Called once when the term (or the wait) ends, with why. */
  readonly onStoppedLeading?: (end: TermEnd) => void;
  /** Called when the leader this candidate sees changes, itself included (`self: true`), while it waits and as it starts leading. */
  readonly onNewLeader?: (view: LeaderView & { readonly self?: boolean }) => void;
  /** How often a waiting candidate reads who leads, for `onNewLeader` (two reads a poll). @defaultValue the lease */
  readonly watchEveryMs?: number;
  /** Abort to stop: a waiting candidate leaves the queue at once; a leader resigns at once and its work's signal aborts. */
  readonly signal?: AbortSignal;
}

/** The errors that mean a leader's epoch is no longer good to write with. */
function isLoss(err: unknown): boolean {
  return err instanceof StopTimePassedError || err instanceof LeaseLostError || err instanceof FencedOutError;
}

function ended(options: RunOptions, end: TermEnd): TermEnd {
  options.onStoppedLeading?.(end);
  return end;
}

/** How a candidate reached the head of the queue, for the events. */
export type Departure = 'resigned' | 'found-gone';

/** What a campaign reads, by item: the measure of "one departure wakes one candidate". */
export interface ElectionReads {
  /** Reads of the role item to take a sequence number (more than one when another candidate joined at the same moment). */
  join: number;
  /** Reads of the role item after a predecessor left: one per departure this candidate saw. */
  role: number;
  /** Reads of each predecessor's candidate item, by its sequence number. */
  readonly predecessors: Record<number, number>;
}

/** Options of one campaign. */
export interface CampaignOptions {
  /**
   * Called once, at the leader's stop time, when its renewals have not moved the stop time on (they failed, or the
   * last one is still unanswered): stop acting as leader. A renewal answered later does not undo it: from then on the
   * leadership's `check` and `act` refuse.
   */
  readonly onLost?: (err: Error) => void;
  /**
   * Abort the wait (at once, not at the next poll): the candidate leaves the queue and `campaign` rejects with the
   * signal's reason. It covers the wait only; once leading, `resign()` (or `run`, which resigns on its signal).
   */
  readonly signal?: AbortSignal;
  /** Count this campaign's reads here (also while it waits, and if it never leads). @default a fresh count, on the Leadership */
  readonly reads?: ElectionReads;
}

/**
 * An election for one role. `campaign` queues a candidate and resolves when it leads; `observe` says who leads.
 * Every duration (polls, the watch, renewals, stop times) is timed on `deps.clock`'s monotonic clock.
 */
export class Election {
  private readonly store: ElectionDeps['locks'];
  private readonly config: LeaseConfig;

  /**
   * @param deps - the lock store (`awsStores(...).locks`, or one of your own) and the clock
   * @param role - the role's name: one leader at a time leads it
   * @param config - the candidates' lease; absent fields take `LEASE_DEFAULTS` (10 s lease, 3 s renewals, 2 s margin), and
   * the whole is validated together
   * @throws ConfigError naming every problem with the role or the settings, before anything is written
   */
  constructor(
    private readonly deps: ElectionDeps,
    /** The role's name: one leader at a time leads it. */
    readonly role: string,
    config: Partial<LeaseConfig> = {},
  ) {
    const problems = nameProblems('role', role);
    if (problems.length > 0) throw new ConfigError(problems);
    this.config = validateLeaseConfig(config);
    this.store = deps.locks;
  }

  /**
   * Queue `candidate` and wait until it leads (CAMPAIGN steps 1-4): renew its candidate item from this process
   * meanwhile, watch only its predecessor, and re-read the queue when the predecessor leaves.
   * @returns the leadership: the epoch to stamp on every write, the stop-time check, resign
   * @throws LeaseLostError if this candidate's own item was found gone while it waited (it was paused past a lease)
   */
  async campaign(candidate: string, options: CampaignOptions = {}): Promise<Leadership> {
    const problems = nameProblems('candidate', candidate);
    if (problems.length > 0) throw new ConfigError(problems);
    options.signal?.throwIfAborted();
    const reads: ElectionReads = options.reads ?? { join: 0, role: 0, predecessors: {} };
    const { seq, queue, lease } = await this.join(candidate, reads);
    lease.startHeartbeat();
    const candidacy = new Leadership(this.deps, this.role, candidate, seq, lease, reads, options.onLost);
    this.deps.events?.emit('campaign', { role: this.role, candidate, seq, predecessor: predecessorOf(queue, seq) });
    try {
      let members = queue;
      for (;;) {
        options.signal?.throwIfAborted();
        lease.check(); // our own candidacy: lost if a successor found us silent
        const predecessor = predecessorOf(members, seq);
        if (predecessor === undefined) break;
        const how = await this.watchPredecessor(predecessor, lease, reads, options.signal);
        this.deps.events?.emit('predecessor-gone', { role: this.role, seq, predecessor, how, reads: reads.predecessors[predecessor] ?? 0 });
        members = await this.readQueue(reads);
      }
    } catch (err) {
      // Leave the queue; if even that fails, our successor finds our item silent a lease later (liveness, not safety).
      await candidacy.resign().catch(() => undefined);
      throw err;
    }
    candidacy.lead();
    return candidacy;
  }

  /** This leader as it knows itself, when the store cannot be read. */
  private selfView(candidate: string, leadership: Leadership): LeaderView {
    return { role: this.role, leader: candidate, epoch: leadership.epoch, queue: [leadership.epoch], lastEpoch: leadership.epoch };
  }

  /** Who leads now, as the store says (two strongly consistent reads). The leader it names may be gone, not yet found so. */
  observe(): Promise<LeaderView> {
    return observeRole(this.deps, this.role);
  }

  /**
   * Call `onNewLeader` each time the leader (or its epoch) this process sees changes, polling `observe()` every
   * `everyMs` (two strongly consistent reads a poll), until `signal` aborts. Anyone may watch, candidate or not.
   * @param everyMs - the poll period. @defaultValue the lease
   */
  async watch(onNewLeader: (view: LeaderView) => void, options: { readonly everyMs?: number; readonly signal?: AbortSignal } = {}): Promise<void> {
    const everyMs = options.everyMs ?? this.config.leaseMs;
    if (!Number.isSafeInteger(everyMs) || everyMs < 1) throw new ConfigError([`everyMs must be a positive integer, got ${everyMs}`]);
    let last: string | undefined;
    while (!options.signal?.aborted) {
      const view = await this.observe();
      const seen = `${view.leader ?? ''}@${view.epoch ?? ''}`;
      if (seen !== last && !options.signal?.aborted) onNewLeader(view);
      last = seen;
      await sleepUnlessAborted(this.deps.clock, everyMs, options.signal);
    }
  }

  /**
   * One term, as client-go's leader elector runs one: campaign as `candidate`; once leading, run
   * `onStartedLeading(leadership)` (give your work `leadership.signal`: it aborts at the stop time); when the work
   * returns, resign. `onStoppedLeading` is called once, after the work has returned and the candidacy has left the
   * queue, with why the term ended. To stand again, call `run` again (a new term has a new epoch).
   * @returns how the term ended: `resigned` (the work returned), `lost` (the stop time came with no renewal moving it
   * on, the candidacy was found gone, or a fence refused the epoch: the error says which), or `stopped` (`signal`
   * aborted: while waiting, the candidate left the queue at once; while leading, it resigned at once and the work's
   * signal aborted)
   * @throws what the work throws, other than the errors that say leadership was lost (after resigning); ConfigError
   */
  async run(candidate: string, options: RunOptions): Promise<TermEnd> {
    // The watch stops when the wait ends or the caller stops. The caller's abort is forwarded by a listener, not
    // AbortSignal.any: Node holds a combined signal that has listeners until it aborts, and with it the whole watch.
    const stopWatching = new AbortController();
    const forward = () => stopWatching.abort();
    if (options.signal?.aborted) forward();
    else options.signal?.addEventListener('abort', forward, { once: true });
    const watching = options.onNewLeader
      ? this.watch(options.onNewLeader, { everyMs: options.watchEveryMs, signal: stopWatching.signal }).catch(() => undefined) // a failed read ends the watch, not the term
      : undefined;
    const watchEnded = async () => {
      stopWatching.abort();
      options.signal?.removeEventListener('abort', forward);
      await watching;
    };
    let leadership: Leadership;
    try {
      leadership = await this.campaign(candidate, { signal: options.signal });
    } catch (err) {
      await watchEnded();
      if (options.signal?.aborted) return ended(options, { why: 'stopped' });
      if (isLoss(err)) return ended(options, { why: 'lost', error: err as Error });
      throw err;
    }
    await watchEnded();
    if (options.onNewLeader) options.onNewLeader({ ...(await this.observe().catch(() => this.selfView(candidate, leadership))), self: true });
    // Resign at once; a failed delete is no error of the term: the successor finds the item silent a lease later.
    const stop = () => void leadership.resign().catch(() => undefined);
    options.signal?.addEventListener('abort', stop, { once: true });
    let failure: unknown;
    try {
      await options.onStartedLeading(leadership);
    } catch (err) {
      failure = err;
    } finally {
      options.signal?.removeEventListener('abort', stop);
    }
    const lostBy = leadership.lostWith;
    await leadership.resign().catch(() => undefined); // a failed delete: our successor finds the item silent a lease later
    const epoch = leadership.epoch;
    if (options.signal?.aborted) return ended(options, { why: 'stopped', epoch });
    // The work's own refusal (a fence met, a check thrown) says more than the watchdog's stop time that may have come first.
    if (lostBy !== undefined || isLoss(failure)) return ended(options, { why: 'lost', epoch, error: isLoss(failure) ? (failure as Error) : lostBy });
    ended(options, { why: 'resigned', epoch, ...(failure === undefined ? {} : { error: failure as Error }) });
    if (failure !== undefined) throw failure;
    return { why: 'resigned', epoch };
  }

  private readRole(): Promise<RoleItem | undefined> {
    return this.store.readRole(roleKey(this.role));
  }

  private async readQueue(reads: ElectionReads): Promise<number[]> {
    reads.role++;
    return [...((await this.readRole())?.members ?? [])];
  }

  /**
   * CAMPAIGN step 1: take the next sequence number and write the candidate item in ONE transaction, conditional on
   * the counter being what we read. A candidate item therefore exists from the moment its number is handed out: no
   * later candidate can find the queue without it.
   */
  private async join(candidate: string, reads: ElectionReads): Promise<{ seq: number; queue: number[]; lease: Lease }> {
    for (;;) {
      reads.join++;
      const role = await this.readRole();
      const last = role?.epoch;
      // The role's first join starts above the epoch floor (read only then): a restored table may lack the role item.
      const seq = (last ?? (await this.store.readFloor())) + 1;
      const rvn = newRvn();
      const sentAt = this.deps.clock.monotonicMs(); // before sending: the stop time never starts after the grant
      const request = {
        roleKey: roleKey(this.role),
        last,
        seq,
        candidateKey: candidateKey(this.role, seq),
        candidate: { holder: candidate, leaseMs: this.config.leaseMs, rvn, wallIso: wallIso(this.deps.clock) },
      };
      let sent = 0;
      const out = await retryTransient(backoffOf(this.deps), () => (sent++, this.store.join(request)));
      // After a transient failure the first try may have landed with its answer lost: the retry then finds the counter
      // moved. Our rvn in that candidate item says so.
      const landed = out.ok || (sent > 1 && (await this.store.read(request.candidateKey))?.rvn === rvn);
      if (landed) {
        const lease = Lease.held(this.deps, request.candidateKey, candidate, seq, this.config, sentAt);
        return { seq, queue: [...(role?.members ?? []), seq], lease };
      }
      // Another candidate took the number: read the counter again.
    }
  }

  /**
   * CAMPAIGN steps 3-4: watch only the predecessor's item until it is gone. Gone means deleted (it resigned, or someone
   * found it gone) or its rvn unchanged for its full lease on OUR monotonic clock (the claim rule), in which case we
   * delete it, conditional on that rvn, and take it out of the queue in the same transaction.
   */
  private async watchPredecessor(predecessor: number, own: Lease, reads: ElectionReads, signal?: AbortSignal): Promise<Departure> {
    const key = candidateKey(this.role, predecessor);
    let watch: Watch | undefined;
    let lastSeenAt = 0;
    for (;;) {
      signal?.throwIfAborted();
      own.check();
      reads.predecessors[predecessor] = (reads.predecessors[predecessor] ?? 0) + 1;
      const item = await this.store.read(key);
      const seenAt = this.deps.clock.monotonicMs(); // after the response: no earlier than the write of its rvn
      if (item?.holder === undefined) return 'resigned';
      const sighting = { holder: item.holder, epoch: item.epoch, seenRvn: item.rvn, waitMs: item.lease_ms ?? this.config.leaseMs };
      // A candidate waits as long as its predecessor lives: no claim budget.
      const step = nextClaimStep(watch, sighting, seenAt - lastSeenAt, { leaseMs: this.config.leaseMs, claimBudget: Infinity });
      [watch, lastSeenAt] = [step.watch, seenAt];
      if (step.action === 'claim') {
        if (await this.removeIfUnchanged(predecessor, item.rvn!)) return 'found-gone';
        continue; // it renewed (or resigned) in between: watch again
      }
      await sleepUnlessAborted(this.deps.clock, step.waitMs, signal);
    }
  }

  /** Delete a silent candidate's item and take it out of the queue, only if its rvn is still the one watched. */
  private removeIfUnchanged(seq: number, seenRvn: string): Promise<boolean> {
    return removeFromQueue(this.store, this.deps, this.role, seq, { rvn: seenRvn });
  }
}

/**
 * One transaction: delete candidate `seq`'s item on `on` (the rvn watched, or still ours), and take `seq` out of the role's queue. Two removals
 * at once both update the role item, so one may be cancelled with TransactionConflict (AWS cancels either of two
 * transactions on one item): a transient cancellation is sent again after a backoff. That is safe: if the first try
 * landed with its answer lost, the item is gone and the retry's condition fails, which the callers read as "not
 * removed by us" (a watch then finds the item gone; a resign finds it no longer ours).
 */
async function removeFromQueue(
  store: RoleStore,
  deps: Pick<LeaseDeps, 'clock' | 'random'>,
  role: string,
  seq: number,
  on: RemoveOn,
): Promise<boolean> {
  const out = await retryTransient(backoffOf(deps), () => store.removeCandidate(roleKey(role), candidateKey(role, seq), seq, on));
  return out.ok;
}

/**
 * Who leads `role` now, as the store says: the lowest live candidate, its epoch, the queue and the last epoch handed
 * out (two strongly consistent reads, no campaign needed). The leader it names may be gone and not yet found so;
 * never act on it: campaign.
 */
export async function observeRole(deps: Pick<ElectionDeps, 'locks'>, role: string): Promise<LeaderView> {
  const store = deps.locks;
  const item = await store.readRole(roleKey(role));
  const queue = [...(item?.members ?? [])].sort((a, b) => a - b);
  const lastEpoch = Number(item?.epoch ?? 0);
  if (queue.length === 0) return { role, queue, lastEpoch };
  const head = await store.read(candidateKey(role, queue[0]));
  return { role, leader: head?.holder, epoch: queue[0], queue, lastEpoch };
}

/** The next lower live sequence number than `seq`: the only candidate `seq` watches. */
function predecessorOf(queue: Iterable<number>, seq: number): number | undefined {
  let best: number | undefined;
  for (const m of queue) if (m < seq && (best === undefined || m > best)) best = m;
  return best;
}

/**
 * A candidacy that leads (or is still queued, inside `campaign`). Its epoch is its sequence number. Check before every
 * action (`check`, `act`): past its stop time it must not act; `onLost` is called then if no renewal moved it on.
 */
export class Leadership {
  private watchdog: ClockTimer | undefined;
  private resigned = false;
  private readonly ended = new AbortController();
  private lost: Error | undefined;

  /** A leadership is handed out by `campaign` (or `run`), never made by hand. @internal */
  constructor(
    private readonly deps: ElectionDeps,
    /** The role led. */
    readonly role: string,
    /** This candidate's name. */
    readonly candidate: string,
    /** The epoch: this candidate's sequence number. Stamp it on every write. */
    readonly epoch: number,
    private readonly lease: Lease,
    /** What the campaign read, by item. */
    readonly reads: ElectionReads,
    private readonly onLost?: (err: Error) => void,
  ) {}

  /**
   * Called by campaign once this candidate heads the queue: report it, and start watching the stop time.
   * @internal
   */
  lead(): void {
    this.deps.events?.emit('leading', { role: this.role, candidate: this.candidate, epoch: this.epoch, stopAtMs: Math.round(this.lease.stopAtMs) });
    this.armWatchdog();
  }

  /** The stop time on this process's monotonic clock. */
  get stopAtMs(): number {
    return this.lease.stopAtMs;
  }

  /** The fencing token a fence takes from its holder: the epoch (so `postgresFence(...).held(leadership)` works). */
  get token(): number {
    return this.epoch;
  }

  /**
   * Aborts when this leadership ends: at the stop time when no renewal has moved it on (its reason is the error
   * `check` throws from then on), or when it resigns. Give it to the work, so it stops at the stop time, not at its
   * next write.
   */
  get signal(): AbortSignal {
    return this.ended.signal;
  }

  /** Why the leadership was lost (the watchdog's StopTimePassedError or LeaseLostError), if it was; absent while it leads or after a resign. */
  get lostWith(): Error | undefined {
    return this.lost;
  }

  /**
   * This leader's epoch bound to a DynamoDB fence: what it raises first and writes with (`raise()`, `guard()`,
   * `writeFenced`), each send checked against this leadership first.
   */
  fenced(fence: Fence): HeldFence {
    return heldFence(fence, this.epoch, () => this.check());
  }

  /**
   * A writer of `fence`'s ledger with this leader's epoch and name, from the ledger's head: each `append` checks this
   * leadership, then appends the next version under the fence; the first raises the fence to the epoch.
   */
  async ledger(fence: EpochFence): Promise<LedgerWriter> {
    const head = await fence.head();
    return new LedgerWriter(fence, this, this.epoch, this.candidate, head.version, { events: this.deps.events });
  }

  /**
   * BEFORE EVERY ACTION: past the stop time (or once a renewal found the candidacy gone), stop. Once the stop time has
   * passed with no renewal moving it on, this leadership is over for good, even if a late renewal answers after: a
   * leader that stopped at its stop time does not start again on the same epoch (campaign again). The rule is the
   * lease's own (Lease.check).
   * @throws StopTimePassedError or LeaseLostError
   */
  check(): void {
    if (this.resigned && this.lost === undefined) throw new LeaseLostError(this.lease.key, this.epoch);
    this.lease.check();
  }

  /** Check, then act: `await leadership.act(() => fence.append(leadership.epoch, …))`. */
  act<T>(fn: () => T | Promise<T>): Promise<T> {
    return this.lease.act(fn);
  }

  /**
   * Leave the queue: stop renewing and delete this candidate's item, conditional on it still being ours, in the same
   * transaction that takes it out of the role's queue. The successor finds it gone at its next poll and leads.
   * @returns false if the item was no longer ours (a successor had found us gone): nothing changed
   */
  async resign(): Promise<boolean> {
    if (this.resigned) return false;
    this.resigned = true;
    this.watchdog?.cancel();
    this.ended.abort(new LeaseLostError(this.lease.key, this.epoch));
    await this.lease.stopHeartbeat();
    const removed = await removeFromQueue(this.deps.locks, this.deps, this.role, this.epoch, { holder: this.candidate, epoch: this.epoch });
    if (removed) this.deps.events?.emit('resigned', { role: this.role, candidate: this.candidate, epoch: this.epoch });
    return removed;
  }

  /** At each stop time: if the renewals kept it ahead, wait for the next; otherwise the leadership is over: report it once. */
  private armWatchdog(): void {
    const fire = () => {
      if (this.resigned) return;
      try {
        this.lease.check();
        this.watchdog = this.deps.clock.after(Math.max(1, this.lease.stopAtMs - this.deps.clock.monotonicMs()), fire);
      } catch (err) {
        this.watchdog = undefined;
        this.lost = err as Error;
        this.ended.abort(err);
        // Stop renewing too: a leader that will not act must not hold the head of the queue, so its successor finds
        // it silent a lease later (or gone, once it resigns).
        void this.lease.stopHeartbeat();
        this.deps.events?.emit('leader-lost', { role: this.role, candidate: this.candidate, epoch: this.epoch, error: (err as Error).name });
        this.onLost?.(err as Error);
      }
    };
    this.watchdog = this.deps.clock.after(Math.max(1, this.lease.stopAtMs - this.deps.clock.monotonicMs()), fire);
  }
}

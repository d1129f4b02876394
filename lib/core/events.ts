/**
 * Events a holder emits as it works: what `--events` prints one JSON line each, and what the story replay and the
 * tests read. Each is stamped with the worker and its monotonic milliseconds (comparable only within one process).
 *
 * One name per idea, each with its own typed fields (`EventFields`): `emit('claim', { … })` type-checks the fields
 * for that name, and a listener receives a discriminated union (`FencepostEvent`): `switch (e.event)` narrows it.
 * Events are reports, never inputs to a decision: nothing in the core waits on one.
 */
import type { Clock } from './clock';
import type { SweepReport } from './sweep-report';

/**
 * The fields of each event, by name. Durations are whole milliseconds on the emitting process's monotonic clock.
 * In a lease's and a job's events, `token` is always the emitting holder's own fencing token; another holder's is
 * `epoch` (as the lock item names it) or `ownerToken` (as a job row names it), and a fence item's is `fence`. The
 * election's and the epoch fence's events (from `campaign` on) have no token: their `epoch` is the emitter's own, as
 * their stores name it. Another holder's name is `holder` (`holderNow` when a renewal found it replaced).
 */
export interface EventFields {
  /** A claimant read the lock item and saw a free lock or an rvn it had not watched before (reported once per rvn). */
  sighted: {
    readonly key: string;
    /** The holder the lock item names; absent when the lock was free. */
    readonly holder?: string;
    readonly epoch?: number;
    readonly rvn?: string;
    /** How long this rvn must stay unchanged before a claim: 0 when free, otherwise the holder's declared lease. */
    readonly waitMs: number;
    /** 1 for the first sighting of this claim, +1 for each new rvn. */
    readonly attempt: number;
  };
  /** A claim landed: `token` is the new epoch. */
  claim: {
    readonly key: string;
    readonly token: number;
    /** How long the claimed rvn was watched unchanged (0 for a free lock). */
    readonly waitedMs: number;
    readonly attempt?: number;
    /** The stop time on the claimant's monotonic clock (absent where the claim and the work are in other processes). */
    readonly stopAtMs?: number;
  };
  /** A renewal landed and moved the stop time. */
  renew: { readonly key: string; readonly token: number; readonly stopAtMs: number };
  /** A renewal met a transport or throttling error (retried until the stop time). */
  'renew-failed': { readonly key: string; readonly token: number; readonly error: string };
  /** A renewal's condition failed: the lock item names another holder or epoch. */
  'lease-lost': { readonly key: string; readonly token: number; readonly holderNow?: string };
  /** Every fence item of a job is raised to `token` (the job row, then every chunk fence). */
  'fence-raised': {
    readonly token: number;
    readonly previousFence?: number;
    readonly previousState?: string;
    readonly chunkFences: number;
    /** The chunks an earlier holder had recorded done (learnt from the old chunk fence items). */
    readonly chunksDone?: readonly number[];
  };
  /** The S3 manifest carries `token`. */
  'manifest-raised': { readonly token: number };
  /** One fenced transaction (or its retries without already-recorded puts) landed. */
  'batch-committed': {
    readonly token: number;
    readonly chunk: number;
    readonly batch: number;
    readonly recorded: number;
    readonly alreadyRecorded: number;
    readonly transactions: number;
    /** The index of the batch's first record. */
    readonly first: number;
  };
  /** The fence refused a batch: nothing of it was written. */
  'batch-rejected': { readonly token: number; readonly chunk: number; readonly batch: number; readonly fence?: number };
  /** A chunk's object is named by the manifest (the job's work); core's runChunk records it done on its fence item next. */
  'chunk-committed': {
    readonly token: number;
    readonly chunk: number;
    readonly key: string;
    readonly recorded: number;
    readonly alreadyRecorded: number;
  };
  /** The manifest refused a chunk commit (412 with a higher token). */
  'commit-rejected': { readonly token: number; readonly chunk: number; readonly fence?: number };
  /** The job row says DONE. */
  completed: { readonly token: number; readonly jobId: string };
  /** The job was DONE before this holder could raise its fence. */
  'already-done': { readonly jobId: string; readonly fence?: number };
  /**
   * The claim budget ran out on a live holder of a RUNNING run (its row's fence is the holder's token): a duplicate
   * start, which ends here quietly.
   */
  'another-holder': {
    readonly jobId: string;
    /** The live holder the lock item names, and its epoch (the waiter holds no token of its own). */
    readonly holder?: string;
    readonly epoch?: number;
  };
  /** The lease was given back (holder cleared, epoch kept). */
  released: { readonly key: string; readonly token: number };
  /** A release during cleanup failed; the error that led to the cleanup is rethrown, this one is reported. */
  'release-failed': { readonly key: string; readonly token: number; readonly error: string; readonly message: string };
  /** One sweep of the sparse index finished (`requeued` is a count here). */
  swept: SweepFields;
  /** A sweep found too many orphans at once and re-queued none. */
  'sweeper-storm': SweepFields;
  /**
   * The sweeper re-queued an orphaned job row: `ownerToken` and `fence` as it saw them on the row (`owner_token`, the
   * dead holder's token; in every event `token` is the emitter's own).
   */
  requeued: { readonly jobId: string; readonly ownerToken: number; readonly fence: number };
  /**
   * The sweeper found an orphan it re-queued `requeues` times already (its bound, `maxRequeuesPerRun`) and gave it up:
   * it starts no run of it until a person re-arms the run (docs/DESIGN.md "A poison run").
   */
  'given-up': { readonly jobId: string; readonly ownerToken: number; readonly fence: number; readonly requeues: number };
  /** A candidate joined a role's queue with sequence `seq`; it watches `predecessor` (absent: it heads the queue). */
  campaign: { readonly role: string; readonly candidate: string; readonly seq: number; readonly predecessor?: number };
  /** A waiting candidate's predecessor left the queue: it resigned, or it stayed silent a full lease and was removed. */
  'predecessor-gone': {
    readonly role: string;
    readonly seq: number;
    readonly predecessor: number;
    readonly how: 'resigned' | 'found-gone';
    /** How many reads of the predecessor's item this candidate made while watching it. */
    readonly reads: number;
  };
  /** A candidate heads the queue: it leads with `epoch` until its stop time. */
  leading: { readonly role: string; readonly candidate: string; readonly epoch: number; readonly stopAtMs: number };
  /** A candidate left the queue (its item deleted). */
  resigned: { readonly role: string; readonly candidate: string; readonly epoch: number };
  /** A leader's stop time came with its renewals failing: it must stop acting as leader. */
  'leader-lost': { readonly role: string; readonly candidate: string; readonly epoch: number; readonly error: string };
  /** A writer's epoch was bumped in the store it writes, before its first write (SINGLE-WRITER HANDOVER step 4). */
  'epoch-bumped': { readonly key: string; readonly epoch: number; readonly version: number };
  /** An entry landed in a ledger under the epoch fence. */
  appended: { readonly key: string; readonly epoch: number; readonly version: number; readonly writtenAt: string };
  /** The epoch fence refused an append: a newer epoch has written. Nothing of it landed. */
  'append-refused': { readonly key: string; readonly epoch: number; readonly version: number; readonly fence?: number };
  /** Fault injection only: the process is about to be stopped right after a passed stop-time check. */
  fault: { readonly fault: string; readonly step: string; readonly chunk?: number; readonly batch?: number };
}

/** A sweep's report as an event: the counts, with `requeued` and `givenUp` as counts rather than lists of job ids. */
type SweepFields = Omit<SweepReport, 'requeued' | 'givenUp'> & { readonly requeued: number; readonly givenUp: number };

/** Every event's name: one per idea (a sighting, a claim, a renewal, …). */
export type EventName = keyof EventFields;

/** What every event carries: its name, the emitting worker, and that worker's monotonic milliseconds. */
interface EventStamp<N extends EventName = EventName> {
  /** The event's name: the union's discriminant. */
  readonly event: N;
  /** The emitting worker's name. */
  readonly worker: string;
  /** The emitting process's monotonic milliseconds: comparable only with other events of the same process. */
  readonly monoMs: number;
}

/**
 * One event, as a listener receives it: a union discriminated by `event`. The fields in `EventFields` are typed;
 * an event that crossed a process boundary (a JSON line, a Lambda's log) may carry more, typed `unknown`.
 */
export type FencepostEvent = {
  [N in EventName]: EventStamp<N> & EventFields[N] & { readonly [field: string]: unknown };
}[EventName];

/** A listener: called synchronously with each event, in the order listeners were added. */
export type EventListener = (e: FencepostEvent) => void;

/** The emitter a holder reports through. Listeners run synchronously, in the order they were added. */
export class Events {
  private readonly listeners: EventListener[] = [];

  /**
   * @param worker - the name stamped on every event (the holder's name, a process id, …)
   * @param clock - whose monotonic clock stamps `monoMs`
   */
  constructor(
    /** The name stamped on every event. */
    readonly worker: string,
    private readonly clock: Clock,
  ) {}

  /** Add a listener. @returns this, to chain */
  on(listener: EventListener): this {
    this.listeners.push(listener);
    return this;
  }

  /** Stamp and deliver one event; `fields` are type-checked against `EventFields[name]`. */
  emit<N extends EventName>(event: N, fields: EventFields[N]): void {
    this.forward({ event, worker: this.worker, monoMs: Math.round(this.clock.monotonicMs()), ...fields } as FencepostEvent);
  }

  /** Pass on an event already stamped elsewhere in this process (the local workflow's handlers). */
  forward(e: FencepostEvent): void {
    for (const l of this.listeners) l(e);
  }
}

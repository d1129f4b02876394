/**
 * The election world (issue 19 item 4): the REAL election (lib/election/election.ts: the queue, the watch, the leadership
 * watchdog), the REAL handover (lib/election/handover.ts: the flip, the wait, the bump), the REAL restore bump
 * (lib/core/restore.ts), the REAL manifest (lib/core/manifest.ts: If-None-Match / If-Match, 412 and 409) and the REAL epoch
 * ledger (lib/election/epoch-fence.ts), on the in-memory stores (or the AWS ones: dynamo.ts) and one VirtualClock,
 * interleaved and faulted at every store call by the seeded scheduler (scheduler.ts), then checked from the stores'
 * final state and the trace.
 *
 * The world: three candidates campaign for the role `pacer`; a leader serves (an act that relies on `onLost`, the
 * watchdog's promise, or on the leadership's signal to stop), then appends to the role's ledger and commits the entry
 * to a manifest, once a period, for a few periods, resigns and campaigns again. Half the candidate processes stand by
 * hand (`campaign`, `resign`), half through `Election.run` (a quarter of those stopped by their signal midway). Beside them a single writer `w1` writes the role `journal`
 * through a handover, and `w2` asks for the handover midway. In half the schedules the lock table is restored from
 * a backup taken a seeded moment earlier (a quarter of them before the role and the writer lease were first used, so
 * the restored table lacks both), then bumped (bumpEpochs) before it is used. Crashed candidates and a
 * crashed restore are restarted as fresh processes after a seeded delay; a crashed writer is not.
 *
 * Its broken variants, each of which the checks must catch, are in mutations.ts (ELECTION_MUTATIONS), with every
 * other world's. The file reads top to bottom: settings, setup, actors, checks; world.ts runs it.
 */
import { VirtualClock, type Clock } from '../../lib/core/clock';
import { DEFAULT_BACKOFF, newRvn } from '../../lib/core/conditions';
import type { LeaseConfig } from '../../lib/core/config';
import { candidateKey, Election, Leadership, ledgerKey, roleKey, type ElectionDeps } from '../../lib/election/election';
import { EpochFence, type LedgerEntry, LedgerWriter, ledgerViolations } from '../../lib/election/epoch-fence';
import { handover, writerLedgerKey, type HandoverConfig, type Writer } from '../../lib/election/handover';
import { writerKey } from '../../lib/core/election-keys';
import { pollMsOf } from '../../lib/core/lease';
import { ManifestWriter, type ManifestBody } from '../../lib/core/manifest';
import { MemoryLedgerStore } from '../../lib/testing/ledger-store';
import { copyOf } from '../../lib/testing/dynamo-rules';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { bumpEpochs, DEFAULT_BUMP } from '../../lib/core/restore';
import type { LedgerStore } from '../../lib/core/store/ledger';
import type { JoinRequest, LockStore, WriteOutcome } from '../../lib/core/store/lock';
import type { ManifestStore } from '../../lib/core/store/manifest';
import { prng } from '../../lib/core/prng';
import { Actor, type Placed, type RunEnd, Scheduler } from '../../lib/testing/scheduler';
import { CallLog, LockHistory, type LockWrite, rateErrorCovered, type SentCall, stopTimeChecks } from '../../lib/testing/history';
import { epochChecks } from '../../lib/testing/checks';
import { applyElectionMutation, ELECTION_MUTATIONS, override, politeWait, type ElectionBroken, type ElectionMutation } from './mutations';
import { type Check, runWorld, type ScheduleResult, type World, type WorldState } from '../../lib/testing/world';

/** The candidates' lease, and the writers' (a handover waits its lease + the wait margin from the flip). */
const LEASE = { leaseMs: 4_000, renewMs: 1_000, marginMs: 1_000, claimBudget: 30 } satisfies LeaseConfig;
const WRITER = { leaseMs: 4_000, renewMs: 1_000, marginMs: 0, waitMarginMs: 1_000, claimBudget: 30 } satisfies HandoverConfig;

/** The world's settings: the leases, the actors' work, the restore, the faults. */
export const ELECTION_SETTINGS = {
  role: 'pacer',
  lease: LEASE,
  candidates: 3,
  /** Each candidate process leads this many terms (a failed campaign is not a term), then ends. */
  terms: 2,
  /** A candidate process gives up after this many campaigns (failed ones included). */
  maxCampaigns: 5,
  /** A term: this many acts, one a period. */
  acts: 3,
  actPeriodMs: 1_000,
  /** The share of candidate processes that stand through `Election.run` (the others campaign by hand). */
  runShare: 0.5,
  /** Of those, the share whose run is stopped (its signal aborted) at a seeded moment in the faults' window. */
  stoppedShare: 0.25,
  /** Candidates 2 and 3 start within this long after the first. */
  startWithinMs: 3_000,
  /** A crashed candidate (or restore) is replaced by a fresh process within this long. */
  restartWithinMs: 5_000,
  writerRole: 'journal',
  writer: WRITER,
  /** w1 writes this many entries, one a period; w2 this many after its handover. */
  w1Writes: 12,
  w2Writes: 3,
  writePeriodMs: 1_000,
  /** w2 asks for the handover at a seeded time in this window. */
  handoverWindowMs: [2_000, 8_000] as const,
  /** The chance that a schedule restores the lock table; the backup is taken in this window, the restore within `restoreWithinMs` after it. */
  restoreChance: 0.5,
  backupWindowMs: [1_000, 8_000] as const,
  restoreWithinMs: 8_000,
  /** Of the restoring schedules, the share whose backup predates the role's and the writer lease's first use (the epoch floor's case). */
  earlyBackupChance: 0.25,
  /** Each actor's wall clock is off by up to this much, and stepped once by up to this much (nothing may decide on it). */
  wallSkewMs: 3_600_000,
  /**
   * An answer up to 5 s late: longer than the margin (1 s), so a stop time counted from the answer overruns; it weighs
   * 4 at the leases' own calls (a join is a candidate's claim), and the call that starts a stop time is faulted at
   * four times the chance.
   */
  faults: {
    chance: 0.05,
    budget: 6,
    maxPauseMs: 15_000,
    lateMs: 5_000,
    windowMs: 25_000,
    // The SDK resends a request whose answer it lost: any write can land twice, and the code sees the second answer
    // (a conditional write's own first landing makes its resend fail its condition; an S3 conditional PUT's, 412).
    twice: ['join', 'removeCandidate', 'claim', 'renew', 'release', 'raise', 'append', 'create', 'putIfMatch'],
    emphasis: [
      { methods: ['join', 'claim', 'renew'], kind: 'late', weight: 4 },
      { methods: ['put', 'create', 'putIfMatch'], kind: 'pause', weight: 4 },
    ],
    chanceAt: [
      { methods: ['join', 'claim'], share: 4, first: true },
      { methods: ['put', 'create', 'putIfMatch'], share: 2 },
    ],
    // Each process's monotonic clock runs fast or slow by up to half of what the tighter margin covers: the
    // candidates', or the handover's (the new writer waits lease + wait margin from the flip, the old one stops at
    // its lease - margin: as a lease of lease + wait margin with a margin of wait margin + margin).
    monoRate:
      Math.min(
        rateErrorCovered(LEASE),
        rateErrorCovered({ leaseMs: WRITER.leaseMs + WRITER.waitMarginMs, marginMs: WRITER.waitMarginMs + WRITER.marginMs }),
      ) / 2,
  },
  /** Items per scan page: small, so the restore's bump pages through its scan (and dies between pages). */
  pageSize: 2,
  /** The store's transaction window (MemoryLockStore conflictWindowMs) and the bucket's commit window (409s). */
  conflictWindowMs: 20,
  commitWindowMs: 20,
} as const;

type Settings = typeof ELECTION_SETTINGS;

/** The stores' transactions: where a conflict can be injected. */
const TRANSACTIONS = new Set(['join', 'removeCandidate', 'append']);

/** The longest a retry helper backs off in all: DEFAULT_BACKOFF's cap on every retry. */
const BACKOFF_TOTAL_MS = DEFAULT_BACKOFF.capMs * DEFAULT_BACKOFF.retries;

/**
 * How long after the faults ended (the restore included) the role may be without a leader while someone campaigns:
 * each dead or restored candidate still in the queue is found silent by its successor a lease (and a poll) after it
 * is first seen, one at a time (docs/ELECTION.md "What a departure costs"); at most one per crash and one per item
 * the backup held (a candidate per process, each crash adding one); plus a poll and the longest backoff.
 */
function electBoundMs(s: Settings = ELECTION_SETTINGS): number {
  const deadAhead = s.faults.budget + s.candidates;
  return ((deadAhead + 1) * (s.lease.leaseMs + pollMsOf(s.lease)) + BACKOFF_TOTAL_MS) / (1 - s.faults.monoRate);
}

/**
 * How long after it was asked (or after the faults ended) a handover must be answered: the old writer's lease and
 * the wait margin from the flip, and the longest backoff of the flip and of the bump.
 */
function handoverBoundMs(s: Settings = ELECTION_SETTINGS): number {
  return (s.writer.leaseMs + s.writer.waitMarginMs + 2 * BACKOFF_TOTAL_MS) / (1 - s.faults.monoRate);
}

/** Every process's work once the faults stopped: each candidate's terms, one after another, and the writers'. */
function workBoundMs(s: Settings = ELECTION_SETTINGS): number {
  const term = ((s.acts + 1) * s.actPeriodMs) / (1 - s.faults.monoRate) + electBoundMs(s);
  return s.candidates * s.maxCampaigns * term + handoverBoundMs(s) + ((s.w1Writes + s.w2Writes) * s.writePeriodMs) / (1 - s.faults.monoRate);
}

/** A wait that lands after every timer due at the same instant of a process's clock, whatever each one's rounding. */
const AFTER_DUE_TIMERS_MS = 0.001;

/** Streams of a schedule's seed kept apart from the scheduler's, so adding one leaves the others' draws as they were. */
const STREAMS = { store: 0x0e1e_0000, wall: 0x0e1e_1000, restore: 0x0e1e_2000, rate: 0x0e1e_3000, mode: 0x0e1e_4000 } as const;

const MANIFEST = { key: 'pacer/manifest.json', chunkPrefix: 'pacer/acts/' } as const;

/** The two ledgers: the leaders' (the role's) and the writers'. */
const LEDGERS = [ledgerKey(ELECTION_SETTINGS.role), writerLedgerKey(ELECTION_SETTINGS.writerRole)] as const;

/** One accepted append, as the ledger store applied it (a replay under the same token is not a second one). */
interface Accepted {
  readonly ledger: string;
  readonly actor: string;
  readonly epoch: number;
  readonly version: number;
  readonly fenceBefore: number;
  /** Its place in the order of accepted appends and handover answers. */
  readonly order: number;
}

/** A manifest write as the bucket applied it. */
interface ManifestWrite {
  readonly actor: string;
  readonly body: ManifestBody;
}

/** Timeline of the role's leadership: who campaigns, who leads. */
interface Mark {
  readonly at: number;
  readonly pending: number;
  readonly leaders: number;
}

/**
 * The in-memory lock store keeps its items in a private map: the harness (a restore, a broken variant) reaches behind
 * it. Only a world whose lock table is in memory takes the broken variants that do.
 */
const itemsOf = (store: LockStore) => (store as unknown as { items: Map<string, Record<string, unknown>> }).items;
const inFlightOf = (store: LockStore) => (store as unknown as { inFlight: Set<unknown> }).inFlight;
/** A backup of the table's items: each item copied. */
const copyItems = (items: Map<string, Record<string, unknown>>) => new Map(Array.from(items, ([k, v]) => [k, copyOf(v)]));

/** A backup of the lock table: its items by key. */
type LockBackup = ReadonlyMap<string, Record<string, unknown>>;

/**
 * How the lock table is backed up and restored, as an operator does it: a backup of the table in use, a new table
 * made from it, bumped, then put in use. In memory each step happens at once (a value); on DynamoDB each is a request
 * (a promise the clock tracks).
 */
export interface LockRestore {
  /** A copy of the items of `table` (the one in use), or undefined while one of `needs` is missing. */
  backup(table: LockStore, needs: readonly string[]): LockBackup | undefined | Promise<LockBackup | undefined>;
  /** A new table holding the backup's items. */
  restored(backup: LockBackup): LockStore | Promise<LockStore>;
  /** No transaction is in flight on `table`: one in flight would land on a table no longer used. */
  settled(table: LockStore): boolean;
  /** The table the restored one is put in use as. */
  inUse(restored: LockStore): LockStore;
}

/** `then` of a value or a promise: a value goes on at once (the memory stores' schedules take no extra turn). */
function andThen<T>(value: T | Promise<T>, next: (value: T) => void): void {
  if (value instanceof Promise) void value.then(next);
  else next(value);
}

// ─── Setup: one schedule's state ─────────────────────────────────────────────────────────────────────────────────

/** One schedule of the election world: its clock, streams, scheduler and stores, and what the actors record for the checks. */
interface ElectionState extends WorldState {
  readonly random: () => number;
  readonly storeRandom: () => number;
  readonly wallRandom: () => number;
  /** Draws each process's monotonic rate error as it starts. */
  readonly rates: () => number;
  /** Draws how each candidate process stands (campaign or run) and whether it is stopped. */
  readonly modeRandom: () => number;
  readonly clock: VirtualClock;
  /** How a crashed process is restarted (candidates and the restore, by fresh ones), set as each starts. */
  readonly restarts: Map<Actor, () => number | undefined>;
  /** The lock table, switchable: a restore replaces it with the restored (and bumped) one. */
  readonly table: { current: LockStore };
  /** How the lock table is backed up and restored; absent: the schedule runs no restore. */
  readonly lockRestore: LockRestore | undefined;
  /** The table in use when each call is applied (not when it was made). */
  readonly lockTable: LockStore;
  readonly ledgers: LedgerStore;
  readonly bucket: ManifestStore;
  readonly broken: ElectionBroken;
  /** Whether this schedule restores the lock table, and when: drawn from the restore's own stream. */
  readonly restore: {
    readonly restoring: boolean;
    readonly early: boolean;
    readonly backupAt: number;
    readonly restoreAfter: number;
    readonly runId: string;
  };
  // What the checks read: epochs handed out, appends accepted, the writers' bumps, manifest writes, the leadership timeline.
  readonly grants: { actor: string; key: string; epoch: number }[];
  /** Each process's lock and ledger calls as it sent them, and when their answers came (history.ts). */
  readonly calls: CallLog;
  /**
   * Every lock write the lock table applied for an actor (a claim, a renewal, a release that took effect), and when
   * (history.ts): recorded as the scheduler applies each call.
   */
  readonly lockWrites: LockHistory;
  readonly accepted: Accepted[];
  readonly bumps: { writer: string; epoch: number; order: number }[];
  readonly manifestWrites: ManifestWrite[];
  readonly marks: Mark[];
  /** w2's handover: when it was asked, by which process, and when it was answered. */
  readonly handover: { at?: number; requestedAt?: number; actor?: Actor };
  /** Every process started (candidates, writers, restores), to know when all have ended. */
  readonly processes: Actor[];
  /** When w2 asks for the handover (drawn as the actors start). */
  handoverAt: number;
  /** When the restored table came into use. */
  restoredAt: number | undefined;
  /** What a test placed (undefined: every fault and event is drawn). */
  readonly placed: ElectionPlaced | undefined;
}

/** Faults placed by a test, and the world's own events: the restore (absent: none) and when w2 asks for the handover. */
export interface ElectionPlaced extends Placed {
  /**
   * The lock table is backed up at `backupAtMs` and restored `afterMs` later. `early`: the backup is of the table before
   * the role and the writer lease were first used (docs/TESTING.md); otherwise it waits until both items exist.
   */
  readonly restore?: { readonly backupAtMs: number; readonly afterMs: number; readonly early?: boolean };
  /** When w2 asks for the handover; absent: the middle of the handover window. */
  readonly handoverAtMs?: number;
  /**
   * The candidates (`c1`, …) that stand through `Election.run`, each stopped (its signal aborted) at `stopAtMs` if
   * given; absent: every candidate campaigns by hand.
   */
  readonly run?: Readonly<Record<string, { readonly stopAtMs?: number }>>;
}

/**
 * The stores one schedule runs on: the in-memory ones (with the transaction and commit windows that make a 409 or a
 * conflict, and a small scan page), or lib/core/aws's on DynamoDB Local and the S3 manifest store on the local S3
 * endpoint (dynamo.ts), the same schedules over every shipped condition expression.
 */
interface ElectionStores {
  readonly locks: LockStore;
  /** How the lock table is backed up and restored; absent: no restore runs (a schedule that draws one runs without it). */
  readonly restore?: LockRestore;
  readonly ledgers: LedgerStore;
  readonly bucket: ManifestStore;
}

/** Builds one schedule's stores on its clock, given the stores' own stream (a memory store's conflicts draw from it). */
export type ElectionStoresOf = (clock: VirtualClock, storeRandom: () => number) => ElectionStores;

/** The memory stores, with the transaction and commit windows of the settings. */
const memoryStores: ElectionStoresOf = (clock, storeRandom) => {
  const s = ELECTION_SETTINGS;
  const newLockTable = () => new MemoryLockStore({ clock, conflictWindowMs: s.conflictWindowMs, random: storeRandom, scanPageSize: s.pageSize });
  /** A new table holding `items`, as they are. */
  const holding = (items: Iterable<[string, Record<string, unknown>]>) => {
    const table = newLockTable();
    for (const [k, v] of items) itemsOf(table).set(k, v);
    return table;
  };
  return {
    locks: newLockTable(),
    restore: {
      backup: (table, needs) => {
        const items = itemsOf(table);
        return needs.every((k) => items.has(k)) ? copyItems(items) : undefined;
      },
      restored: (backup) => holding(copyItems(new Map(backup))),
      settled: (table) => inFlightOf(table).size === 0,
      inUse: (restored) => holding(itemsOf(restored)),
    },
    ledgers: new MemoryLedgerStore(clock),
    bucket: new MemoryManifestStore({ clock, commitWindowMs: s.commitWindowMs }),
  };
};

function setup(storesOf: ElectionStoresOf, seed: number, mutation: string | undefined, placed?: ElectionPlaced): ElectionState {
  if (mutation !== undefined && !(ELECTION_MUTATIONS as readonly string[]).includes(mutation))
    throw new Error(`unknown election mutation ${mutation}; known: ${ELECTION_MUTATIONS.join(', ')}`);
  const s = ELECTION_SETTINGS;
  const random = prng(seed);
  const storeRandom = prng(seed + STREAMS.store);
  const wallRandom = prng(seed + STREAMS.wall);
  const clock = new VirtualClock();
  const restarts = new Map<Actor, () => number | undefined>();
  const scheduler = new Scheduler(clock, random, s.faults, (actor) => restarts.get(actor)?.(), TRANSACTIONS, placed);

  const stores = storesOf(clock, storeRandom);
  const table = { current: stores.locks };
  // Each call reaches the table in use when it is applied (not when it was made): a call parked across the restore
  // lands on the restored table, as on a table restored in place. Each method's forwarder is made once.
  const forwarders = new Map<string | symbol, (...args: unknown[]) => unknown>();
  const lockTable = new Proxy({} as LockStore, {
    get: (_t, prop) => {
      let forward = forwarders.get(prop);
      if (forward === undefined) {
        forward = (...args) => (Reflect.get(table.current, prop) as (...a: unknown[]) => unknown).apply(table.current, args);
        forwarders.set(prop, forward);
      }
      return forward;
    },
  });

  const planned = placed ? placedRestore(placed) : drawnRestore(prng(seed + STREAMS.restore));
  // No restore on stores that cannot be restored behind their backs (the draws are made all the same: none moves).
  const restore = stores.restore ? planned : { ...planned, restoring: false };

  return {
    random,
    storeRandom,
    wallRandom,
    rates: prng(seed + STREAMS.rate),
    modeRandom: prng(seed + STREAMS.mode),
    clock,
    scheduler,
    restarts,
    table,
    lockRestore: stores.restore,
    lockTable,
    lockWrites: new LockHistory(clock),
    ledgers: stores.ledgers,
    bucket: stores.bucket,
    // The broken variant, if any: its patches of the core's classes are undone after the schedule.
    broken: applyElectionMutation(mutation as ElectionMutation | undefined),
    restore: { ...restore, runId: `restore-${seed}` },
    violations: [],
    grants: [],
    calls: new CallLog(clock),
    accepted: [],
    bumps: [],
    manifestWrites: [],
    marks: [],
    handover: {},
    processes: [],
    handoverAt: Infinity,
    restoredAt: undefined,
    placed,
  };
}

type RestorePlan = Omit<ElectionState['restore'], 'runId'>;

/** The restore drawn from its own stream. */
function drawnRestore(restoreRandom: () => number): RestorePlan {
  const s = ELECTION_SETTINGS;
  const restoring = restoreRandom() < s.restoreChance;
  const backupAt = s.backupWindowMs[0] + Math.floor(restoreRandom() * (s.backupWindowMs[1] - s.backupWindowMs[0]));
  const restoreAfter = Math.floor(restoreRandom() * s.restoreWithinMs);
  // Drawn after the others, so a schedule with a later backup restores at the same times as before this draw existed.
  const early = restoreRandom() < s.earlyBackupChance;
  return { restoring, early, backupAt, restoreAfter };
}

/** The restore a test placed, or none. */
function placedRestore({ restore }: ElectionPlaced): RestorePlan {
  if (restore === undefined) return { restoring: false, early: false, backupAt: 0, restoreAfter: 0 };
  return { restoring: true, early: restore.early ?? false, backupAt: restore.backupAtMs, restoreAfter: restore.afterMs };
}

// ─── Actors: three candidates, two writers, and the restore ──────────────────────────────────────────────────────

function actors(w: ElectionState): void {
  const s = ELECTION_SETTINGS;
  const { clock, scheduler, random, wallRandom, table, lockTable, ledgers, bucket, broken, violations, restarts } = w;
  const { grants, accepted, bumps, manifestWrites } = w;

  // The leadership timeline: how many campaign, how many lead, at each change. `order` places appends and bumps.
  let order = 0;
  let pending = 0;
  let leaders = 0;
  const mark = (dPending: number, dLeaders: number) => {
    pending += dPending;
    leaders += dLeaders;
    w.marks.push({ at: clock.monotonicMs(), pending, leaders });
  };

  /** The lock store one actor sees: every call a step boundary of it, with the broken variant (if any) under it. */
  const locksFor = (actor: Actor): LockStore => {
    const store = broken.locks(lockTable, () => itemsOf(table.current));
    const stepped = scheduler.wrap(store, actor, (method, args, result) => {
      w.lockWrites.record(method, args, result);
      if (method === 'join' && (result as { ok: boolean }).ok) {
        const r = args[0] as JoinRequest;
        grants.push({ actor: actor.name, key: r.roleKey, epoch: r.seq });
      }
      if (method === 'claim' && (result as WriteOutcome).ok)
        grants.push({ actor: actor.name, key: String(args[0]), epoch: Number((result as { item: { epoch: number } }).item.epoch) });
    });
    return w.calls.observe(actor, stepped);
  };

  // Every append the ledger store accepted, with the fence as it stood just before (the first send only).
  const observedLedgers = (actor: Actor): LedgerStore => {
    // The broken variant (if any) under the observer: what it writes is what the store applied.
    const store = broken.ledgers(ledgers, <T extends object>(inner: T) => scheduler.wrap(inner, actor));
    return override(ledgers, {
      append: async (key, entry, token) => {
        const before = await ledgers.head(key);
        const out = await store.append(key, entry, token);
        if (out.ok && before.version === entry.version - 1) {
          accepted.push({ ledger: key, actor: actor.name, epoch: entry.epoch, version: entry.version, fenceBefore: before.epoch, order: order++ });
          scheduler.log(`${actor.name} append accepted ${key} v${entry.version} epoch ${entry.epoch} (fence ${before.epoch})`);
        }
        return out;
      },
    });
  };

  // Every write of the manifest object the bucket applied.
  const observedBucket = (actor: Actor): ManifestStore => {
    const record = (key: string, body: string, ok: boolean) => {
      if (!ok || key !== MANIFEST.key) return;
      const parsed = JSON.parse(body) as ManifestBody;
      manifestWrites.push({ actor: actor.name, body: parsed });
      scheduler.log(`${actor.name} manifest written token ${parsed.token}, ${Object.keys(parsed.chunks).length} acts`);
    };
    const observed = override(bucket, {
      create: async (key, body, type) => {
        const out = await bucket.create(key, body, type);
        record(key, body, out.ok);
        return out;
      },
      putIfMatch: async (key, body, type, etag) => {
        const out = await bucket.putIfMatch(key, body, type, etag);
        record(key, body, out.ok);
        return out;
      },
      put: async (key, body, type) => {
        const out = await bucket.put(key, body, type);
        record(key, body, true);
        return out;
      },
    });
    return broken.bucket(observed);
  };

  /** The actor's clocks: the scheduler's (timers stand still while it is paused), and a wall clock off and stepped. */
  const clockOf = (actor: Actor): Clock => {
    const skew = Math.round((wallRandom() * 2 - 1) * s.wallSkewMs);
    const stepAt = Math.floor(wallRandom() * s.faults.windowMs);
    const step = Math.round((wallRandom() * 2 - 1) * s.wallSkewMs);
    return {
      monotonicMs: () => actor.monotonicMs(),
      wallMs: () => actor.wallMs() + skew + (clock.monotonicMs() >= stepAt ? step : 0),
      after: (ms, fn) => actor.after(ms, fn),
      sleep: (ms) => actor.sleep(ms),
    };
  };

  const newActor = (name: string): Actor => {
    const actor = scheduler.actor(name, w.rates);
    w.processes.push(actor);
    scheduler.log(`${name} starts`);
    return actor;
  };

  const depsOf = (actor: Actor, actorClock: Clock): ElectionDeps => ({
    locks: locksFor(actor),
    clock: actorClock,
    random,
  });

  // The broken variant sidecar-heartbeat: a crashed candidate's item is renewed on, by a sidecar that outlived it,
  // as long as it is still the candidate's (the heartbeat must come from the process doing the work, or a dead worker keeps its lease).
  const sidecar = (name: string): void => {
    const seq = grants.findLast((g) => g.actor === name && g.key === roleKey(s.role))?.epoch;
    if (seq === undefined) return;
    const beat = () =>
      void lockTable.renew(candidateKey(s.role, seq), { holder: name, epoch: seq }, newRvn(), '').then(
        (out) => out.ok && clock.after(s.lease.renewMs, beat),
        () => clock.after(s.lease.renewMs, beat),
      );
    clock.after(s.lease.renewMs, beat);
  };

  // A candidate process: campaign, lead for a term (serve, append, commit, once a period), resign; again, for its terms.
  const incarnations = new Map<number, number>();
  const startCandidate = (n: number, terms: number): void => {
    const incarnation = (incarnations.get(n) ?? 0) + 1;
    incarnations.set(n, incarnation);
    const actor = newActor(`c${n}${incarnation === 1 ? '' : `.${incarnation}`}`);
    const name = actor.name;
    const actorClock = clockOf(actor);
    const deps = depsOf(actor, actorClock);
    let termsLeft = terms;
    let leading = false;
    let campaigning = false;
    restarts.set(actor, () => {
      if (broken.sidecar) sidecar(actor.name);
      if (campaigning) mark(-1, 0);
      if (leading) mark(0, -1);
      campaigning = leading = false;
      if (termsLeft === 0) return undefined;
      const delay = Math.floor(random() * s.restartWithinMs);
      clock.after(delay, () => startCandidate(n, termsLeft));
      return delay;
    });
    // One term's work once leading, the same in both ways of standing: serve, append, commit, once a period, until
    // `lost()` (the watchdog's word) says stop.
    const serve = async (leadership: Leadership, lost: () => boolean, viaRun: boolean): Promise<void> => {
      const epoch = leadership.epoch;
      scheduler.log(`${actor.name} leads with epoch ${epoch}`);
      try {
        const fence = new EpochFence(
          { ledger: w.calls.observe(actor, scheduler.wrap(observedLedgers(actor), actor)), clock: actorClock, random },
          ledgerKey(s.role),
        );
        // `run`'s leaders take the ledger writer from the leadership, as the docs show; the others build it by hand.
        const ledger = viaRun ? await leadership.ledger(fence) : new LedgerWriter(fence, leadership, epoch, name, (await fence.head()).version);
        const bucketOf = { manifests: scheduler.wrap(observedBucket(actor), actor), clock: actorClock, random };
        const { writer: manifest } = await leadership.act(() => ManifestWriter.raiseAt(bucketOf, MANIFEST, s.role, epoch));
        for (let act = 0; act < s.acts && !lost(); act++) {
          await actorClock.sleep(s.actPeriodMs);
          // Serve as leader: an act with no store call, which stops only when told (onLost, or the leadership's
          // signal). It runs after every timer due at this instant, the watchdog's included: a microsecond later on
          // its own clock, since two timers due at one instant of a clock with a rate error are converted to true
          // time each with its own rounding, and an `after(0)` could land a hair before the watchdog (seeds 8941 and
          // 9356 of the serial memory stores served at their exact stop time).
          await new Promise<void>((resolve) => actorClock.after(AFTER_DUE_TIMERS_MS, resolve));
          if (lost()) break;
          // Recorded as the leader's act; the check computes its stop time from outside (ledgerWritesInTime).
          // Its epoch as the lock table applied it: the sequence of this process's last join the table took, not the
          // leadership's word (the same in 4,000 schedules from seeds 1001, 9001 and 20001).
          const joined = grants.findLast((g) => g.actor === name && g.key === roleKey(s.role))?.epoch ?? 0;
          w.calls.act(actor, 'serve', [ledgerKey(s.role), joined]);
          // One act, checked once before it starts (Leadership.act): the append (checked again by the ledger
          // writer, and fenced), the act's object, and its commit to the manifest (fenced by If-Match).
          await leadership.act(async () => {
            // manifest-off-by-one: the act committed under the head as read before the append.
            const before = broken.manifestOffByOne ? (await fence.head()).version : undefined;
            const entry = await ledger.append({ act });
            const version = before ?? entry.version;
            const { key, etag } = await manifest.putChunkObject(version, `${name} act ${act}\n`);
            await manifest.commitChunk(version, { key, records: 1, etag });
          });
        }
        scheduler.log(`${actor.name} ends its term`);
      } catch (err) {
        scheduler.log(`${actor.name} stops leading: ${(err as Error).name}`);
      }
      if (leading) mark(0, -1);
      leading = false;
    };
    const startLeading = () => {
      campaigning = false;
      leading = true;
      mark(-1, 1);
      termsLeft--;
    };
    const toldLost = (err: Error) => {
      scheduler.log(`${actor.name} told it lost the lead: ${err.name}`);
      if (leading) mark(0, -1);
      leading = false;
    };
    // The manual steps: campaign (told of a loss by onLost), serve, resign.
    const byCampaign = async (election: Election): Promise<void> => {
      let lost = false;
      let leadership: Leadership;
      try {
        leadership = await election.campaign(name, { onLost: (err) => ((lost = true), toldLost(err)) });
      } catch (err) {
        campaigning = false;
        mark(-1, 0);
        scheduler.log(`${actor.name} campaign failed: ${(err as Error).name}`);
        return;
      }
      startLeading();
      await serve(leadership, () => lost, false);
      const resigned = await leadership.resign().catch(() => false);
      scheduler.log(`${actor.name} resigns: ${resigned ? 'left the queue' : 'no longer its item'}`);
    };
    // One term through Election.run: told of a loss by the leadership's signal; run resigns when the work returns
    // and when the process's own stop (`stop`) aborts, and reports why the term ended.
    const byRun = async (election: Election, stop: AbortSignal): Promise<void> => {
      try {
        const end = await election.run(name, {
          signal: stop,
          onNewLeader: (view) => scheduler.log(`${actor.name} sees ${view.self ? 'itself' : (view.leader ?? 'nobody')} lead`),
          onStartedLeading: async (leadership) => {
            startLeading();
            leadership.signal.addEventListener('abort', () => leading && toldLost(leadership.signal.reason as Error), { once: true });
            await serve(leadership, () => leadership.signal.aborted, true);
          },
        });
        scheduler.log(`${actor.name} term ends ${end.why}${end.error ? ` (${end.error.name})` : ''}`);
      } catch (err) {
        scheduler.log(`${actor.name} campaign failed: ${(err as Error).name}`);
      }
      if (campaigning) mark(-1, 0);
      campaigning = false;
    };
    // Half the processes stand through `run`, and a quarter of those are stopped (their signal aborted: a shutdown)
    // at a seeded moment; drawn from a stream of their own, so the other draws stay as they were. A placed schedule
    // says which candidates stand through run (ElectionPlaced.run); the others campaign by hand.
    const placedRun = w.placed?.run?.[`c${n}`];
    const viaRun = w.placed === undefined ? w.modeRandom() < s.runShare : placedRun !== undefined;
    const stopAt =
      w.placed === undefined
        ? viaRun && w.modeRandom() < s.stoppedShare
          ? Math.floor(w.modeRandom() * s.faults.windowMs)
          : undefined
        : placedRun?.stopAtMs;
    const stopping = new AbortController();
    if (stopAt !== undefined)
      actor.after(stopAt, () => {
        scheduler.log(`${actor.name} is stopped (its run's signal aborts)`);
        stopping.abort();
      });
    const run = async () => {
      const election = new Election(deps, s.role, s.lease);
      scheduler.log(`${actor.name} stands ${viaRun ? `through run${stopAt === undefined ? '' : `, stopped at ${stopAt} ms`}` : 'by campaign'}`);
      for (let campaign = 0; termsLeft > 0 && campaign < s.maxCampaigns && !stopping.signal.aborted; campaign++) {
        campaigning = true;
        mark(1, 0);
        await (viaRun ? byRun(election, stopping.signal) : byCampaign(election));
      }
      actor.outcome = termsLeft === 0 ? 'done' : stopping.signal.aborted ? 'stopped' : 'gave-up';
      scheduler.log(`${actor.name} ends ${actor.outcome}`);
    };
    run().catch((err: Error) => {
      actor.outcome = `error ${err.name}`;
      scheduler.log(`${actor.name} ends with ${err.name}: ${err.message}`);
    });
  };

  // The single writer of `journal`: w1 takes it at 0; w2 asks for the handover at a seeded time.
  const answered = w.handover;
  const startWriter = (name: 'w1' | 'w2', writes: number): void => {
    const actor = newActor(name);
    const actorClock = clockOf(actor);
    const deps = depsOf(actor, actorClock);
    const fence = new EpochFence(
      { ledger: w.calls.observe(actor, scheduler.wrap(observedLedgers(actor), actor)), clock: actorClock, random },
      writerLedgerKey(s.writerRole),
    );
    if (name === 'w2') Object.assign(answered, { requestedAt: clock.monotonicMs(), actor });
    let writer: Writer | undefined;
    const run = async () => {
      try {
        if (name === 'w2' && broken.politeHandover) await politeWait(deps.locks, actorClock, writerKey(s.writerRole), s.writer);
        writer = await handover(deps, s.writerRole, name, broken.handover(s.writer), fence);
      } catch (err) {
        if (name === 'w2') answered.at = clock.monotonicMs();
        throw err;
      }
      if (name === 'w2') answered.at = clock.monotonicMs();
      // The epoch its flip took, as the lock table applied it (not as the handover says): the last writer-lease claim
      // of this process the table granted.
      const epoch = grants.findLast((g) => g.actor === name && g.key === writerKey(s.writerRole))?.epoch ?? 0;
      bumps.push({ writer: name, epoch, order: order++ });
      // The handover's promise when it answers: the store it writes already refuses every lower epoch.
      const fenced = (await ledgers.head(writerLedgerKey(s.writerRole))).epoch;
      if (fenced < epoch) violations.push(`${name}'s handover answered at epoch ${epoch} with the fence still at ${fenced}`);
      scheduler.log(`${name} is the writer with epoch ${writer.epoch}`);
      try {
        for (let i = 0; i < writes; i++) {
          await actorClock.sleep(s.writePeriodMs);
          await writer.ledger.append({ write: i });
        }
      } catch (err) {
        scheduler.log(`${name} stops writing: ${(err as Error).name}`);
      }
      return writer.release();
    };
    run().then(
      (released) => {
        actor.outcome = 'done';
        scheduler.log(`${name} ends ${released ? 'released' : 'not the writer any more'}`);
      },
      (err: Error) => {
        actor.outcome = `error ${err.name}`;
        scheduler.log(`${name} ends with ${err.name}: ${err.message}`);
      },
    );
  };

  // The restore: a backup of the lock table at a seeded time, restored later into a new table, bumped (bumpEpochs,
  // one run id, resumed by a fresh process after a crash and re-run after a failure), and only then used.
  const { restoring, early, backupAt, restoreAfter, runId } = w.restore;
  const restore = w.lockRestore!; // set whenever a schedule restores (setup)
  const startRestore = (backup: LockBackup, incarnation: number): void => {
    const actor = newActor(`restore${incarnation === 1 ? '' : `-${incarnation}`}`);
    andThen(restore.restored(backup), (restored) => restoreInto(restored, backup, incarnation, actor));
  };
  const restoreInto = (restored: LockStore, backup: LockBackup, incarnation: number, actor: Actor): void => {
    const actorClock = clockOf(actor);
    const store = scheduler.wrap(broken.restored(restored), actor);
    restarts.set(actor, () => {
      const delay = Math.floor(random() * s.restartWithinMs);
      clock.after(delay, () => startRestore(backup, incarnation + 1));
      return delay;
    });
    const run = async () => {
      if (broken.bumps) {
        for (;;) {
          try {
            const report = await bumpEpochs({ locks: store }, { by: DEFAULT_BUMP, runId, dryRun: false });
            scheduler.log(`${actor.name} bumped ${report.changed.length} items, ${report.alreadyBumped.length} already bumped`);
            break;
          } catch (err) {
            scheduler.log(`${actor.name} bump failed: ${(err as Error).name}; run again`);
            await actorClock.sleep(1_000);
          }
        }
      }
      // Switch only once no transaction is in flight on the old table (one in flight would land on a table no longer used).
      while (!restore.settled(table.current)) await actorClock.sleep(1);
      table.current = restore.inUse(restored);
      w.restoredAt = clock.monotonicMs();
      scheduler.log(`${actor.name}: the restored table is in use`);
    };
    run().then(
      () => void (actor.outcome = 'done'),
      (err: Error) => void (actor.outcome = `error ${err.name}`),
    );
  };
  if (restoring && early) {
    scheduler.log('backup of the lock table taken before its first use (0 items)');
    andThen(restore.backup(table.current, []), (backup) => clock.after(backupAt + restoreAfter, () => startRestore(backup!, 1)));
  } else if (restoring) {
    // The backup is taken once the role and the writer's lock items exist, so the bump raises them; the early backup
    // above lacks both, and only the epoch floor keeps their epochs from repeating (docs/TESTING.md).
    const takeBackup = () =>
      andThen(restore.backup(table.current, [roleKey(s.role), writerKey(s.writerRole)]), (backup) => {
        if (backup === undefined) return void clock.after(500, takeBackup);
        scheduler.log(`backup of the lock table taken (${backup.size} items)`);
        clock.after(restoreAfter, () => startRestore(backup, 1));
      });
    clock.after(backupAt, takeBackup);
  }

  startCandidate(1, s.terms);
  for (let n = 2; n <= s.candidates; n++) {
    const at = Math.floor(random() * s.startWithinMs);
    clock.after(at, () => startCandidate(n, s.terms));
  }
  startWriter('w1', s.w1Writes);
  const [from, to] = s.handoverWindowMs;
  w.handoverAt = w.placed ? (w.placed.handoverAtMs ?? (from + to) / 2) : from + Math.floor(random() * (to - from));
  clock.after(w.handoverAt, () => startWriter('w2', s.w2Writes));
}

// ─── Checks: safety, from the trace and the stores' final state, then liveness ───────────────────────────────────

/** When the last fault's effect ended, the restore included. */
const faultsEndMs = (w: ElectionState): number => Math.max(0, w.scheduler.faultsEndMs, w.restoredAt ?? 0);

/** No append accepted below the fence; after a writer's bump, none of a lower epoch. */
function appendsFenced(w: ElectionState): string[] {
  const out: string[] = [];
  for (const a of w.accepted) {
    if (a.epoch < a.fenceBefore)
      out.push(`${a.actor}'s append v${a.version} at epoch ${a.epoch} accepted below the fence ${a.fenceBefore} (${a.ledger})`);
    for (const b of w.bumps)
      if (a.ledger === writerLedgerKey(ELECTION_SETTINGS.writerRole) && a.order > b.order && a.epoch < b.epoch)
        out.push(`${a.actor}'s append v${a.version} at epoch ${a.epoch} accepted after ${b.writer}'s handover at epoch ${b.epoch}`);
  }
  return out;
}

/** The ledgers: versions 1..n with no gap and none twice, epochs never down, nothing above the fence. */
async function ledgersWhole(w: ElectionState): Promise<string[]> {
  const out: string[] = [];
  for (const key of LEDGERS) {
    const head = await w.ledgers.head(key);
    for (const p of ledgerViolations(await w.ledgers.entries(key), head)) out.push(`${key}: ${p}`);
  }
  return out;
}

/** The manifest only moves forward: its token never goes down, and no write drops an act an earlier one named. */
function manifestForward(w: ElectionState): string[] {
  const out: string[] = [];
  for (let i = 1; i < w.manifestWrites.length; i++) {
    const [prev, next] = [w.manifestWrites[i - 1], w.manifestWrites[i]];
    if (next.body.token < prev.body.token)
      out.push(`${next.actor} wrote the manifest at token ${next.body.token} over token ${prev.body.token}: it went back`);
    const dropped = Object.keys(prev.body.chunks).filter((c) => !(c in next.body.chunks));
    if (dropped.length > 0) out.push(`${next.actor}'s manifest write dropped act(s) ${dropped.join(', ')} (token ${next.body.token})`);
  }
  return out;
}

/** Every act the manifest names was appended to the ledger with the same epoch. */
async function manifestInLedger(w: ElectionState): Promise<string[]> {
  const last = w.manifestWrites.at(-1)?.body;
  const entries = new Map((await w.ledgers.entries(ledgerKey(ELECTION_SETTINGS.role))).map((e) => [String(e.version).padStart(2, '0'), e.epoch]));
  return Object.entries(last?.chunks ?? {})
    .filter(([name, chunk]) => entries.get(name) !== chunk.token)
    .map(([name, chunk]) => `the manifest names act ${name} at token ${chunk.token}, the ledger has epoch ${entries.get(name)}`);
}

/**
 * Liveness: once the faults stopped, while some candidate stands (in a campaign or a term: the world's own record of
 * the calls it made), a leader serves at least once a bound: the leaders' services as they were sent (CallLog), not
 * the election's word that a process leads. The bound: the role without a leader (electBoundMs), then a new leader's
 * first act period.
 */
function alwaysLed(w: ElectionState): string[] {
  const out: string[] = [];
  const s = ELECTION_SETTINGS;
  const bound = electBoundMs() + s.actPeriodMs / (1 - s.faults.monoRate);
  const faultsEnd = faultsEndMs(w);
  const served = w.calls.calls
    .filter((c) => c.method === 'serve')
    .map((c) => c.trueSentAt)
    .sort((a, b) => a - b);
  const gaps = (from: number, to: number) => {
    let last = Math.max(from, faultsEnd);
    for (const at of [...served.filter((t) => t > last && t < to), to]) {
      if (at - last > bound)
        out.push(
          `nobody served as leader from ${last} ms to ${at} ms while a candidate stood (bound ${bound} ms after the faults ended at ${faultsEnd} ms)`,
        );
      last = at;
    }
  };
  let since: number | undefined;
  for (const m of w.marks) {
    const standing = m.pending + m.leaders > 0;
    if (standing && since === undefined) since = m.at;
    if (!standing && since !== undefined) {
      gaps(since, m.at);
      since = undefined;
    }
  }
  if (since !== undefined) gaps(since, w.clock.monotonicMs());
  return out;
}

/** Liveness: a requested handover completes or is answered within its bound. */
function handoverAnswered(w: ElectionState): string[] {
  const answered = w.handover;
  if (answered.actor === undefined || answered.actor.crashed) return [];
  const deadline = Math.max(answered.requestedAt!, faultsEndMs(w)) + handoverBoundMs();
  if (answered.at === undefined) return [`w2's handover asked at ${answered.requestedAt} ms was never answered`];
  if (answered.at > deadline) return [`w2's handover was answered at ${answered.at} ms, after the bound ${deadline} ms`];
  return [];
}

/** Liveness: a schedule that did not end by itself names every process still running. */
function allEnded(w: ElectionState, ended: RunEnd): string[] {
  if (ended === 'done') return [];
  const end = w.clock.monotonicMs();
  return w.processes
    .filter((a) => !a.crashed && a.outcome === 'running')
    .map((a) => `${a.name} still running at ${end} ms (faults ended at ${faultsEndMs(w)} ms)`);
}

/**
 * No ledger write (an append, the handover's bump) and no service as leader past its process's stop time, computed
 * from outside: from the sends of its own joins, claims and renewals and when their answers came (history.ts). The single writers hold the writer lease; the candidates
 * their own items' leases.
 */
function ledgerWritesInTime(w: ElectionState): string[] {
  const writers: SentCall[] = [];
  const candidates: SentCall[] = [];
  for (const c of w.calls.calls) (WRITERS.has(c.actor) ? writers : candidates).push(c);
  return [...stopTimeChecks(candidates, ELECTION_SETTINGS.lease, LEDGER_ACTS), ...stopTimeChecks(writers, ELECTION_SETTINGS.writer, LEDGER_ACTS)];
}

/** The single writers' names; every other process is a candidate. */
const WRITERS: ReadonlySet<string> = new Set(['w1', 'w2']);
/** The ledger store's writes, and a leader's service (an act with no store call, recorded by the world). */
const LEDGER_ACTS: ReadonlySet<string> = new Set(['append', 'raise', 'serve']);

/** The epoch a ledger act carries: an append's entry's, a raise's (or a service's) second argument. */
const actEpoch = (c: SentCall): number => (c.method === 'append' ? Number((c.args[1] as LedgerEntry).epoch) : Number(c.args[1]));

/**
 * Never two leaders (or two single writers) at once: per ledger, no act of an epoch sent, in true time, after an act of
 * a higher epoch was sent. A leader acts only while its lease runs and its successor only once that lease is over, so
 * every act of a term comes before the next term's first. From outside: the acts as the processes sent them (a held
 * act the fence then refuses counts when it was sent, before the pause that held it).
 *
 * A restored lock table forgets who holds what: from the moment it is in use, two processes can each believe they
 * lead, and only the fence keeps the ledger right (the checks above). So the lease's promise is checked on the acts
 * sent before `until` (when the restored table came into use), and on all of them in a schedule with no restore.
 */
export function oneTermAtATime(calls: readonly SentCall[], until = Infinity): string[] {
  const out: string[] = [];
  const newest = new Map<string, { readonly epoch: number; readonly actor: string; readonly at: number }>();
  const acts = calls.filter((c) => LEDGER_ACTS.has(c.method) && c.trueSentAt < until).sort((a, b) => a.trueSentAt - b.trueSentAt);
  for (const a of acts) {
    const key = String(a.args[0]);
    const epoch = actEpoch(a);
    const top = newest.get(key);
    if (top && epoch < top.epoch)
      out.push(
        `two terms at once on ${key}: ${a.actor} sent ${a.method} with epoch ${epoch} at ${a.trueSentAt} ms, after ${top.actor} acted with epoch ${top.epoch} at ${top.at} ms`,
      );
    if (!top || epoch > top.epoch) newest.set(key, { epoch, actor: a.actor, at: a.trueSentAt });
  }
  return out;
}

/** What `handoverWaited` checks: the writer lease's key, the writers' ledger, the wait margin, the clocks' rate error. */
export interface HandoverWait {
  readonly key: string;
  readonly ledger: string;
  readonly waitMarginMs: number;
  /** The largest monotonic rate error of any process's clock. */
  readonly maxRateError: number;
}

/**
 * The handover waits out the old writer's lease and the wait margin (SINGLE-WRITER HANDOVER step 3), checked from
 * outside: from the lock table's write history and the new writer's sends, never from the handover's own count.
 *
 * For each flip (a claim of the writer lease the table applied while another writer held it: that writer's last write
 * to it a claim or a renewal, not a release), let R be the true time the table applied that last write, L the lease
 * the old writer's claim wrote, and M the wait margin. The old writer's right ends at its stop time, counted on its
 * own clock from that write's send (before R). The new writer's first ledger act under the flipped epoch (its bump,
 * or an append; an act held by a pause counts when it was sent) must be sent, in true time, no earlier than
 *
 *     R + (L + M) / (1 + maxRateError)
 *
 * The allowance: the new writer times L + M on its own monotonic clock, from the flip's answer (after R); a clock fast
 * by up to maxRateError passes L + M in (L + M) / (1 + maxRateError) of true time, and that is allowed, as
 * leaseOverlapChecks allows a fast claimant. As in oneTermAtATime, only flips applied before `until` are checked: a
 * restored table forgets who held the lease.
 */
export function handoverWaited(writes: readonly LockWrite[], calls: readonly SentCall[], wait: HandoverWait, until = Infinity): string[] {
  const out: string[] = [];
  let held: { readonly holder: string; readonly leaseMs: number; readonly at: number } | undefined;
  for (const w of writes) {
    if (w.key !== wait.key) continue;
    if (w.method === 'claim' && held !== undefined && held.holder !== w.holder && w.at < until) {
      const earliest = held.at + (held.leaseMs + wait.waitMarginMs) / (1 + wait.maxRateError);
      const start = calls.find(
        (c) => c.actor === w.holder && c.args[0] === wait.ledger && actEpoch(c) === w.epoch && ['raise', 'append'].includes(c.method),
      );
      if (start !== undefined && start.trueSentAt < earliest)
        out.push(
          `${w.holder} started writing with epoch ${w.epoch} (${start.method} sent at ${start.trueSentAt} ms) before ${held.holder}'s last renewal at ${held.at} ms + its lease ${held.leaseMs} ms + the wait margin ${wait.waitMarginMs} ms (${earliest} ms, on a clock up to ${wait.maxRateError} fast)`,
        );
    }
    if (w.method === 'release') held = undefined;
    else if (w.method === 'claim') held = { holder: w.holder, leaseMs: w.leaseMs ?? 0, at: w.at };
    else if (held?.holder === w.holder) held = { ...held, at: w.at };
  }
  return out;
}

/**
 * The largest monotonic rate error a process here can have: the scheduler draws each within ±monoRate and rounds it
 * to four decimals, which can round it up past monoRate.
 */
const MAX_RATE_ERROR = Math.ceil(ELECTION_SETTINGS.faults.monoRate * 10_000) / 10_000;

const checks: readonly Check<ElectionState>[] = [
  { name: 'epochs never repeat and only rise, per lock key, across the restore', check: (w) => epochChecks(w.grants) },
  { name: 'no append below the fence, none of a lower epoch after a bump', check: appendsFenced },
  { name: 'no ledger write and no service as leader past its stop time', check: ledgerWritesInTime },
  { name: 'never two leaders, nor two writers, at once (until a restore)', check: (w) => oneTermAtATime(w.calls.calls, w.restoredAt) },
  {
    name: "a handover's writer starts no earlier than the old writer's last renewal + lease + wait margin (until a restore)",
    check: (w) =>
      handoverWaited(
        w.lockWrites.writes,
        w.calls.calls,
        {
          key: writerKey(ELECTION_SETTINGS.writerRole),
          ledger: writerLedgerKey(ELECTION_SETTINGS.writerRole),
          waitMarginMs: ELECTION_SETTINGS.writer.waitMarginMs,
          maxRateError: MAX_RATE_ERROR,
        },
        w.restoredAt,
      ),
  },
  { name: 'the ledgers are whole', check: ledgersWhole },
  { name: 'the manifest only moves forward', check: manifestForward },
  { name: 'the manifest names only acts the ledger has', check: manifestInLedger },
  { name: 'liveness: never without a leader serving for long while someone stands', check: alwaysLed },
  { name: 'liveness: a handover asked is answered in time', check: handoverAnswered },
  { name: 'liveness: every process ended', check: allEnded },
];

// ─── The world ───────────────────────────────────────────────────────────────────────────────────────────────────

/** The election world on the stores `storesOf` builds: in memory (ELECTION_WORLD), or on DynamoDB Local and local S3 (dynamo.ts). */
export const electionWorld = (storesOf: ElectionStoresOf): World<ElectionState, ElectionPlaced> => ({
  setup: (seed, mutation, placed) => setup(storesOf, seed, mutation, placed),
  actors,
  // The handover was asked, the restore (if any) is in use, and every process has ended (or crashed).
  done: (w) =>
    w.clock.monotonicMs() > w.handoverAt &&
    (!w.restore.restoring || w.restoredAt !== undefined) &&
    w.processes.every((a) => a.crashed || a.outcome !== 'running'),
  horizonMs: () => ELECTION_SETTINGS.faults.windowMs + ELECTION_SETTINGS.faults.maxPauseMs + workBoundMs(),
  // A schedule takes up to about 1,600 turns; sidecar-heartbeat's up to about 33,000 (a sidecar beats to the horizon).
  maxTurns: 200_000,
  checks,
  end: async (w) => {
    const heads: string[] = [];
    for (const key of LEDGERS) {
      const head = await w.ledgers.head(key);
      heads.push(`${key} v${head.version} epoch ${head.epoch}`);
    }
    const state = heads.join('; ');
    return { line: `end: ${state}`, state };
  },
});

export const ELECTION_WORLD = electionWorld(memoryStores);

/**
 * Run one schedule of the election world from its seed (optionally with a broken variant of a rule, or placed faults)
 * and check it. `state` in its result names the leaders' ledger and the writers' ledger as they ended.
 */
export const runElectionSchedule = (seed: number, mutation?: string, placed?: ElectionPlaced): Promise<ScheduleResult> =>
  runWorld(ELECTION_WORLD, seed, mutation, placed);

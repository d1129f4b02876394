/**
 * The PostgreSQL fence's world: three holders of one job's lease (the real withLease on the in-memory lock store) write
 * the job's rows to PostgreSQL through the real PostgresFence (`fencepost/postgres`), on the twin
 * (lib/testing/postgres-fence.ts: PostgreSQL's row locks at READ COMMITTED, or Aurora DSQL's check at COMMIT, drawn
 * per schedule). Every lock store call and every statement (connect, BEGIN, the fenced UPDATE, each insert, COMMIT)
 * is a step boundary of the scheduler, which may pause the holder there (the stale holder: paused right after a
 * passed check), crash it, or answer late.
 *
 * The checks read the twin's committed history, never the fence's verdicts: no row commits while the fence row, as
 * committed with it, stands above the row's token; the fence never goes down; each batch commits whole; and once the
 * faults end, some holder writes every batch.
 */
import { VirtualClock, type Clock } from '../../lib/core/clock';
import { prng } from '../../lib/core/prng';
import { withLease } from '../../lib/core/with-lease';
import { DEFAULT_TABLE, fenceStatements, fenceTableSql } from '../../lib/postgres/sql';
import { postgresFence } from '../../lib/postgres/fence';
import type { PgPool, PgPoolClient, PgResult } from '../../lib/postgres/driver';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryPostgres, type MemoryPgClient } from '../../lib/testing/postgres-fence';
import { epochChecks } from '../../lib/testing/checks';
import { override, releaseDeletes } from './mutations';
import { LockHistory, leaseOverlapChecks, rateErrorCovered } from '../../lib/testing/history';
import type { LockStore } from '../../lib/core/store/lock';
import { Scheduler, type Actor, type Placed } from '../../lib/testing/scheduler';
import type { World, WorldState } from '../../lib/testing/world';

/** The broken variants of this world: each the bug a hand-written fenced transaction is most likely to have. */
export const POSTGRES_MUTATIONS = [
  // The fenced UPDATE's row count not checked: a 0-row UPDATE is no error in SQL, so the work runs and commits
  // (modelled by reading the count as 1, as code that never looks at it would behave).
  'pg-count-unchecked',
  // The raise written as a plain upsert, without its WHERE (`ON CONFLICT (key) DO UPDATE SET fence = EXCLUDED.fence`):
  // a stale holder's late raise puts the fence back down to its own token.
  'pg-raise-unguarded',
  // BEGIN sent only when an isolation level is asked (`if (isolation) BEGIN …`): with the session's default, the UPDATE
  // and each insert commit on their own, and a batch lands over several commits.
  'pg-begin-with-isolation-only',
  // The transaction's connection rolled back and given back only on success (no catch, no finally): a statement that
  // fails leaves its transaction open on a connection nobody holds, with the fence row's lock (PostgreSQL keeps it).
  'pg-leak-on-error',
  // The lease's rule under the fence: the release deletes the lock item, so its epoch starts again at 1.
  'lease-epoch-deleted',
] as const;
/**
 * A broken variant for placed schedules only: a renewal that touches renewed_at and keeps the rvn, so a claimant
 * watching the rvn sees a live holder's lease unchanged for a whole lease and takes it over. Only "no claim while
 * another lease runs" catches it, but drawn it bites in 44 of 1,000 (a holder's work here lasts about half a lease),
 * under the table's bar of 1 in 20: test/unit/explore-postgres.test.ts places its case.
 */
type PlacedPostgresMutation = 'lease-renew-keeps-rvn';
type PostgresMutation = (typeof POSTGRES_MUTATIONS)[number] | PlacedPostgresMutation;

const JOB = 'ship#2026-12-01';
const ROWS = 'shipments';
const SETTINGS = {
  holders: 3,
  /** The first holder starts at 0; the others at seeded times up to this. */
  startsWithinMs: 2_000,
  lease: { leaseMs: 1_000, renewMs: 300, marginMs: 200, claimBudget: 50 },
  batches: 3,
  rowsPerBatch: 2,
  batchWorkMs: 120,
  faults: {
    chance: 0.08,
    budget: 4,
    maxPauseMs: 2_500,
    windowMs: 4_000,
    // Each holder's monotonic clock runs fast or slow by up to half of what the lease's margin covers (11 %).
    monoRate: rateErrorCovered({ leaseMs: 1_000, marginMs: 200 }) / 2,
    lateMs: 200,
    // A pause as a transaction takes its connection, right after the holder's passed check: the stale holder's gap.
    emphasis: [{ methods: ['connect'], kind: 'pause', weight: 12 }],
    // The first connection a holder takes is its raise's: a pause there makes the holder that raises late.
    chanceAt: [
      { methods: ['connect'], share: 5, first: true },
      { methods: ['connect'], share: 2 },
    ],
  },
} as const;
const HORIZON_MS = SETTINGS.faults.windowMs + SETTINGS.faults.maxPauseMs + 20 * SETTINGS.lease.leaseMs;

interface PostgresState extends WorldState {
  readonly clock: VirtualClock;
  readonly random: () => number;
  /** The holders' clock rates' own stream, so the schedule's other draws stay as they were. */
  readonly rates: () => number;
  readonly db: MemoryPostgres;
  /** The lock table every holder's lease uses, its applied writes kept in `lockWrites` (the lease checks read them). */
  readonly locks: LockStore;
  readonly lockWrites: LockHistory;
  readonly mutation: PostgresMutation | undefined;
  /** Faults placed by a test: the holders then start 100 ms apart instead of at drawn times. */
  readonly placed: boolean;
  readonly holders: Actor[];
  /** Each holder's connections taken and not yet given back. */
  readonly open: Map<Actor, Set<MemoryPgClient>>;
}

function setup(seed: number, mutation: string | undefined, placed?: Placed): PostgresState {
  const random = prng(seed);
  const clock = new VirtualClock();
  const open = new Map<Actor, Set<MemoryPgClient>>();
  // A crashed holder's connections close: the server rolls back what they had open and releases their row locks (as
  // PostgreSQL does when a client's connection drops). Nothing restarts the holder.
  const onCrash = (actor: Actor) => {
    for (const c of open.get(actor) ?? []) c.release();
    return undefined;
  };
  const scheduler = new Scheduler(clock, random, SETTINGS.faults, onCrash, new Set(['query']), placed);
  const lockWrites = new LockHistory(clock);
  const db = new MemoryPostgres({ concurrency: prng(seed + 7)() < 0.5 ? 'locking' : 'optimistic' });
  void db.query(fenceTableSql());
  scheduler.log(`postgres world: ${db.concurrency === 'locking' ? 'PostgreSQL (row locks)' : 'Aurora DSQL (optimistic)'}`);
  return {
    scheduler,
    clock,
    random,
    rates: prng(seed + 13),
    db,
    locks: lockWrites.observe(brokenLocks(mutation, new MemoryLockStore())),
    lockWrites,
    mutation: mutation as PostgresMutation | undefined,
    placed: placed !== undefined,
    holders: [],
    open,
    broken: { restore: () => undefined },
    violations: [],
  };
}

/** The lock table as every holder sees it: the memory store, or with the release deleting the item (mutations.ts), or a renewal keeping the rvn. */
function brokenLocks(mutation: string | undefined, locks: MemoryLockStore): LockStore {
  if (mutation === 'lease-renew-keeps-rvn')
    return override(locks, { renew: async (key, holding, rvn, wallIso) => locks.renew(key, holding, (await locks.read(key))?.rvn ?? rvn, wallIso) });
  return mutation === 'lease-epoch-deleted' ? releaseDeletes(locks) : locks;
}

/** The twin's pool as one holder reaches it: every statement a step boundary of its actor. */
function poolOf(w: PostgresState, actor: Actor): PgPool<PgPoolClient> {
  const { scheduler } = w;
  const { update, raise } = fenceStatements(DEFAULT_TABLE);
  const client = (inner: MemoryPgClient): PgPoolClient => {
    const mine = w.open.get(actor) ?? w.open.set(actor, new Set()).get(actor)!;
    mine.add(inner);
    const send = (text: string, values?: readonly unknown[]) =>
      w.mutation === 'pg-raise-unguarded' && text === raise ? unguardedRaise(w.db, inner, values ?? []) : inner.query(text, values ?? []);
    const parked = scheduler.wrap({ query: send, insert: inner.insert.bind(inner) }, actor);
    // pg-leak-on-error: once a statement of this connection failed, the code that fails has no ROLLBACK nor release.
    let failed = false;
    const failing = <T>(p: Promise<T>) => p.catch((err: unknown) => ((failed = w.mutation === 'pg-leak-on-error'), Promise.reject(err)));
    return {
      query: async (text: string, values?: readonly unknown[]): Promise<PgResult> => {
        if (w.mutation === 'pg-begin-with-isolation-only' && text === 'BEGIN') return { command: 'BEGIN', rowCount: 0, rows: [] };
        if (failed && text === 'ROLLBACK') return { command: 'ROLLBACK', rowCount: 0, rows: [] };
        const r = await failing(parked.query(text, values));
        return w.mutation === 'pg-count-unchecked' && text === update ? { ...r, rowCount: 1 } : r;
      },
      insert: (table: string, key: string, row?: Record<string, unknown>) => failing(parked.insert(table, key, row)),
      release: () => void (failed || (mine.delete(inner), inner.release())),
    } as PgPoolClient;
  };
  const pool = scheduler.wrap({ connect: () => w.db.connect() }, actor);
  return {
    connect: async () => client(await pool.connect()),
    query: async (text: string, values?: readonly unknown[]) => {
      const c = client(await pool.connect());
      try {
        return await c.query(text, values);
      } finally {
        c.release();
      }
    },
  };
}

/**
 * pg-raise-unguarded: the raise as a plain upsert, which sets the fence to the token whatever it was. Run on the twin
 * as the guarded upsert in a transaction of its own (the same row lock, the same commit check), its refusal turned
 * into the write the unguarded statement makes. The twin runs only the fence's own statements: the variant reaches
 * behind it, into the transaction's changes.
 */
async function unguardedRaise(db: MemoryPostgres, inner: MemoryPgClient, values: readonly unknown[]): Promise<PgResult> {
  await inner.query('BEGIN');
  const guarded = await inner.query(fenceStatements(DEFAULT_TABLE).raise, values);
  if (guarded.rowCount !== 0) return (await inner.query('COMMIT'), guarded);
  // Refused: the fence stands above the token (the row is locked under PostgreSQL; DSQL checks it at COMMIT).
  const old = db.fenceHistory(String(values[0])).at(-1)!.fence;
  inner.transaction!.changed.set(`${DEFAULT_TABLE}\u0000${String(values[0])}`, { fence: Number(values[1]), replaced: old });
  await inner.query('COMMIT');
  return { command: 'INSERT', rowCount: 1, rows: [{ replaced: String(old) }] };
}

function startHolder(w: PostgresState, name: string): void {
  const { scheduler } = w;
  const actor = scheduler.actor(name, w.rates);
  w.holders.push(actor);
  const clock: Clock = actor;
  scheduler.log(`${name} starts`);
  withLease({ locks: scheduler.wrap(w.locks, actor), clock, random: w.random }, JOB, name, SETTINGS.lease, async (lease) => {
    const fence = postgresFence({ pool: poolOf(w, actor), key: JOB, clock, random: w.random }).held(lease);
    await lease.act(() => fence.raise());
    for (let batch = 0; batch < SETTINGS.batches; batch++) {
      await clock.sleep(SETTINGS.batchWorkMs);
      await lease.act(() =>
        fence.transaction(async (c) => {
          for (let i = 0; i < SETTINGS.rowsPerBatch; i++)
            await (c as unknown as MemoryPgClient).insert(ROWS, `${name}:${lease.token}:${batch}:${i}`, { token: lease.token, batch, holder: name });
        }),
      );
    }
  }).then(
    () => ((actor.outcome = 'done'), scheduler.log(`${name} ends done`)),
    (err: Error) => ((actor.outcome = `error ${err.name}`), scheduler.log(`${name} ends with ${err.name}: ${err.message}`)),
  );
}

/** A holder has every batch committed under one token: from the twin's committed rows (`holder:token:batch:i`). */
function finished(w: PostgresState): boolean {
  const batches = new Map<string, Set<string>>();
  for (const c of w.db.commits(ROWS)) {
    const [holder, token, batch] = c.key.split(':');
    const run = `${holder}:${token}`;
    batches.set(run, (batches.get(run) ?? new Set()).add(batch!));
  }
  return [...batches.values()].some((b) => b.size === SETTINGS.batches);
}

/** The fence row's committed value as of commit `seq` (0: never raised by then). */
function fenceAt(history: readonly { fence: number; seq: number }[], seq: number): number {
  let value = 0;
  for (const v of history) if (v.seq <= seq) value = v.fence;
  return value;
}

export const POSTGRES_WORLD: World<PostgresState> = {
  setup: (seed, mutation, placed) => setup(seed, mutation, placed),
  actors: (w) => {
    const starts = prng(w.random() * 2 ** 31);
    startHolder(w, 'holder-1');
    for (let i = 2; i <= SETTINGS.holders; i++) {
      const at = w.placed ? (i - 1) * 100 : Math.floor(starts() * SETTINGS.startsWithinMs);
      w.clock.after(at, () => startHolder(w, `holder-${i}`));
    }
  },
  done: (w) => w.holders.length === SETTINGS.holders && w.holders.every((h) => h.outcome !== 'running' || h.crashed),
  horizonMs: () => HORIZON_MS,
  maxTurns: 20_000,
  checks: [
    // The lease's own promises, from the lock table's applied writes (as in the night world).
    { name: 'no claim while another lease runs', check: (w) => leaseOverlapChecks(w.lockWrites.writes, SETTINGS.faults.monoRate) },
    { name: 'epochs never repeat', check: (w) => epochChecks(w.lockWrites.claims()) },
    {
      name: 'no row commits below the fence',
      check: (w) => {
        const history = w.db.fenceHistory(JOB);
        return w.db
          .commits(ROWS)
          .filter((c) => fenceAt(history, c.seq) > Number(c.row.token))
          .map((c) => `row ${c.key} committed with token ${String(c.row.token)} at commit ${c.seq}, the fence then at ${fenceAt(history, c.seq)}`);
      },
    },
    {
      name: 'the fence never goes down',
      check: (w) =>
        w.db
          .fenceHistory(JOB)
          .flatMap((v, i, all) =>
            i > 0 && v.fence < all[i - 1].fence ? [`the fence went from ${all[i - 1].fence} down to ${v.fence} at commit ${v.seq}`] : [],
          ),
    },
    {
      name: 'each batch commits whole',
      check: (w) => {
        const byBatch = new Map<string, Set<number>>();
        const counts = new Map<string, number>();
        for (const c of w.db.commits(ROWS)) {
          const batch = c.key.split(':').slice(0, 3).join(':');
          byBatch.set(batch, (byBatch.get(batch) ?? new Set()).add(c.seq));
          counts.set(batch, (counts.get(batch) ?? 0) + 1);
        }
        return [...byBatch].flatMap(([batch, seqs]) =>
          seqs.size > 1 || counts.get(batch) !== SETTINGS.rowsPerBatch ? [`batch ${batch}: ${counts.get(batch)} rows over ${seqs.size} commits`] : [],
        );
      },
    },
    {
      name: 'once the faults end, a holder writes every batch',
      check: (w, ended) =>
        !finished(w) && ended !== 'turns' && w.holders.some((h) => !h.crashed && h.outcome === 'running')
          ? [`no holder finished by ${HORIZON_MS} ms`]
          : [],
    },
  ],
  end: async (w) => {
    const history = w.db.fenceHistory(JOB);
    const state = `fence ${history.at(-1)?.fence ?? 0}, ${w.db.commits(ROWS).length} rows, ${finished(w) ? 'done' : 'unfinished'}`;
    return { line: `end: ${state}`, state };
  },
};

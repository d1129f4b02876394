/**
 * The fence in PostgreSQL: one row of a fence table (lib/postgres/sql.ts), carrying `fence`, the highest token it has
 * accepted. The check and the writes are one transaction, so no pause can fall between them.
 *
 *   raise        the new holder's FIRST act: one upsert that only moves the fence up, answering with the value it
 *                replaced;
 *   transaction  the holder's writes: BEGIN; the fence row's UPDATE at the token (1 row: go on; 0 rows: refused, roll
 *                back); the caller's statements on the same connection; COMMIT.
 *   held         the fence with a holder's token bound to it (a Lease's epoch and stop-time check): what a holder
 *                raises and writes with, so no caller carries a bare token from its lease to its writes.
 *
 * What it guarantees: once the fence is raised to N, no fenced transaction with a token below N commits, whatever its
 * holder believes, at every isolation level:
 *   READ COMMITTED   the UPDATE takes the fence row's lock to COMMIT: a raise meanwhile waits, then re-checks its
 *                    WHERE against the committed row; our UPDATE, if it waited on a raise, re-checks against the raise.
 *   REPEATABLE READ, SERIALIZABLE
 *                    a row changed after our snapshot is not updated but refused with a serialization failure
 *                    (40001): the whole transaction is sent again with the same token, and meets the fence as it is.
 *   Aurora DSQL      no locks (optimistic concurrency): a conflict surfaces at COMMIT as 40001, sent again likewise. A
 *                    transaction there holds at most 3,000 rows, 10 MiB and 5 minutes (DSQL_LIMITS), the fence row
 *                    among them: cut a chunk's writes into transactions by them.
 * What it does not: a write that is not inside a fenced transaction is not fenced; two holders with the SAME token
 * both pass (a token goes to one holder: the lease's epoch does). A rejection means: you have lost the lock; stop and
 * discard local state.
 */
import { systemClock, type Clock } from '../core/clock';
import { backoffOf, retryTransient } from '../core/conditions';
import { ConfigError, FenceNotRaisedError, FencedOutError } from '../core/errors';
import { isRetryable, type PgPool, type PgPoolClient } from './driver';
import { TransactionAbortedError } from './errors';
import { DEFAULT_TABLE, ISOLATIONS, beginStatement, fenceStatements, tableProblems, type FenceStatements, type Isolation } from './sql';

/** Where a PostgreSQL fence lives, and how its transactions run. */
export interface PostgresFenceOptions<C extends PgPoolClient = PgPoolClient> {
  /** The pool its statements go to (node-postgres' `Pool`; write `postgresFence<PoolClient>(…)` to give the work pg's own client type). */
  readonly pool: PgPool<C>;
  /** The fence's row: what it guards (a job, a chunk, an account). */
  readonly key: string;
  /** The fence table, made by `fenceTableSql(table)`: a name or schema.name, used exactly as written. @defaultValue 'fencepost_fences' */
  readonly table?: string;
  /**
   * The isolation level of its transactions (the raise's too). Left out: the session's default, which is READ COMMITTED
   * unless the server or role sets another; leave it out on Aurora DSQL, whose one level is its own.
   */
  readonly isolation?: Isolation;
  /** The name FencedOutError reports for this fence. @defaultValue 'fence' */
  readonly resource?: string;
  /** Times the backoff between sends of a transaction that met a serialization failure. @defaultValue systemClock */
  readonly clock?: Clock;
  /** Jitter source for that backoff. @defaultValue Math.random */
  readonly random?: () => number;
}

/** What a fence is held with: a token handed to one holder only (a Lease: its epoch, and its stop-time check). */
export interface FenceHolder {
  /** The fencing token. */
  readonly token: number;
  /** Throws when the holder must not act any more (a Lease past its stop time). Run before every send the fence makes on its own. */
  check?(): void;
}

/**
 * A PostgreSQL fence as its holder writes with it: the fence and the holder's token (`fence.held(lease)`). Raise it
 * first, then write inside `transaction`.
 */
export interface HeldPostgresFence<C extends PgPoolClient = PgPoolClient> {
  /** The fence. */
  readonly fence: PostgresFence<C>;
  /** The token this holder writes with. */
  readonly token: number;
  /**
   * Raise the fence to this token: the holder's first act, before it reads or writes anything it guards. Equal is
   * accepted, so a retry after a lost answer is harmless.
   * @returns the fence it replaced (undefined: this raise created the fence)
   * @throws FencedOutError carrying the fence met, when a higher token was raised first
   */
  raise(): Promise<number | undefined>;
  /**
   * Run `work` in one transaction that commits only while the fence accepts this token. `work` is given the
   * transaction's connection: run every statement to fence on it, and do not COMMIT or ROLLBACK yourself. After a
   * serialization failure or a deadlock the whole transaction runs again, `work` included: it must have no effect
   * outside the transaction.
   * @returns what `work` returned, once the transaction committed
   * @throws FencedOutError (a higher token holds the fence), FenceNotRaisedError (nobody raised it): nothing was
   * written; TransactionAbortedError (a statement failed and `work` went on); any error of `work`, after a rollback
   */
  transaction<T>(work: (client: C) => Promise<T>): Promise<T>;
  /** The holder's check (a Lease's stop time): run before every send after the first, which is the caller's act. */
  check(): void;
}

const noCheck = (): void => undefined;

/** How a transaction's body ends it: COMMIT with its value, or ROLLBACK. */
type Ending<T> = { readonly commit: false } | { readonly commit: true; readonly value: T };

/**
 * One fence row in a PostgreSQL table, bound to its key. A holder raises it and writes with it through `held(lease)`.
 *
 * Guarantees: a raise to `t` lands only if no token above `t` was raised before, and returns what it replaced; a
 * fenced transaction at `t` commits only if the fence is at most `t` when it takes the fence row. Nothing about
 * statements run outside a fenced transaction.
 */
export class PostgresFence<C extends PgPoolClient = PgPoolClient> {
  /** What FencedOutError reports for this fence. */
  readonly resource: string;
  /** The fence's row. */
  readonly key: string;
  /** The fence table, as given. */
  readonly table: string;
  private readonly pool: PgPool<C>;
  private readonly sql: FenceStatements;
  private readonly isolation?: Isolation;
  private readonly clock: Clock;
  private readonly random?: () => number;

  constructor(options: PostgresFenceOptions<C>) {
    const problems = optionProblems(options);
    if (problems.length > 0) throw new ConfigError(problems);
    this.pool = options.pool;
    this.key = options.key;
    this.table = options.table ?? DEFAULT_TABLE;
    this.resource = options.resource ?? 'fence';
    this.sql = fenceStatements(this.table);
    this.isolation = options.isolation;
    this.clock = options.clock ?? systemClock;
    this.random = options.random;
  }

  /** The fence with `holder`'s token bound to it: raise it, then write with it (`fence.held(lease)`). */
  held(holder: FenceHolder): HeldPostgresFence<C> {
    const token = holder.token;
    if (!Number.isSafeInteger(token) || token < 0) throw new ConfigError([`a fencing token is a whole number of at least 0, got ${token}`]);
    const check = () => holder.check?.();
    return {
      fence: this,
      token,
      check,
      raise: () => this.raise(token, check),
      transaction: (work) => this.transaction(token, work, check),
    };
  }

  /** The fence as committed now (undefined: never raised). */
  async read(): Promise<number | undefined> {
    const r = await this.pool.query(this.sql.read, [this.key]);
    return r.rows.length === 0 ? undefined : Number(r.rows[0].fence);
  }

  /**
   * Raise to `token` (see HeldPostgresFence.raise).
   * @internal a holder raises through `held(lease).raise()`
   */
  async raise(token: number, check: () => void = noCheck): Promise<number | undefined> {
    // 1. The upsert, alone or inside a transaction at the isolation asked. Sent again after a serialization failure
    //    with the same token: equal is accepted. The first send is the caller's act; a resend comes after a backoff.
    let sends = 0;
    const rows = await this.retried(() => {
      if (sends++ > 0) check();
      return this.raiseOnce(token);
    });
    // 2. One row: raised; `replaced` is NULL when the raise created the fence.
    if (rows.length === 1) return rows[0].replaced === null ? undefined : Number(rows[0].replaced);
    // 3. No row: refused, a higher token holds the fence. Read it as committed now, to report the fence that won.
    throw new FencedOutError(this.resource, token, await this.read());
  }

  /**
   * Run `work` fenced at `token` (see HeldPostgresFence.transaction).
   * @internal a holder writes through `held(lease).transaction(work)`
   */
  async transaction<T>(token: number, work: (client: C) => Promise<T>, check: () => void = noCheck): Promise<T> {
    let sends = 0;
    const out = await this.retried(() => {
      if (sends++ > 0) check();
      return this.inTransaction(token, async (client): Promise<Ending<T>> => {
        // 1. The fence first: the UPDATE at our token takes the fence row's lock until we end, so no raise lands
        //    between this check and our COMMIT.
        const updated = await client.query(this.sql.update, [this.key, token]);
        // 2. 0 rows is not an error in SQL: the fence is above our token, or was never raised. Roll back, write nothing.
        if (updated.rowCount !== 1) return { commit: false };
        // 3. The caller's statements, on this transaction's connection; then COMMIT.
        return { commit: true, value: await work(client) };
      });
    });
    if (out.commit) return out.value;
    // Refused: read the fence as committed now (after our rollback), the one that refused us.
    const met = await this.read();
    if (met === undefined || met <= token) throw new FenceNotRaisedError(this.resource, token);
    throw new FencedOutError(this.resource, token, met);
  }

  /** The raise's upsert, in a transaction at the isolation asked if one was. */
  private async raiseOnce(token: number): Promise<readonly Record<string, unknown>[]> {
    const values = [this.key, token];
    if (this.isolation === undefined) return (await this.pool.query(this.sql.raise, values)).rows;
    const out = await this.inTransaction(token, async (client) => ({ commit: true, value: (await client.query(this.sql.raise, values)).rows }));
    return out.commit ? out.value : [];
  }

  /** Send again after a serialization failure or a deadlock, with a bounded full-jitter backoff on the clock. */
  private retried<T>(attempt: () => Promise<T>): Promise<T> {
    return retryTransient(backoffOf({ clock: this.clock, random: this.random }), attempt, undefined, isRetryable);
  }

  /**
   * BEGIN, `body` on one connection, then COMMIT if it says so, else ROLLBACK. An error rolls back and is thrown as it
   * is; a connection that cannot roll back is closed instead of going back to the pool.
   */
  private async inTransaction<T>(token: number, body: (client: C) => Promise<Ending<T>>): Promise<Ending<T>> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query(beginStatement(this.isolation));
      const out = await body(client);
      // A COMMIT answered 'ROLLBACK' (not an error) means an earlier statement aborted the transaction.
      const ended = await client.query(out.commit ? 'COMMIT' : 'ROLLBACK');
      if (out.commit && ended.command !== 'COMMIT') throw new TransactionAbortedError(this.resource, token);
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))));
      throw err;
    } finally {
      client.release(broken);
    }
  }
}

/** Every problem of a fence's options, one sentence each. */
function optionProblems(options: PostgresFenceOptions<PgPoolClient>): string[] {
  const problems: string[] = [];
  const pool = options.pool as Partial<PgPool> | undefined;
  if (typeof pool?.query !== 'function' || typeof pool.connect !== 'function')
    problems.push('pool must be a connection pool with query() and connect() (a node-postgres Pool)');
  if (typeof options.key !== 'string' || options.key === '') problems.push(`key must be a non-empty string, got ${JSON.stringify(options.key)}`);
  if (options.table !== undefined) problems.push(...tableProblems(options.table));
  if (options.isolation !== undefined && !ISOLATIONS.includes(options.isolation))
    problems.push(`isolation must be one of ${ISOLATIONS.map((i) => `'${i}'`).join(', ')}, got ${JSON.stringify(options.isolation)}`);
  if (options.resource !== undefined && (typeof options.resource !== 'string' || options.resource === ''))
    problems.push(`resource must be a non-empty string, got ${JSON.stringify(options.resource)}`);
  return problems;
}

/**
 * A fence bound to one row of a PostgreSQL fence table: `postgresFence({ pool, key })`, then `fence.held(lease)` to
 * raise it and write with it. Nothing is sent until then.
 * @throws ConfigError listing every problem of the options
 */
export function postgresFence<C extends PgPoolClient = PgPoolClient>(options: PostgresFenceOptions<C>): PostgresFence<C> {
  return new PostgresFence(options);
}

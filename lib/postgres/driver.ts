/**
 * What the fence needs of a PostgreSQL driver, and what it makes of its errors. node-postgres' `Pool` and the
 * `PoolClient` its `connect()` gives have these shapes, so the fence takes them from the caller and never imports `pg`
 * (a user without it installs nothing for it); the in-memory twin (lib/testing/postgres-fence.ts) has them too.
 */

/** A statement's answer, as node-postgres gives it. */
export interface PgResult {
  /** The command tag's verb: 'UPDATE', 'INSERT', 'COMMIT'; 'ROLLBACK' for the COMMIT of a transaction an error aborted. */
  readonly command: string;
  /** The rows the statement changed (or returned); 0 is an answer, not an error. */
  readonly rowCount: number | null;
  /** The rows returned. */
  readonly rows: readonly Record<string, unknown>[];
}

/** Something that runs a statement: a pool, or one connection (node-postgres' `PoolClient`). */
export interface PgClient {
  /** Run one statement with its parameters ($1, $2, …). */
  query(text: string, values?: readonly unknown[]): Promise<PgResult>;
}

/** One connection taken from a pool: a transaction runs on it, then it goes back. */
export interface PgPoolClient extends PgClient {
  /** Give it back to the pool; with an error, the pool closes it instead of reusing it. */
  release(err?: Error | boolean): void;
}

/** A connection pool (node-postgres' `Pool`): a single statement runs on any connection, a transaction on one. */
export interface PgPool<C extends PgPoolClient = PgPoolClient> extends PgClient {
  /** Take a connection for a transaction. */
  connect(): Promise<C>;
}

/** The SQLSTATE of a driver error (node-postgres puts it in `code`), if it has one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * The errors after which the whole transaction is sent again, with the same token: nothing of it was written, and
 * sent again it can succeed.
 *   40001  serialization_failure: at REPEATABLE READ and SERIALIZABLE another transaction changed the row first (the
 *          fence row, or one the work read); Aurora DSQL answers every conflict so, at COMMIT.
 *   40P01  deadlock_detected: the server chose this transaction to break a lock cycle (the work's rows and the fence
 *          row of another holder, taken in opposite orders).
 */
const RETRYABLE: ReadonlySet<string> = new Set(['40001', '40P01']);

/** A serialization failure or a deadlock: the transaction was rolled back and may be sent again as it was. */
export function isRetryable(err: unknown): boolean {
  return RETRYABLE.has(sqlState(err) ?? '');
}

/**
 * The fence's SQL, written once: its table, its one comparison and its statements. Every statement the fence sends is
 * built here, from a table name checked and quoted here; the key and the token always travel as parameters ($1, $2),
 * so no caller's text is ever part of a statement.
 *
 * The table holds one row per fence:
 *   key       text, the primary key: what the fence guards (a job, a chunk, an account);
 *   fence     bigint, the highest token accepted; it only moves up;
 *   replaced  bigint, the fence the last raise replaced (NULL: that raise created the row). A raise answers with the
 *             value it replaced in one statement: RETURNING sees only the new row (before PostgreSQL 18), and a
 *             subquery would read the statement's snapshot, older than the row a raise that waited on a lock updates.
 */
import { ConfigError } from '../core/errors';

/** The table the fence uses unless told otherwise. */
export const DEFAULT_TABLE = 'fencepost_fences';

/**
 * The fence's one comparison: a token not below the fence is accepted (equal: a holder writes many times with its one
 * token), a lower one refused. In every statement `f` is the fence table and `$2` the token.
 */
const FENCE_CLAUSE = 'f.fence <= $2';

/** A name part PostgreSQL would take unquoted, at most 63 bytes (NAMEDATALEN - 1): nothing to escape, nothing cut. */
const NAME_PART = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** What is wrong with a table name (`name` or `schema.name`), one sentence each; empty when it is usable. */
export function tableProblems(table: unknown): string[] {
  if (typeof table !== 'string') return [`table must be a string, got ${typeof table}`];
  const parts = table.split('.');
  if (parts.length > 2 || !parts.every((p) => NAME_PART.test(p)))
    return [`table must be a name or schema.name, each part a letter or _ then letters, digits or _ (at most 63), got ${JSON.stringify(table)}`];
  return [];
}

/**
 * The table name quoted, each part in double quotes: used exactly as written (`Fences` and `fences` are two tables),
 * a reserved word is a name. Refuses a name tableProblems finds wrong.
 */
function quoteTable(table: string): string {
  const problems = tableProblems(table);
  if (problems.length > 0) throw new ConfigError(problems);
  return table
    .split('.')
    .map((p) => `"${p}"`)
    .join('.');
}

/**
 * The DDL of a fence table: run it once (a migration), before the first raise. `IF NOT EXISTS`: running it again
 * changes nothing. Never delete a row of it: a deleted fence accepts every token again.
 * @param table - a name or schema.name, used exactly as written @defaultValue 'fencepost_fences'
 */
export function fenceTableSql(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(table)} (key text PRIMARY KEY, fence bigint NOT NULL, replaced bigint)`;
}

/** The statements of one fence table. $1 is the key, $2 the token. */
export interface FenceStatements {
  /** The table, quoted. */
  readonly table: string;
  /** Raise: 1 row (its `replaced`) when raised or created, 0 rows when a higher token holds the fence. */
  readonly raise: string;
  /** The fenced transaction's first statement: 1 row updated when the fence accepts the token, else 0. */
  readonly update: string;
  /** The fence as committed (at READ COMMITTED): 1 row, or none when it was never raised. */
  readonly read: string;
}

/** The statements of the fence table `table`. */
export function fenceStatements(table: string): FenceStatements {
  const t = quoteTable(table);
  return {
    table: t,
    // An upsert that only moves the fence up. On a conflict the row is locked, waited for if another transaction holds
    // it, and the WHERE is evaluated on its latest version: refused, nothing changes and no row is returned.
    raise: `INSERT INTO ${t} AS f (key, fence) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET fence = EXCLUDED.fence, replaced = f.fence WHERE ${FENCE_CLAUSE} RETURNING f.replaced`,
    // Takes the row lock to COMMIT: a raise of another holder waits for us, then re-checks against what we committed.
    update: `UPDATE ${t} AS f SET fence = $2 WHERE f.key = $1 AND ${FENCE_CLAUSE}`,
    read: `SELECT f.fence FROM ${t} AS f WHERE f.key = $1`,
  };
}

/** An isolation level a fenced transaction may ask for; none asked: the session's default (READ COMMITTED unless set). */
export type Isolation = 'read committed' | 'repeatable read' | 'serializable';

/** Every Isolation, to check an option against. */
export const ISOLATIONS: readonly Isolation[] = ['read committed', 'repeatable read', 'serializable'];

/** The BEGIN of a fenced transaction: at `isolation`, or at the session's default. */
export function beginStatement(isolation?: Isolation): string {
  return isolation === undefined ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`;
}

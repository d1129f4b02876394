/**
 * The PostgreSQL fence's twin: an in-memory connection pool (MemoryPostgres) that runs the fence's own statements
 * (lib/postgres/sql.ts) as PostgreSQL runs them, so the real PostgresFence runs on it, in virtual time and in an order
 * a seeded scheduler chooses. It passes the same conformance suite as a real server
 * (test/store/postgres-fence-conformance.test.ts).
 *
 * What it keeps:
 *   - the statements: the fence table's DDL (fenceTableSql), the raise's upsert, the fenced UPDATE, the read, BEGIN
 *     [ISOLATION LEVEL …], COMMIT, ROLLBACK. A statement on a table never created fails 42P01; any other text is refused
 *     (it runs nothing else). The caller's own writes are `client.insert(table, key, row)`, inside the transaction,
 *     unique by key (23505), seen by `rows(table)` once committed;
 *   - row locks (concurrency 'locking', PostgreSQL): a transaction that raised or updated a fence row holds it until it
 *     ends (a refused raise too, and an UPDATE refused after a wait); a raise or UPDATE of that row in another transaction waits, in order of arrival. At
 *     READ COMMITTED each statement sees the rows committed when it starts, and after a wait re-checks its WHERE on the
 *     row as committed by the transaction it waited for (an UPDATE whose WHERE already fails on what it sees does not
 *     wait). At REPEATABLE READ and SERIALIZABLE the snapshot is taken at the transaction's first statement after BEGIN,
 *     and a row another transaction committed after it is refused with 40001 instead of being changed;
 *   - optimistic concurrency (concurrency 'optimistic', Aurora DSQL): no waits, a snapshot taken at BEGIN, and at COMMIT
 *     a row this transaction changed that another committed after that snapshot fails the COMMIT with 40001, nothing
 *     written;
 *   - a failed statement aborts its transaction at once (its locks released, its changes gone): every later statement
 *     fails 25P02, and its COMMIT answers 'ROLLBACK' without an error. Outside BEGIN each statement is its own
 *     transaction, at the default isolation;
 *   - node-postgres' answers: `command`, `rowCount`, bigint columns as strings.
 * What it does not emulate: serializable snapshot isolation's read/write dependencies (SERIALIZABLE behaves as
 * REPEATABLE READ: only the row conflicts above fail), deadlock detection (no 40P01: the fence takes one row lock per
 * transaction, `insert` takes none), two transactions inserting one key waiting on each other (the later one's COMMIT
 * fails 23505, or 40001 when optimistic), DDL inside a transaction (it applies at once), statement and lock timeouts, a
 * lost connection, DSQL's size and time limits, and SQL beyond the statements above. A connection released inside a
 * transaction rolls it back (node-postgres would hand it on still inside it).
 */
import type { PgPool, PgPoolClient, PgResult } from '../postgres/driver';
import { DEFAULT_TABLE, fenceStatements, fenceTableSql, ISOLATIONS, type Isolation } from '../postgres/sql';

/** How concurrent transactions meet: PostgreSQL's row locks, or Aurora DSQL's check at COMMIT. */
export type Concurrency = 'locking' | 'optimistic';

/** How the twin behaves where PostgreSQL leaves room. */
export interface MemoryPostgresOptions {
  /** @defaultValue 'locking' (PostgreSQL) */
  readonly concurrency?: Concurrency;
  /** The isolation of a plain BEGIN and of a statement outside BEGIN. @defaultValue 'read committed' */
  readonly defaultIsolation?: Isolation;
}

/** One committed version of a fence row: `seq` is the commit that wrote it. */
interface Version {
  readonly fence: number;
  readonly replaced: number | null;
  readonly seq: number;
}

/**
 * A transaction of the twin: explicit (BEGIN … COMMIT) or one statement's own.
 * @internal
 */
export class Tx {
  /** The commit sequence it sees (REPEATABLE READ, SERIALIZABLE, optimistic); undefined until its first statement. */
  snapshot: number | undefined;
  aborted = false;
  /** Fence rows it changed: row id → the row it will commit. */
  readonly changed = new Map<string, { readonly fence: number; readonly replaced: number | null }>();
  /** The caller's rows it inserted: table → key → row. */
  readonly inserts = new Map<string, Map<string, Record<string, unknown>>>();
  readonly locks = new Set<string>();

  constructor(
    readonly isolation: Isolation,
    readonly explicit: boolean,
  ) {}

  /** Statement-level snapshots: each statement sees the latest commits. */
  get readCommitted(): boolean {
    return this.isolation === 'read committed';
  }
}

/** An error as node-postgres reports a server's: its SQLSTATE in `code`. */
function pgError(code: string, message: string): Error & { code: string } {
  const err = Object.assign(new Error(message), { code, severity: 'ERROR' });
  err.name = 'DatabaseError';
  return err;
}

const TRANSACTION_CONTROL = /^(BEGIN|COMMIT|ROLLBACK)(?: ISOLATION LEVEL (READ COMMITTED|REPEATABLE READ|SERIALIZABLE))?$/;
/** The first table name of a statement, as the fence's statements quote it. */
const QUOTED_TABLE = /"([A-Za-z_][A-Za-z0-9_]*)"(?:\."([A-Za-z_][A-Za-z0-9_]*)")?/;
const answer = (command: string, rows: Record<string, unknown>[] = [], rowCount = rows.length): PgResult => ({ command, rowCount, rows });
const rowId = (table: string, key: string) => `${table}\u0000${key}`;

/** The twin: an in-memory PostgreSQL pool that runs the fence's statements (see the file's header). */
export class MemoryPostgres implements PgPool<MemoryPgClient> {
  readonly concurrency: Concurrency;
  readonly defaultIsolation: Isolation;
  /** The last commit's sequence number. */
  private seq = 0;
  /** Fence tables (by unquoted name) → key → committed versions, oldest first. */
  private readonly fences = new Map<string, Map<string, Version[]>>();
  /** The caller's tables → key → the committed row and the commit that wrote it. */
  private readonly records = new Map<string, Map<string, { readonly row: Record<string, unknown>; readonly seq: number }>>();
  /** Row locks: row id → the transaction holding it and the ones waiting, in order of arrival. */
  private readonly locks = new Map<string, { owner: Tx; readonly waiters: { readonly tx: Tx; readonly wake: () => void }[] }>();

  constructor(options: MemoryPostgresOptions = {}) {
    this.concurrency = options.concurrency ?? 'locking';
    this.defaultIsolation = options.defaultIsolation ?? 'read committed';
    if (!ISOLATIONS.includes(this.defaultIsolation)) throw new Error(`unknown isolation ${JSON.stringify(this.defaultIsolation)}`);
  }

  /** A connection of its own, for a transaction. */
  async connect(): Promise<MemoryPgClient> {
    await Promise.resolve();
    return new MemoryPgClient(this);
  }

  /** One statement on a connection taken for it and given back, as node-postgres' `pool.query` does. */
  async query(text: string, values?: readonly unknown[]): Promise<PgResult> {
    const client = await this.connect();
    try {
      return await client.query(text, values);
    } finally {
      client.release();
    }
  }

  /**
   * A fence row's committed versions, oldest first: each value it took and the commit that wrote it (the store's own
   * history, for a check that must not trust the code it checks).
   */
  fenceHistory(key: string, table: string = DEFAULT_TABLE): { readonly fence: number; readonly seq: number }[] {
    return (this.fences.get(table)?.get(key) ?? []).map((v) => ({ fence: v.fence, seq: v.seq }));
  }

  /** The caller's committed rows of `table`, each with its key and the commit that wrote it. */
  commits(table: string): { readonly key: string; readonly row: Record<string, unknown>; readonly seq: number }[] {
    return [...(this.records.get(table) ?? new Map()).entries()].map(([key, { row, seq }]) => ({ key, row: { ...row }, seq }));
  }

  /** The caller's committed rows of `table` (`insert`), each with its key. */
  rows(table: string): Record<string, unknown>[] {
    return [...(this.records.get(table) ?? new Map()).entries()].map(([key, { row }]) => ({ ...row, key }));
  }

  /** Statements waiting on a row lock the transaction of `client` holds. */
  blockedBy(client: MemoryPgClient): number {
    const tx = client.transaction;
    if (tx === undefined) return 0;
    return [...this.locks.values()].filter((l) => l.owner === tx).reduce((n, l) => n + l.waiters.length, 0);
  }

  /** @internal A transaction begun on a connection. */
  begin(isolation: Isolation | undefined, explicit: boolean): Tx {
    const tx = new Tx(isolation ?? this.defaultIsolation, explicit);
    if (this.concurrency === 'optimistic') tx.snapshot = this.seq; // DSQL takes its snapshot at BEGIN
    return tx;
  }

  /** @internal One statement (not transaction control) in `tx`. */
  async run(tx: Tx, text: string, values: readonly unknown[]): Promise<PgResult> {
    const created = /^CREATE TABLE IF NOT EXISTS /.test(text) ? this.tableOf(text) : undefined;
    if (created !== undefined) {
      if (text !== fenceTableSql(created)) throw refused(text);
      if (!this.fences.has(created)) this.fences.set(created, new Map());
      return answer('CREATE', [], 0);
    }
    const table = this.tableOf(text);
    if (table === undefined) throw refused(text);
    const sql = fenceStatements(table);
    if (![sql.raise, sql.update, sql.read].includes(text)) throw refused(text);
    if (!this.fences.has(table)) throw pgError('42P01', `relation "${table}" does not exist`);
    if (tx.snapshot === undefined && !tx.readCommitted) tx.snapshot = this.seq; // the first statement's snapshot
    const [key, token] = [String(values[0]), Number(values[1])];
    if (text === sql.read) {
      const row = this.visible(tx, table, key);
      return answer('SELECT', row ? [{ fence: String(row.fence) }] : []);
    }
    return text === sql.raise ? this.raise(tx, table, key, token) : this.update(tx, table, key, token);
  }

  /** The raise's upsert: insert, or move the fence up; refused, no row, the row still locked (PostgreSQL locks it either way). */
  private async raise(tx: Tx, table: string, key: string, token: number): Promise<PgResult> {
    const id = rowId(table, key);
    let base: { readonly fence: number; readonly replaced: number | null } | undefined = tx.changed.get(id);
    if (base === undefined) {
      if (this.concurrency === 'locking') {
        // The conflicting row is locked (waited for) and the WHERE evaluated on its latest version; at REPEATABLE READ
        // and SERIALIZABLE a version committed after the snapshot is refused instead.
        await this.lock(tx, id);
        const latest = this.latest(table, key);
        if (latest !== undefined && !tx.readCommitted && latest.seq > tx.snapshot!) throw concurrentUpdate();
        base = latest;
      } else base = this.visible(tx, table, key);
    }
    if (base !== undefined && base.fence > token) return answer('INSERT', [], 0);
    const replaced = base === undefined ? null : base.fence;
    tx.changed.set(id, { fence: token, replaced });
    return answer('INSERT', [{ replaced: replaced === null ? null : String(replaced) }]);
  }

  /** The fenced UPDATE: 1 row when the fence accepts the token, else 0 (not an error). */
  private async update(tx: Tx, table: string, key: string, token: number): Promise<PgResult> {
    const id = rowId(table, key);
    const own = tx.changed.get(id);
    const accept = (row: { readonly replaced: number | null }) => {
      tx.changed.set(id, { fence: token, replaced: row.replaced });
      return answer('UPDATE', [], 1);
    };
    if (own !== undefined) return own.fence <= token ? accept(own) : answer('UPDATE', [], 0);
    const seen = this.visible(tx, table, key);
    if (seen === undefined || seen.fence > token) return answer('UPDATE', [], 0); // nothing to update: no lock, no wait
    if (this.concurrency === 'optimistic') return accept(seen);
    await this.lock(tx, id);
    const latest = this.latest(table, key)!;
    if (latest.seq === seen.seq) return accept(latest);
    if (!tx.readCommitted) throw concurrentUpdate();
    // READ COMMITTED: the WHERE re-checked on the row as committed now; refused, the row stays locked (as PostgreSQL's).
    return latest.fence <= token ? accept(latest) : answer('UPDATE', [], 0);
  }

  /** @internal The caller's write: a row of `table` under `key`, unique by key. */
  insert(tx: Tx, table: string, key: string, row: Record<string, unknown>): void {
    const mine = tx.inserts.get(table) ?? new Map<string, Record<string, unknown>>();
    if (mine.has(key) || this.records.get(table)?.has(key)) throw pgError('23505', `duplicate key value violates unique constraint "${table}_pkey"`);
    tx.inserts.set(table, mine.set(key, { ...row }));
  }

  /** @internal COMMIT: apply what `tx` changed as one commit, or fail (40001, 23505) and apply nothing. */
  commit(tx: Tx): string {
    if (tx.aborted) return this.end(tx, 'ROLLBACK');
    for (const [id] of tx.changed) {
      const [table, key] = id.split('\u0000');
      if (this.concurrency === 'optimistic' && (this.latest(table, key)?.seq ?? 0) > tx.snapshot!) {
        this.end(tx);
        throw pgError('40001', 'change conflicts with another transaction, please retry: (OC000)');
      }
    }
    for (const [table, rows] of tx.inserts) {
      for (const key of rows.keys()) {
        const other = this.records.get(table)?.get(key);
        if (other === undefined) continue;
        this.end(tx);
        if (this.concurrency === 'optimistic' && other.seq > tx.snapshot!)
          throw pgError('40001', 'change conflicts with another transaction, please retry: (OC000)');
        throw pgError('23505', `duplicate key value violates unique constraint "${table}_pkey"`);
      }
    }
    const seq = ++this.seq;
    for (const [id, row] of tx.changed) {
      const [table, key] = id.split('\u0000');
      const versions = this.fences.get(table)!;
      versions.set(key, [...(versions.get(key) ?? []), { ...row, seq }]);
    }
    for (const [table, rows] of tx.inserts) {
      const committed = this.records.get(table) ?? new Map();
      for (const [key, row] of rows) committed.set(key, { row, seq });
      this.records.set(table, committed);
    }
    return this.end(tx, 'COMMIT');
  }

  /** @internal End `tx` (ROLLBACK, or after its commit): its changes dropped, its locks handed to the next waiter. */
  end(tx: Tx, command = 'ROLLBACK'): string {
    tx.changed.clear();
    tx.inserts.clear();
    for (const id of [...tx.locks]) this.unlock(tx, id);
    return command;
  }

  /** The latest committed version of a fence row. */
  private latest(table: string, key: string): Version | undefined {
    return this.fences.get(table)?.get(key)?.at(-1);
  }

  /** The fence row as `tx` sees it: its own change, else the latest commit (READ COMMITTED) or its snapshot's. */
  private visible(
    tx: Tx,
    table: string,
    key: string,
  ): { readonly fence: number; readonly replaced: number | null; readonly seq?: number } | undefined {
    const own = tx.changed.get(rowId(table, key));
    if (own !== undefined) return own;
    const versions = this.fences.get(table)?.get(key) ?? [];
    return tx.readCommitted && this.concurrency === 'locking' ? versions.at(-1) : versions.filter((v) => v.seq <= tx.snapshot!).at(-1);
  }

  /** Take the row lock, waiting behind its holder and earlier waiters. */
  private async lock(tx: Tx, id: string): Promise<void> {
    const held = this.locks.get(id);
    if (held === undefined) this.locks.set(id, { owner: tx, waiters: [] });
    else if (held.owner !== tx) await new Promise<void>((wake) => held.waiters.push({ tx, wake }));
    tx.locks.add(id);
  }

  /** Give the row lock to the first waiter, if any. */
  private unlock(tx: Tx, id: string): void {
    tx.locks.delete(id);
    const held = this.locks.get(id);
    if (held?.owner !== tx) return;
    const next = held.waiters.shift();
    if (next === undefined) this.locks.delete(id);
    else {
      held.owner = next.tx;
      next.wake();
    }
  }

  /** The fence table a statement names (unquoted), if it names one. */
  private tableOf(text: string): string | undefined {
    const m = QUOTED_TABLE.exec(text);
    return m === null ? undefined : m[2] === undefined ? m[1] : `${m[1]}.${m[2]}`;
  }
}

const concurrentUpdate = () => pgError('40001', 'could not serialize access due to concurrent update');
const refused = (text: string) => new Error(`the PostgreSQL twin runs only the fence's statements, not: ${text.slice(0, 120)}`);

/** A connection of the twin: the fence's statements through `query`, the caller's writes through `insert`. */
export class MemoryPgClient implements PgPoolClient {
  private tx: Tx | undefined;
  private released = false;

  constructor(private readonly db: MemoryPostgres) {}

  /** @internal Its open transaction (BEGIN … COMMIT), if any. */
  get transaction(): Tx | undefined {
    return this.tx;
  }

  async query(text: string, values: readonly unknown[] = []): Promise<PgResult> {
    if (this.released) throw new Error('the connection was released to the pool');
    await Promise.resolve(); // a statement is a round trip: others may run meanwhile
    const control = TRANSACTION_CONTROL.exec(text);
    if (control !== null) return this.control(control[1], control[2]?.toLowerCase() as Isolation | undefined);
    return this.inTransaction((tx) => this.db.run(tx, text, values));
  }

  /** The caller's write, in this connection's transaction (or one of its own): `row` of `table` under `key`. */
  async insert(table: string, key: string, row: Record<string, unknown> = {}): Promise<void> {
    if (this.released) throw new Error('the connection was released to the pool');
    await Promise.resolve();
    await this.inTransaction(async (tx) => this.db.insert(tx, table, key, row));
  }

  release(): void {
    if (this.tx !== undefined) this.db.end(this.tx);
    this.tx = undefined;
    this.released = true;
  }

  /** BEGIN, COMMIT or ROLLBACK. Outside a transaction COMMIT and ROLLBACK only warn, as PostgreSQL does. */
  private control(verb: string, isolation: Isolation | undefined): PgResult {
    if (verb === 'BEGIN') {
      this.tx ??= this.db.begin(isolation, true); // inside one already: a warning, nothing changes
      return answer('BEGIN', [], 0);
    }
    const tx = this.tx;
    this.tx = undefined;
    if (tx === undefined) return answer(verb, [], 0);
    return answer(verb === 'COMMIT' ? this.db.commit(tx) : this.db.end(tx), [], 0);
  }

  /** Run `step` in the open transaction (a failure aborts it), or in one of its own that commits after it. */
  private async inTransaction<T>(step: (tx: Tx) => Promise<T>): Promise<T> {
    const tx = this.tx ?? this.db.begin(undefined, false);
    if (tx.aborted) throw pgError('25P02', 'current transaction is aborted, commands ignored until end of transaction block');
    try {
      const out = await step(tx);
      if (!tx.explicit) this.db.commit(tx);
      return out;
    } catch (err) {
      tx.aborted = true;
      this.db.end(tx);
      throw err;
    }
  }
}

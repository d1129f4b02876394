/**
 * The PostgreSQL fence (lib/postgres/), one suite on two pools: a real PostgreSQL server (Debian's postgresql, started
 * once per run by test/run.ts, or by this file run alone: test/support/postgres.ts) and the in-memory twin
 * (lib/testing/postgres-fence.ts). Each test pins a behaviour of PostgreSQL the fence relies on, names the page that
 * documents it, and runs the real PostgresFence on both, so the twin cannot drift from what the server does. The twin's
 * Aurora DSQL mode, which no server here runs, is pinned last against DSQL's own page.
 * Sources:
 *   [ISO]     13.2 Transaction Isolation (READ COMMITTED waits for the first updater, then re-evaluates its WHERE on the
 *             updated row; REPEATABLE READ and SERIALIZABLE fail with "could not serialize access due to concurrent
 *             update" instead): https://www.postgresql.org/docs/current/transaction-iso.html
 *   [RETRY]   13.5 Serialization Failure Handling (40001 and 40P01 are worth retrying, the complete transaction):
 *             https://www.postgresql.org/docs/current/mvcc-serialization-failure-handling.html
 *   [INSERT]  INSERT, ON CONFLICT DO UPDATE (an atomic INSERT or UPDATE outcome; its WHERE: only rows for which it is
 *             true are updated, though all are locked; the table's alias; RETURNING): https://www.postgresql.org/docs/current/sql-insert.html
 *   [UPDATE]  UPDATE, Outputs ("UPDATE count": the rows updated, possibly 0): https://www.postgresql.org/docs/current/sql-update.html
 *   [LOCK]    13.3 Explicit Locking (row-level locks held to the transaction's end; deadlocks detected and one
 *             transaction aborted): https://www.postgresql.org/docs/current/explicit-locking.html
 *   [STATS]   pg_stat_activity's wait_event_type 'Lock': https://www.postgresql.org/docs/current/monitoring-stats.html ;
 *             pg_blocking_pids: https://www.postgresql.org/docs/current/functions-info.html
 *   [ERR]     Appendix A, PostgreSQL Error Codes (40001, 40P01, 25P02, 42P01, 23505): https://www.postgresql.org/docs/current/errcodes-appendix.html
 *   [TX]      3.4 Transactions (an error inside a transaction block rolls the block back; the docs do not name the
 *             COMMIT's 'ROLLBACK' tag, pinned here as the server answers): https://www.postgresql.org/docs/current/tutorial-transactions.html
 *   [IDENT]   4.1.1 Identifiers and Key Words (quoted identifiers, case kept; 63 bytes): https://www.postgresql.org/docs/current/sql-syntax-lexical.html
 *   [DSQL]    Aurora DSQL, Concurrency control (no locks; a snapshot at BEGIN; conflicts at COMMIT, SQLSTATE 40001):
 *             https://docs.aws.amazon.com/aurora-dsql/latest/userguide/working-with-concurrency-control.html
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Pool } from 'pg';
import { ConfigError, FenceNotRaisedError, FencedOutError } from '../../lib/core/errors';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import { systemClock, type Clock } from '../../lib/core/clock';
import { postgresFence, type FenceHolder, type PostgresFence, type PostgresFenceOptions } from '../../lib/postgres/fence';
import { fenceStatements, fenceTableSql } from '../../lib/postgres/sql';
import { writeInBatches } from '../../lib/postgres/batches';
import { TransactionAbortedError } from '../../lib/postgres/errors';
import { sqlState, type PgPool, type PgPoolClient } from '../../lib/postgres/driver';
import { MemoryPostgres, type MemoryPgClient } from '../../lib/testing/postgres-fence';
import { postgresPool, postgresUrl, uniqueName } from '../support/postgres';
import { namespace } from '../support/stack';

/** One statement the fence sent, and the SQLSTATE it failed with, if it failed. */
interface Sent {
  readonly text: string;
  readonly values: readonly unknown[];
  readonly code?: string;
}

/** A fence table and a table of the caller's rows, on one pool, for one test. */
interface World {
  /** A fence on `key`, on a pool that records what it sends in `sent`. */
  fence(key: string, options?: Partial<PostgresFenceOptions>): PostgresFence;
  /** What the fences sent, in order. */
  readonly sent: Sent[];
  /** Run a statement of the test's own (DDL), not recorded. */
  run(text: string): Promise<void>;
  /** Make a schema (the twin keeps none: a qualified name is a name to it). */
  createSchema(name: string): Promise<void>;
  /** The fence table's name. */
  readonly table: string;
  /** The caller's write, inside the transaction `client` runs. */
  write(client: PgPoolClient, id: string, token: number): Promise<void>;
  /** The caller's rows as committed, by id. */
  rows(): Promise<{ id: string; token: number }[]>;
  /** How many statements wait on a row lock the transaction of `client` holds (the server's own view of it). */
  waitingOn(client: PgPoolClient): Promise<number>;
}

interface Subject {
  readonly name: string;
  world(): Promise<World>;
  /** It detects deadlocks (the twin does not: lib/testing/postgres-fence.ts). */
  readonly deadlocks: boolean;
}

/** A pool that records what goes through it (on its connections too) and the SQLSTATE of each failure. */
function recorded<C extends PgPoolClient>(pool: PgPool<C>, sent: Sent[]): PgPool<C> {
  const record =
    (query: PgPoolClient['query']): PgPoolClient['query'] =>
    async (text, values = []) => {
      try {
        const r = await query(text, values);
        sent.push({ text, values });
        return r;
      } catch (err) {
        sent.push({ text, values, code: sqlState(err) });
        throw err;
      }
    };
  const wrap = <T extends PgPoolClient | PgPool<C>>(target: T): T =>
    new Proxy(target, {
      get: (t, prop) => {
        if (prop === 'query') return record((text, values) => t.query(text, values));
        if (prop === 'connect') return async () => wrap(await (t as PgPool<C>).connect());
        const v: unknown = Reflect.get(t, prop, t);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  return wrap(pool);
}

const subjects: Subject[] = [
  {
    name: 'a real PostgreSQL server',
    deadlocks: true,
    world: async () => {
      const pool: Pool = await postgresPool(8);
      const [table, items] = [uniqueName('fences'), uniqueName('items')];
      await pool.query(fenceTableSql(table));
      await pool.query(`CREATE TABLE "${items}" (id text PRIMARY KEY, token bigint NOT NULL)`);
      const sent: Sent[] = [];
      const spied = recorded(pool, sent);
      return {
        table,
        sent,
        run: async (text) => void (await pool.query(text)),
        createSchema: async (name) => void (await pool.query(`CREATE SCHEMA "${name}"`)),
        fence: (key, options = {}) => postgresFence({ pool: spied, key, table, ...options }),
        write: async (client, id, token) => void (await client.query(`INSERT INTO "${items}" (id, token) VALUES ($1, $2)`, [id, token])),
        rows: async () =>
          (await pool.query(`SELECT id, token FROM "${items}" ORDER BY id`)).rows.map((r: { id: string; token: string }) => ({
            id: r.id,
            token: Number(r.token),
          })),
        waitingOn: async (client) => {
          const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
          const waiting = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))`;
          return (await pool.query(waiting, [pid])).rows[0].n as number;
        },
      };
    },
  },
  {
    name: 'the in-memory twin',
    deadlocks: false,
    world: async () => {
      const twin = new MemoryPostgres();
      const [table, items] = [uniqueName('fences'), uniqueName('items')];
      await twin.query(fenceTableSql(table));
      const sent: Sent[] = [];
      const spied = recorded(twin, sent);
      return {
        table,
        sent,
        run: async (text) => void (await twin.query(text)),
        createSchema: async () => undefined,
        fence: (key, options = {}) => postgresFence({ pool: spied as PgPool, key, table, ...options }),
        write: (client, id, token) => (client as MemoryPgClient).insert(items, id, { token }),
        rows: async () => twin.rows(items).map((r) => ({ id: String(r.key), token: Number(r.token) })),
        waitingOn: async (client) => twin.blockedBy(client as MemoryPgClient),
      };
    },
  },
];

const holder = (token: number): FenceHolder => ({ token });

/** A promise and the function that settles it. */
function deferred<T = void>(): { readonly promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** `promise`, and whether it has settled yet (without an unhandled rejection meanwhile). */
function watched<T>(promise: Promise<T>): { readonly promise: Promise<T>; settled(): boolean } {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  return { promise, settled: () => done };
}

/** Wait until the server reports a statement waiting on the row lock `client`'s transaction holds: polled, never slept on. */
async function blockedBehind(world: World, client: PgPoolClient, limitMs = 10_000): Promise<void> {
  const started = performance.now();
  while ((await world.waitingOn(client)) < 1) {
    if (performance.now() - started > limitMs) assert.fail(`no statement waited on the lock within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A clock whose sleeps return at once and are recorded: the backoff's waits, without waiting. */
function instantClock(): Clock & { readonly sleeps: number[] } {
  const sleeps: number[] = [];
  return { ...systemClock, sleeps, sleep: async (ms) => void sleeps.push(ms) };
}

const isFencedOut = (token: number, fence: number) => (err: unknown) =>
  err instanceof FencedOutError && err.token === token && err.fence === fence && err.resource === 'fence';

for (const subject of subjects) {
  describe(subject.name, () => {
    test('raise moves the fence only up and answers with the fence it replaced; an equal token is accepted, a lower one refused with the fence it met [INSERT]', async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      assert.equal(await fence.read(), undefined, 'never raised');
      assert.equal(await fence.held(holder(3)).raise(), undefined, 'the first raise creates the fence');
      assert.equal(await fence.held(holder(5)).raise(), 3, 'a higher token moves it up, answering with what it replaced');
      assert.equal(await fence.held(holder(5)).raise(), 5, 'an equal token is accepted: a raise sent again is harmless');
      await assert.rejects(fence.held(holder(4)).raise(), isFencedOut(4, 5), 'a lower token is refused with the fence it met');
      assert.equal(await fence.read(), 5, 'the refused raise changed nothing');
      assert.equal(await world.fence('job-2').held(holder(1)).raise(), undefined, 'another key is another fence');
    });

    test("a fenced transaction commits the caller's writes only while the fence accepts its token; a 0-row UPDATE is a refusal, and nothing of its transaction is written [UPDATE]", async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      await fence.held(holder(5)).raise();
      const out = await fence.held(holder(5)).transaction(async (client) => {
        await world.write(client, 'a', 5);
        await world.write(client, 'b', 5);
        return 'written';
      });
      assert.equal(out, 'written', "the work's value, once committed");
      await fence.held(holder(6)).transaction((client) => world.write(client, 'c', 6));
      assert.equal(await fence.read(), 6, 'a higher token moves the fence in the same transaction (UPDATE … SET fence = token)');
      await fence.held(holder(8)).raise(); // a newer holder
      let ran = false;
      await assert.rejects(
        fence.held(holder(6)).transaction(async (client) => ((ran = true), world.write(client, 'late', 6))),
        isFencedOut(6, 8),
      );
      assert.equal(ran, false, 'refused at the UPDATE: the work never ran');
      assert.deepEqual(await world.rows(), [
        { id: 'a', token: 5 },
        { id: 'b', token: 5 },
        { id: 'c', token: 6 },
      ]);
      const update = world.sent.filter((s) => s.text.startsWith('UPDATE')).at(-1)!;
      assert.deepEqual([update.values, update.code], [['job-1', 6], undefined], 'the refused UPDATE was an answer (0 rows), not an error');
    });

    test('a fence nobody raised refuses every transaction with FenceNotRaisedError: the UPDATE finds no row, nothing is written [UPDATE]', async () => {
      const world = await subject.world();
      await assert.rejects(
        world
          .fence('never')
          .held(holder(1))
          .transaction((client) => world.write(client, 'x', 1)),
        (err) => err instanceof FenceNotRaisedError && err.token === 1,
      );
      assert.deepEqual(await world.rows(), []);
    });

    test("an error of the work rolls the whole transaction back, the fence's UPDATE with it, and is thrown as it is [TX]", async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      await fence.held(holder(5)).raise();
      const boom = new Error('the work failed');
      await assert.rejects(
        fence.held(holder(7)).transaction(async (client) => {
          await world.write(client, 'x', 7);
          throw boom;
        }),
        (err) => err === boom,
      );
      assert.deepEqual(await world.rows(), []);
      assert.equal(await fence.read(), 5, 'the UPDATE to 7 was rolled back with the rest');
    });

    test("a statement that failed inside the work, its error caught by the work, aborts the transaction: COMMIT answers 'ROLLBACK', TransactionAbortedError, nothing written [TX][ERR]", async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      await fence.held(holder(5)).raise();
      await assert.rejects(
        fence.held(holder(5)).transaction(async (client) => {
          await world.write(client, 'x', 5);
          const duplicate = await world.write(client, 'x', 5).catch((err: unknown) => sqlState(err));
          assert.equal(duplicate, '23505', 'unique_violation');
          const after = await world.write(client, 'y', 5).catch((err: unknown) => sqlState(err));
          assert.equal(after, '25P02', 'in_failed_sql_transaction: the transaction is aborted');
        }),
        (err) => err instanceof TransactionAbortedError && err.token === 5,
      );
      assert.deepEqual(await world.rows(), [], 'nothing of the aborted transaction, not even the write before the failure');
      assert.ok(
        world.sent.some((s) => s.text === 'COMMIT' && s.code === undefined),
        'the COMMIT itself did not fail: it answered ROLLBACK',
      );
    });

    test('READ COMMITTED: a raise while a fenced transaction holds the fence row waits on its lock (the server reports it waiting), then re-checks against what that transaction committed [ISO][LOCK][STATS]', async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      await fence.held(holder(5)).raise();
      const [inside, go] = [deferred<PgPoolClient>(), deferred()];
      const a = fence.held(holder(5)).transaction(async (client) => {
        await world.write(client, 'a1', 5);
        inside.resolve(client); // the UPDATE has run: this transaction holds the fence row
        await go.promise;
        await world.write(client, 'a2', 5);
        return 'A';
      });
      const client = await inside.promise;
      const b = watched(fence.held(holder(6)).raise());
      await blockedBehind(world, client);
      assert.equal(b.settled(), false, "the newer holder's raise has not returned: it waits on the row lock");
      go.resolve();
      assert.equal(await a, 'A', 'the open transaction commits: the raise did not pass it');
      assert.equal(await b.promise, 5, 'the raise then lands on the committed row, answering with its fence, 5');
      assert.equal(await fence.read(), 6);
      assert.deepEqual(
        (await world.rows()).map((r) => r.id),
        ['a1', 'a2'],
      );
      assert.ok(!world.sent.some((s) => s.code !== undefined), 'no statement failed: READ COMMITTED waits and re-checks');
    });

    test('READ COMMITTED: a fenced transaction whose UPDATE waited on a higher holder re-checks against it, and is refused with the fence that refused it, not the one it saw before waiting [ISO][UPDATE]', async () => {
      const world = await subject.world();
      const fence = world.fence('job-1');
      await fence.held(holder(4)).raise();
      const [inside, go] = [deferred<PgPoolClient>(), deferred()];
      const a = fence.held(holder(6)).transaction(async (client) => {
        inside.resolve(client); // its UPDATE set the fence to 6, not yet committed
        await go.promise;
        await world.write(client, 'six', 6);
      });
      const client = await inside.promise;
      let ran = false;
      const b = watched(fence.held(holder(5)).transaction(async (c) => ((ran = true), world.write(c, 'five', 5))));
      await blockedBehind(world, client);
      go.resolve();
      await a;
      await assert.rejects(b.promise, isFencedOut(5, 6), 'it saw 4 before waiting; 6 refused it');
      assert.equal(ran, false);
      assert.deepEqual(await world.rows(), [{ id: 'six', token: 6 }]);
    });

    test('SERIALIZABLE: a raise that waited on a fenced transaction fails with a serialization failure (40001) once that commits, and is sent again with the same token, which lands [ISO][RETRY][ERR]', async () => {
      const world = await subject.world();
      const clock = instantClock();
      const fence = world.fence('job-1', { isolation: 'serializable', clock });
      await fence.held(holder(5)).raise();
      const [inside, go] = [deferred<PgPoolClient>(), deferred()];
      const a = fence.held(holder(5)).transaction(async (client) => {
        inside.resolve(client);
        await go.promise;
        await world.write(client, 'a', 5);
      });
      const client = await inside.promise;
      const b = watched(fence.held(holder(6)).raise());
      await blockedBehind(world, client);
      go.resolve();
      await a;
      assert.equal(await b.promise, 5, 'the second send lands on the committed row');
      const raises = world.sent.filter((s) => s.text.startsWith(`INSERT INTO "${world.table}"`));
      assert.deepEqual(
        raises.map((s) => [s.values[1], s.code]),
        [
          [5, undefined],
          [6, '40001'],
          [6, undefined],
        ],
        'the raise at 6 met 40001 and was sent again with the same token',
      );
      assert.equal(clock.sleeps.length, 1, 'one backoff, on the injected clock');
      assert.ok(clock.sleeps[0] >= 0 && clock.sleeps[0] < DEFAULT_BACKOFF.baseMs, `the first backoff is under ${DEFAULT_BACKOFF.baseMs} ms`);
    });

    test('SERIALIZABLE: a fenced transaction that met a serialization failure is sent again with the same token, and the fence that committed meanwhile refuses it; its work never ran [ISO][RETRY]', async () => {
      const world = await subject.world();
      const clock = instantClock();
      const fence = world.fence('job-1', { isolation: 'serializable', clock });
      await fence.held(holder(5)).raise();
      const [inside, go] = [deferred<PgPoolClient>(), deferred()];
      const a = fence.held(holder(7)).transaction(async (client) => {
        inside.resolve(client);
        await go.promise;
        await world.write(client, 'seven', 7);
      });
      const client = await inside.promise;
      let runs = 0;
      const b = watched(fence.held(holder(6)).transaction(async (c) => (runs++, world.write(c, 'six', 6))));
      await blockedBehind(world, client);
      go.resolve();
      await a;
      await assert.rejects(b.promise, isFencedOut(6, 7));
      assert.equal(runs, 0);
      const updates = world.sent.filter((s) => s.text.startsWith('UPDATE') && s.values[1] === 6);
      assert.deepEqual(
        updates.map((s) => s.code),
        ['40001', undefined],
        'sent twice with token 6: a serialization failure, then 0 rows',
      );
      assert.deepEqual(await world.rows(), [{ id: 'seven', token: 7 }]);
    });

    test(
      'a deadlock between two fenced transactions (their work takes two rows in opposite orders) is broken by the server (40P01), and the transaction it aborted is sent again: both commit [LOCK][RETRY]',
      { skip: subject.deadlocks ? false : 'the twin does not detect deadlocks (lib/testing/postgres-fence.ts)' },
      async () => {
        const world = await subject.world();
        const [one, two] = [world.fence('job-1'), world.fence('job-2')]; // the real backoff: resends spread by its jitter
        await one.held(holder(1)).raise();
        await two.held(holder(1)).raise();
        const pool = await postgresPool(2);
        const counters = uniqueName('counters');
        await pool.query(`CREATE TABLE "${counters}" (id text PRIMARY KEY, n int NOT NULL)`);
        await pool.query(`INSERT INTO "${counters}" VALUES ('r1', 0), ('r2', 0)`);
        const bump = (client: PgPoolClient, id: string) => client.query(`UPDATE "${counters}" SET n = n + 1 WHERE id = $1`, [id]);
        const [firstTaken, secondTaken] = [deferred(), deferred()];
        const [a, b] = await Promise.all([
          one.held(holder(1)).transaction(async (c) => {
            await bump(c, 'r1');
            firstTaken.resolve();
            await secondTaken.promise;
            await bump(c, 'r2');
            return 'A';
          }),
          two.held(holder(1)).transaction(async (c) => {
            await bump(c, 'r2');
            secondTaken.resolve();
            await firstTaken.promise;
            await bump(c, 'r1');
            return 'B';
          }),
        ]);
        assert.deepEqual([a, b], ['A', 'B'], 'both committed');
        // Usually one deadlock. On a loaded machine the resent transaction can take a row back before the other one's
        // backend, woken by the abort, has run, and the two deadlock again: each is broken and resent likewise.
        const codes = world.sent.flatMap((s) => s.code ?? []);
        assert.ok(codes.length >= 1 && codes.every((c) => c === '40P01'), `deadlocks broken by the server, and resent: ${codes.join(', ')}`);
        const rows = (await pool.query(`SELECT id, n FROM "${counters}" ORDER BY id`)).rows;
        assert.deepEqual(rows, [
          { id: 'r1', n: 2 },
          { id: 'r2', n: 2 },
        ]);
      },
    );

    test('retries are bounded: a transaction that keeps meeting serialization failures is sent DEFAULT_BACKOFF.retries + 1 times, each with the same token, then the failure is thrown [RETRY]', async () => {
      const world = await subject.world();
      const clock = instantClock();
      const fence = world.fence('job-1', { clock });
      await fence.held(holder(5)).raise();
      let runs = 0;
      const conflict = Object.assign(new Error('could not serialize access due to read/write dependencies among transactions'), { code: '40001' });
      await assert.rejects(
        fence.held(holder(5)).transaction(async () => {
          runs++;
          throw conflict;
        }),
        (err) => err === conflict,
      );
      assert.equal(runs, DEFAULT_BACKOFF.retries + 1);
      assert.equal(clock.sleeps.length, DEFAULT_BACKOFF.retries, 'a backoff between sends, none after the last');
      assert.ok(
        clock.sleeps.every((ms, i) => ms < Math.min(DEFAULT_BACKOFF.capMs, DEFAULT_BACKOFF.baseMs * 2 ** i)),
        `full jitter under min(cap, base × 2^retry): ${clock.sleeps.map((ms) => ms.toFixed(0)).join(', ')}`,
      );
      const tokens = new Set(world.sent.filter((s) => s.text.startsWith('UPDATE')).map((s) => s.values[1]));
      assert.deepEqual([...tokens], [5]);
      assert.deepEqual(await world.rows(), []);
    });

    test("the holder's check runs before every send after the first: a holder past its stop time sends nothing more [RETRY]", async () => {
      const world = await subject.world();
      const fence = world.fence('job-1', { clock: instantClock() });
      await fence.held(holder(5)).raise();
      const stop = new Error('stop time passed');
      let checks = 0;
      const lease: FenceHolder = {
        token: 5,
        check: () => {
          checks++;
          throw stop;
        },
      };
      let runs = 0;
      await assert.rejects(
        fence.held(lease).transaction(async () => {
          runs++;
          throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' });
        }),
        (err) => err === stop,
      );
      assert.deepEqual([runs, checks], [1, 1], "the first send is the caller's act; the check stopped the second");
    });

    test('the fence table is named exactly as written: a schema-qualified name, a reserved word, two cases are two tables; the DDL may run again [IDENT]', async () => {
      const world = await subject.world();
      const schema = uniqueName('s');
      await world.createSchema(schema);
      for (const name of ['Fences', 'user', 'User']) {
        await world.run(fenceTableSql(`${schema}.${name}`));
        await world.run(fenceTableSql(`${schema}.${name}`)); // IF NOT EXISTS: again, no error
      }
      const [lower, upper] = [world.fence('k', { table: `${schema}.user` }), world.fence('k', { table: `${schema}.User` })];
      assert.equal(await lower.held(holder(9)).raise(), undefined, 'a reserved word, quoted, is a name');
      assert.equal(await upper.read(), undefined, '"User" is another table than "user"');
      const fences = world.fence('k', { table: `${schema}.Fences` });
      assert.equal(await fences.held(holder(2)).raise(), undefined);
      assert.deepEqual([await fences.read(), await lower.read()], [2, 9]);
    });

    test('a fence whose table was never made: its statements fail with 42P01 (undefined_table), thrown as they are, not sent again [ERR]', async () => {
      const world = await subject.world();
      const fence = world.fence('k', { table: uniqueName('missing') });
      const undefinedTable = (err: unknown) => sqlState(err) === '42P01';
      await assert.rejects(fence.held(holder(1)).raise(), undefinedTable);
      await assert.rejects(
        fence.held(holder(1)).transaction(async () => 'never'),
        undefinedTable,
      );
      assert.equal(world.sent.filter((s) => s.code === '42P01').length, 2, 'each sent once');
    });
  });
}

for (const subject of subjects) {
  describe(`${subject.name}: many rows in fenced transactions (writeInBatches)`, () => {
    test('2,500 rows cut at 1,000 are three fenced transactions, each committed whole; a holder past its stop time sends no further cut; a fenced-out holder writes nothing', async () => {
      const world = await subject.world();
      const fence = world.fence('job-batches');
      const a = fence.held(holder(1));
      await a.raise();
      const write = async (client: PgPoolClient, cut: readonly string[]) => {
        for (const id of cut) await world.write(client, id, 1);
      };
      const ids = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${String(i).padStart(5, '0')}`);
      const commits = () => world.sent.filter((q) => q.text === 'COMMIT').length;
      assert.deepEqual(await writeInBatches(a, ids('r', 2_500), write), { transactions: 3, rows: [1_000, 1_000, 500] });
      assert.equal(commits(), 3, 'three COMMITs, as sent');
      assert.equal((await world.rows()).length, 2_500, 'every row, as committed');

      // The holder's check throws before the second cut (its stop time passed): the first cut stays, nothing more is sent.
      let checked = 0;
      const stop = () => {
        checked++;
        throw new Error('stop time passed');
      };
      await assert.rejects(writeInBatches(a, ids('s', 1_500), write, { maxRows: 600, check: stop }), /stop time passed/);
      assert.equal(checked, 1);
      assert.equal((await world.rows()).filter((r) => r.id.startsWith('s')).length, 600, 'the first cut only');

      // A newer holder raised the fence: the first cut is refused, nothing of it written, no second cut sent.
      await fence.held(holder(2)).raise();
      const before = world.sent.length;
      await assert.rejects(writeInBatches(a, ids('t', 1_500), write), isFencedOut(1, 2));
      assert.equal(world.sent.slice(before).filter((q) => /^BEGIN/.test(q.text)).length, 1, 'one transaction tried');
      assert.equal((await world.rows()).filter((r) => r.id.startsWith('t')).length, 0);
    });
  });
}

describe('the twin as Aurora DSQL (optimistic concurrency, no locks)', () => {
  test('a raise does not wait for an open fenced transaction; that transaction then fails at COMMIT (40001), is sent again with the same token, and is refused: nothing of either attempt is written [DSQL]', async () => {
    const twin = new MemoryPostgres({ concurrency: 'optimistic' });
    await twin.query(fenceTableSql());
    const sent: Sent[] = [];
    const fence = postgresFence({ pool: recorded(twin, sent), key: 'job-1', clock: instantClock() });
    await fence.held(holder(5)).raise();
    const [inside, go] = [deferred<MemoryPgClient>(), deferred()];
    let runs = 0;
    const a = watched(
      fence.held(holder(5)).transaction(async (client) => {
        runs++;
        await client.insert('items', `a${runs}`, { token: 5 });
        inside.resolve(client);
        await go.promise;
      }),
    );
    const client = await inside.promise;
    assert.equal(await fence.held(holder(6)).raise(), 5, 'the raise landed at once: nothing waits under optimistic concurrency');
    assert.equal(twin.blockedBy(client), 0);
    go.resolve();
    await assert.rejects(a.promise, isFencedOut(5, 6));
    assert.equal(runs, 1, 'the work ran once: the second send was refused at the UPDATE');
    assert.deepEqual(
      sent.filter((s) => s.code !== undefined).map((s) => [s.text, s.code]),
      [['COMMIT', '40001']],
      'the conflict surfaced at COMMIT',
    );
    assert.deepEqual(twin.rows('items'), []);
  });

  test("a transaction's snapshot is taken at BEGIN: a raise committed after BEGIN and before its UPDATE is not seen, and the COMMIT fails (40001) [DSQL]", async () => {
    const twin = new MemoryPostgres({ concurrency: 'optimistic' });
    await twin.query(fenceTableSql());
    const sql = fenceStatements('fencepost_fences');
    await twin.query(sql.raise, ['k', 5]);
    const client = await twin.connect();
    await client.query('BEGIN');
    await twin.query(sql.raise, ['k', 6]);
    const updated = await client.query(sql.update, ['k', 5]);
    assert.equal(updated.rowCount, 1, 'the snapshot of BEGIN still shows 5');
    await assert.rejects(client.query('COMMIT'), (err) => sqlState(err) === '40001');
    client.release();
    assert.equal((await twin.query(sql.read, ['k'])).rows[0].fence, '6');
  });
});

describe('options', () => {
  test('are checked at once, every problem listed, before anything is sent; a token is a whole number of at least 0', () => {
    const twin = new MemoryPostgres();
    assert.throws(
      () => postgresFence({ pool: {} as PgPool, key: '', table: 'a"; DROP TABLE b; --', isolation: 'snapshot' as 'serializable', resource: '' }),
      (err) => err instanceof ConfigError && err.problems.length === 5,
    );
    for (const table of ['a.b.c', '', '1abc', 'x'.repeat(64), 'sp ace'])
      assert.throws(() => postgresFence({ pool: twin, key: 'k', table }), ConfigError, JSON.stringify(table));
    assert.throws(() => fenceTableSql('bad"name'), ConfigError);
    const fence = postgresFence({ pool: twin, key: 'k' });
    for (const token of [-1, 1.5, Number.NaN, 2 ** 53]) assert.throws(() => fence.held(holder(token)), ConfigError, String(token));
    assert.equal(fence.held(holder(0)).token, 0);
  });
});

describe("the README's example (examples/postgres-fence.ts), a process of its own on the server and DynamoDB Local", () => {
  test('the first holder ships 100 rows at token 1; the next claims token 2, raises the fence and ships none again; a holder still at token 1 is refused, nothing written', async () => {
    const ns = await namespace(); // the lease's lock table
    const schema = uniqueName('readme');
    const pool = await postgresPool(2);
    await pool.query(`CREATE SCHEMA "${schema}"`);
    const url = new URL(await postgresUrl());
    url.searchParams.set('options', `-c search_path=${schema}`); // the example's tables, in this test's schema
    const env = {
      ...process.env,
      DYNAMODB_ENDPOINT: ns.endpoints.dynamodb,
      DATABASE_URL: url.toString(),
      TABLE_PREFIX: ns.prefix,
      NODE_NO_WARNINGS: '1',
    };
    const example = path.resolve(__dirname, '..', '..', 'examples', 'postgres-fence.ts');
    const run = async () => {
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', example, '2026-12-01'], { env, timeout: 60_000 });
      return JSON.parse(stdout.trim().split('\n').at(-1)!) as unknown;
    };
    assert.deepEqual(await run(), { token: 1, shipped: 100 });
    assert.deepEqual(await run(), { token: 2, shipped: 0 }, 'a redo: the rows are there, the fence moved to the new token');
    const late = postgresFence({ pool, key: 'shipping#2026-12-01', table: `${schema}.fencepost_fences` }).held(holder(1));
    await assert.rejects(
      late.transaction((c) => c.query(`INSERT INTO "${schema}".shipments VALUES ('late', 1)`)),
      isFencedOut(1, 2),
    );
    const { rows } = await pool.query(`SELECT count(*)::int AS n, min(token)::int AS lo, max(token)::int AS hi FROM "${schema}".shipments`);
    assert.deepEqual(rows, [{ n: 100, lo: 1, hi: 1 }]);
  });
});

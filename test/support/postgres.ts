/**
 * PostgreSQL for a test file: the run's server, whose connection string test/run.ts passes in FENCEPOST_TEST_POSTGRES
 * to the tiers that may use it, or, for a file run on its own, a server of its own (test/support/postgres-server.ts),
 * stopped after its last test. A file of a tier run without the stack is refused it, as it is refused DynamoDB Local.
 * Tests share the run's server: each names its tables with `uniqueName`.
 */
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Pool } from 'pg';
import { startPostgres, type LocalPostgres } from './postgres-server';

let own: Promise<LocalPostgres> | undefined;
const given = process.env.FENCEPOST_TEST_POSTGRES;
const pools: Pool[] = [];
// Registered at import, so it runs after the file's last test: the pools first (a server shut down under an idle
// connection makes its pool emit an error), then this file's own server.
after(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await (await own)?.stop();
});

/** The run's server (FENCEPOST_TEST_POSTGRES), or this file's own, started at the first call. */
export async function postgresUrl(): Promise<string> {
  const tier = process.env.FENCEPOST_TEST_NO_STACK;
  if (tier !== undefined)
    throw new Error(`a test in test/${tier}/ asked for PostgreSQL: files that need a server belong in test/store/ or test/process/`);
  if (given !== undefined) return given;
  own ??= startPostgres();
  return (await own).url;
}

/** A pool on the test server, ended after the file's last test (`max` connections). */
export async function postgresPool(max = 4): Promise<Pool> {
  const pool = new Pool({ connectionString: await postgresUrl(), max });
  // An idle connection the server drops (the run's server stopping) is an error of the pool's, not of a test.
  pool.on('error', (err) => process.stderr.write(`an idle PostgreSQL connection failed: ${err.message}\n`));
  pools.push(pool);
  return pool;
}

/** A name no other test uses (tests share the run's server): a prefix and 8 hex digits. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(4).toString('hex')}`;
}

// A fenced write to PostgreSQL: the lease hands out the token, and the fence, a row of a PostgreSQL table, checks it
// in the same transaction as the writes. A holder whose token is below the fence commits nothing (FencedOutError).
import { Pool } from 'pg';
import { awsStores, localClients, systemClock, tableNames, withLease } from 'fencepost';
import { fenceTableSql, postgresFence } from 'fencepost/postgres';

const pool = new Pool({ connectionString: process.env.DATABASE_URL });
const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const stores = awsStores(clients, tableNames(process.env.TABLE_PREFIX ?? 'shipping-')); // the lease's lock table
const day = process.argv[2] ?? '2026-12-01';

async function main(): Promise<void> {
  await pool.query(fenceTableSql()); // once, beside your migrations: CREATE TABLE IF NOT EXISTS "fencepost_fences" …
  await pool.query('CREATE TABLE IF NOT EXISTS shipments (id text PRIMARY KEY, token bigint NOT NULL)');
  const job = `shipping#${day}`;
  const summary = await withLease({ locks: stores.locks, clock: systemClock }, job, 'worker-1', {}, async (lease) => {
    const fence = postgresFence({ pool, key: job }).held(lease); // the fence, with this lease's token
    await lease.act(() => fence.raise()); // the fence first
    const shipped = await lease.act(() =>
      fence.transaction(async (client) => {
        // In the transaction that took the fence row: it commits only if no newer holder raised the fence first.
        const sql = "INSERT INTO shipments SELECT $1 || '#' || n, $2 FROM generate_series(1, 100) n ON CONFLICT (id) DO NOTHING";
        return (await client.query(sql, [day, lease.token])).rowCount;
      }),
    );
    return { token: lease.token, shipped };
  });
  console.log(JSON.stringify(summary));
}

main().finally(() => (clients.destroy(), pool.end()));

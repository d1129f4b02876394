// A FencedJob's chunk function that writes to PostgreSQL (docs/POSTGRES.md): the lease FencedJob hands the function
// carries the token; a fence of the chunk's own, in a table of your database, checks it in the transaction that writes.
import { Pool, type PoolClient } from 'pg';
import { fencedChunkHandler, required } from 'fencepost/lambda';
import { postgresFence } from 'fencepost/postgres';

// One connection per warm Lambda environment: a fenced transaction holds it from BEGIN to COMMIT.
const pool = new Pool({ connectionString: required(process.env, 'DATABASE_URL'), max: 1 });

export const handler = fencedChunkHandler(async ({ lease, chunk, date }) => {
  // A fence per chunk, so chunks run side by side without waiting on one row. Raised first, to the lease's token.
  const fence = postgresFence<PoolClient>({ pool, key: `report#${date}#${chunk}`, resource: 'report-chunk' }).held(lease);
  await lease.act(() => fence.raise());
  const lines = await lease.act(() =>
    fence.transaction(async (client) => {
      // Committed only if no newer holder raised this chunk's fence first; a redo finds its lines and adds none.
      const sql = 'INSERT INTO report_lines (id, token) SELECT $1 || n, $2 FROM generate_series(1, 250) n ON CONFLICT (id) DO NOTHING';
      return (await client.query(sql, [`${date}#${chunk}#`, lease.token])).rowCount ?? 0;
    }),
  );
  return { lines };
});

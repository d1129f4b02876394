/**
 * 15. The PostgreSQL fence's cost: a fenced transaction (BEGIN, the fence row's UPDATE, the work, COMMIT, through
 * `fencepost/postgres`) against the same work in a bare transaction (BEGIN, the work, COMMIT), on a throw-away
 * PostgreSQL server started for the measurement, side by side in the same rounds (the order rotated each round). The
 * work is one INSERT of 10 rows. The ratio is the figure; the times say what one costs on this machine.
 */
import { Pool } from 'pg';
import { systemClock } from '../lib/core/clock';
import { postgresFence } from '../lib/postgres/fence';
import { fenceTableSql } from '../lib/postgres/sql';
import { startPostgres } from '../test/support/postgres-server';
import { fmt, newReport, rotate, stat, table, type BenchContext, type Measurement } from './common';

const ROWS = 10;

export const postgres: Measurement = {
  name: 'postgres',
  title: '15. The PostgreSQL fence: a fenced transaction against a bare one, side by side',
  fullMinutes: 2,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const server = await startPostgres();
    const pool = new Pool({ connectionString: server.url, max: 2 });
    try {
      await pool.query(fenceTableSql());
      await pool.query('CREATE TABLE IF NOT EXISTS bench_rows (id text PRIMARY KEY, token bigint NOT NULL)');
      const fence = postgresFence({ pool, key: 'bench', clock: systemClock }).held({ token: 1 });
      await fence.raise();
      const transactions = ctx.quick ? 200 : 1_000;
      const insert = (n: number) => {
        const values = Array.from({ length: ROWS }, (_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ');
        const params = Array.from({ length: ROWS }, (_, i) => [`${n}#${i}`, 1]).flat();
        return { text: `INSERT INTO bench_rows (id, token) VALUES ${values}`, params };
      };
      let n = 0;
      const variants = {
        bare: async () => {
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            const { text, params } = insert(n++);
            await client.query(text, params);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        },
        fenced: async () => {
          const { text, params } = insert(n++);
          await fence.transaction(async (client) => void (await client.query(text, params)));
        },
      } as const;
      const ms: Record<keyof typeof variants, number[]> = { bare: [], fenced: [] };
      const rounds = Math.max(3, ctx.rounds);
      for (let r = 0; r < rounds; r++) {
        ctx.log(`postgres: round ${r + 1} of ${rounds}`);
        for (const v of rotate(['bare', 'fenced'] as const, r)) {
          const t0 = performance.now();
          for (let i = 0; i < transactions; i++) await variants[v]();
          ms[v].push((performance.now() - t0) / transactions);
        }
      }
      const [bare, fenced] = [stat(ms.bare), stat(ms.fenced)];
      const ratios = ms.fenced.map((f, i) => f / ms.bare[i]);
      report.blocks.push(
        table(
          ['transaction', 'ms each (median)', 'fastest round', 'slowest round'],
          [
            [`bare: BEGIN, INSERT ${ROWS} rows, COMMIT`, fmt(bare.median, 3), fmt(bare.min, 3), fmt(bare.max, 3)],
            [`fenced: BEGIN, the fence's UPDATE, INSERT ${ROWS} rows, COMMIT`, fmt(fenced.median, 3), fmt(fenced.min, 3), fmt(fenced.max, 3)],
          ],
        ),
        `fenced / bare, round by round: ${ratios.map((x) => fmt(x, 2)).join(', ')} (${transactions} transactions of each a round)`,
      );
      report.verdicts.push({
        measurement: this.name,
        what: 'a fenced PostgreSQL transaction against a bare one',
        figure: `${fmt(stat(ratios).median, 2)}×`,
        target: 'informational',
        met: undefined,
      });
      report.data.postgres = { transactions, rows: ROWS, bareMs: ms.bare, fencedMs: ms.fenced };
      return report;
    } finally {
      await pool.end();
      await server.stop();
    }
  },
};

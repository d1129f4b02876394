/**
 * Many rows through the PostgreSQL fence: cut into fenced transactions, each inside the limits of where it runs, and
 * written by the caller's own statements. On PostgreSQL a cut is a matter of taste (a transaction of 1,000 rows keeps
 * locks and WAL modest); on Aurora DSQL it is a rule: a transaction changes at most 3,000 rows (the fence row is one)
 * and 10 MiB, so a cut that crosses either is refused whole.
 */
import { ConfigError } from '../core/errors';
import { DSQL_LIMITS } from './dsql';
import type { PgPoolClient } from './driver';
import type { HeldPostgresFence } from './fence';

/** How `writeInBatches` cuts. */
export interface BatchOptions<R> {
  /**
   * Cut by Aurora DSQL's limits: at most 2,999 rows a transaction (the fence row's UPDATE is the 3,000th) and the
   * rows' size at most 10 MiB less `headroomBytes`. @defaultValue false (PostgreSQL)
   */
  readonly dsql?: boolean;
  /** Rows a transaction at most. @defaultValue 1,000 on PostgreSQL; 2,999 on DSQL (and never more there) */
  readonly maxRows?: number;
  /** A row's size in bytes, for the size limit. @defaultValue the UTF-8 length of its JSON */
  readonly sizeOf?: (row: R) => number;
  /** Room left under DSQL's 10 MiB for what `sizeOf` does not count (indexes, the fence row). @defaultValue 1 MiB */
  readonly headroomBytes?: number;
  /** Checked before each transaction after the first (a Lease's `check`): past the stop time, nothing more is sent. */
  readonly check?: () => void;
}

/** What `writeInBatches` did. */
export interface BatchesWritten {
  /** The fenced transactions committed, in order. */
  readonly transactions: number;
  /** The rows in each, in order. */
  readonly rows: readonly number[];
}

const DEFAULT_ROWS = 1_000;
const MIB = 1_048_576;
const jsonBytes = (row: unknown): number => Buffer.byteLength(JSON.stringify(row) ?? '', 'utf8');

/**
 * The cuts `rows` are written in: consecutive runs, each within the row and size limits.
 * @throws ConfigError naming a row too large for a transaction on its own, or a bad option (before anything is sent)
 */
export function cutBatches<R>(rows: readonly R[], options: BatchOptions<R> = {}): R[][] {
  const dsqlRows = DSQL_LIMITS.rowsPerTransaction - 1;
  const problems: string[] = [];
  const maxRows = options.maxRows ?? (options.dsql ? dsqlRows : DEFAULT_ROWS);
  if (!Number.isSafeInteger(maxRows) || maxRows < 1) problems.push(`maxRows must be a whole number of at least 1, got ${maxRows}`);
  else if (options.dsql && maxRows > dsqlRows)
    problems.push(`maxRows ${maxRows} is above Aurora DSQL's ${dsqlRows} rows a fenced transaction may change`);
  const headroom = options.headroomBytes ?? MIB;
  const maxBytes = options.dsql ? DSQL_LIMITS.bytesPerTransaction - headroom : Infinity;
  if (options.dsql && !(maxBytes > 0))
    problems.push(`headroomBytes ${headroom} leaves nothing of Aurora DSQL's ${DSQL_LIMITS.bytesPerTransaction} bytes`);
  const sizeOf = options.sizeOf ?? jsonBytes;
  const sizes = options.dsql ? rows.map(sizeOf) : [];
  sizes.forEach((size, i) => {
    if (size > maxBytes) problems.push(`row ${i} is ${size} bytes, more than a fenced transaction on Aurora DSQL may hold (${maxBytes})`);
  });
  if (problems.length > 0) throw new ConfigError(problems);
  const cuts: R[][] = [];
  let cut: R[] = [];
  let bytes = 0;
  rows.forEach((row, i) => {
    const size = options.dsql ? sizes[i] : 0;
    if (cut.length > 0 && (cut.length === maxRows || bytes + size > maxBytes)) {
      cuts.push(cut);
      [cut, bytes] = [[], 0];
    }
    cut.push(row);
    bytes += size;
  });
  if (cut.length > 0) cuts.push(cut);
  return cuts;
}

/**
 * Write `rows` through `fence` in fenced transactions, cut by `cutBatches`: each runs `write(client, cut)` after the
 * fenced UPDATE, and commits only while the fence accepts the holder's token. Write each row so that a redo finds it
 * (`INSERT … ON CONFLICT DO NOTHING` on its key): after a takeover the next holder writes them all again.
 * @throws ConfigError (before anything is sent); FencedOutError at the first cut a newer holder refuses (the cuts
 * before it are committed, none after it is sent); the holder's check; what `write` throws
 */
export async function writeInBatches<R, C extends PgPoolClient = PgPoolClient>(
  fence: HeldPostgresFence<C>,
  rows: readonly R[],
  write: (client: C, cut: readonly R[]) => Promise<void>,
  options: BatchOptions<R> = {},
): Promise<BatchesWritten> {
  const cuts = cutBatches(rows, options);
  const written: number[] = [];
  for (const cut of cuts) {
    if (written.length > 0) options.check?.();
    await fence.transaction((client) => write(client, cut));
    written.push(cut.length);
  }
  return { transactions: written.length, rows: written };
}

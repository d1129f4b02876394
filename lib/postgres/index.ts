/**
 * `fencepost/postgres`: the fence in a PostgreSQL table (PostgreSQL, Aurora PostgreSQL, Aurora DSQL), for a job whose
 * writes go to a database rather than to DynamoDB. Raise it first, then write inside its fenced transaction: a holder
 * whose token is below the fence commits nothing.
 *
 * It takes the caller's node-postgres `Pool` (an optional peer of the package) and never imports `pg` itself. The
 * token comes from the holder (`fence.held(lease)`: a Lease's epoch and stop-time check), as for the DynamoDB fence.
 *
 * @packageDocumentation
 */
export { PostgresFence, postgresFence, type FenceHolder, type HeldPostgresFence, type PostgresFenceOptions } from './fence';
export { fenceTableSql, type Isolation } from './sql';
export { DSQL_LIMITS } from './dsql';
export { cutBatches, writeInBatches, type BatchOptions, type BatchesWritten } from './batches';
export type { PgClient, PgPool, PgPoolClient, PgResult } from './driver';
export { TransactionAbortedError } from './errors';
// The core's errors this entry throws, and the type its options name: the same declarations as the `fencepost` entry's.
export { ConfigError, FencedOutError, FenceNotRaisedError, FencepostError } from '../core/errors';
export type { Clock } from '../core/clock';

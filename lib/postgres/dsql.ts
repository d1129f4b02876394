/**
 * Aurora DSQL's limits on one transaction (Aurora DSQL User Guide, "Cluster quotas and database limits"). They bind the
 * fenced transaction, which is one transaction: the fence row's UPDATE counts among its rows, so the work may change at
 * most 2,999 more. Past a limit DSQL refuses the transaction and nothing of it is written; past the time it ends it.
 * DSQL has no row locks: a concurrent raise does not wait, the later COMMIT fails with 40001 and the fence sends the
 * transaction again, so a transaction close to 5 minutes that keeps meeting conflicts may never commit. Cut a chunk's
 * writes into transactions well inside these.
 */
export const DSQL_LIMITS = {
  /** Rows a transaction may insert, update or delete. */
  rowsPerTransaction: 3000,
  /** Bytes of data a transaction may change: 10 MiB. */
  bytesPerTransaction: 10_485_760,
  /** How long a transaction may run: 5 minutes. */
  transactionMs: 300_000,
} as const;

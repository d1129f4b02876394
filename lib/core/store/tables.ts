/**
 * What the library's two tables must be at run time, in the sentences a refusal gives: the DynamoDB stores check a
 * table once per process before its first claim or raise (lib/core/aws/table-check.ts), the in-memory stores refuse the
 * same settings with the same words (lib/testing/), so one conformance suite covers both.
 */

/** Which of the library's tables, and what a TTL delete there would break. */
export type TableRole = 'lock' | 'job';

const TTL_BREAKS: Record<TableRole, string> = {
  lock: 'a TTL delete of a lock item starts its epoch, the fencing token, again at 1, so a token already used could be handed out again',
  job: 'a TTL delete of a job row or chunk fence item forgets the token it holds, so a late holder with an older token could write again',
};

/** The problem with TTL enabled on a lock or job table, naming the table and the attribute. */
export function timeToLiveProblem(table: string, role: TableRole, attribute: string | undefined, status = 'ENABLED'): string {
  return `table ${table} (the ${role} table) has TTL ${status}${attribute ? ` on attribute '${attribute}'` : ''}: ${TTL_BREAKS[role]}; disable TTL on it (aws dynamodb update-time-to-live --table-name ${table} --time-to-live-specification Enabled=false,AttributeName=${attribute ?? '<attribute>'})`;
}

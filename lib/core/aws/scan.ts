/**
 * A strongly consistent Scan of any table, page by page, for auditors (they may scan: they run rarely and must see
 * everything; holders and the sweeper never do). A job's own data is the job's: its own audit scans it with this.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentClient } from './job-store';

/** Every item a strongly consistent Scan returns, page by page. */
export async function* scanAll(
  ddb: DocumentClient,
  input: ConstructorParameters<typeof ScanCommand>[0],
): AsyncGenerator<Record<string, unknown>, void, undefined> {
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ddb.send(new ScanCommand({ ...input, ExclusiveStartKey: start, ConsistentRead: true }));
    yield* out.Items ?? [];
    start = out.LastEvaluatedKey;
  } while (start);
}

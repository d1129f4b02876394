/**
 * What the stores hold, asked without writing: whether a table exists (DescribeTable). The commands that only read
 * (`bump-epochs --dry-run`, `audit`, `leader`) and the restore bump ask this instead of provisioning, so a mistyped
 * table name is refused rather than created.
 */
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** DynamoDB's answer for a table that does not exist (DescribeTable, and every item operation on it). */
export function isTableNotFound(err: unknown): boolean {
  return (err as { name?: string } | undefined)?.name === 'ResourceNotFoundException';
}

/**
 * The tables of `names` that do not exist, in their order; any other error (the endpoint down, access denied) is thrown.
 * @param raw - the low-level client (DescribeTable is a control-plane call)
 */
export async function absentTables(raw: Pick<DynamoDBClient, 'send'>, names: readonly string[]): Promise<string[]> {
  const absent: string[] = [];
  for (const TableName of names) {
    try {
      await raw.send(new DescribeTableCommand({ TableName }));
    } catch (err) {
      if (!isTableNotFound(err)) throw err;
      absent.push(TableName);
    }
  }
  return absent;
}

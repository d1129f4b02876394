/**
 * Create a deployment's tables from the one description in lib/core/schema.ts (the CDK constructs provision the same):
 * for a local stack (`fencepost local`), a test, or an account without CDK. Idempotent: an existing table is left
 * as it is, once checked to be what the library needs.
 */
import {
  CreateTableCommand,
  waitUntilTableExists,
  ResourceInUseException,
  type AttributeDefinition,
  type CreateTableCommandInput,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { ConfigError } from '../errors';
import { DEFAULT_TABLE_PREFIX, TABLES, tableNames, type TableDescription, type TableNames } from '../schema';
import { tableProblems } from './table-check';

/**
 * The CreateTable request for one described table under `name` (a deployment's `<prefix><suffix>`, or a table a job
 * names literally, `fencepost run`), on demand.
 */
export function describedTableInput(name: string, t: TableDescription): CreateTableCommandInput {
  const attrs = new Map<string, AttributeDefinition>();
  const add = (k: { name: string; type: 'S' | 'N' }) => attrs.set(k.name, { AttributeName: k.name, AttributeType: k.type });
  add(t.partitionKey);
  const input: CreateTableCommandInput = {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [{ AttributeName: t.partitionKey.name, KeyType: 'HASH' }],
    AttributeDefinitions: [],
  };
  if (t.sparseIndex) {
    add(t.sparseIndex.partitionKey);
    add(t.sparseIndex.sortKey);
    input.GlobalSecondaryIndexes = [
      {
        IndexName: t.sparseIndex.name,
        KeySchema: [
          { AttributeName: t.sparseIndex.partitionKey.name, KeyType: 'HASH' },
          { AttributeName: t.sparseIndex.sortKey.name, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ];
  }
  input.AttributeDefinitions = [...attrs.values()];
  return input;
}

/** How long a new table may take to become ACTIVE: the SDK's waiter polls it and throws past this. */
const ACTIVE_WITHIN_S = 300;

/**
 * Create each described table unless it exists, and wait until each is ACTIVE (at once on DynamoDB Local); throws if
 * one is not ACTIVE within ACTIVE_WITHIN_S, so a caller never writes to a table still being created. A table that
 * existed is checked against its description (key, sparse index, no TTL on the lock or job table): a ConfigError
 * names every problem.
 */
export async function createDescribedTables(raw: DynamoDBClient, prefix: string, tables: readonly TableDescription[]): Promise<void> {
  const existed = await createTablesFrom(
    raw,
    tables.map((t) => describedTableInput(prefix + t.suffix, t)),
  );
  // A table that was there already is checked, not taken on trust: its key, its index, no TTL (lib/core/aws/table-check.ts).
  const problems: string[] = [];
  for (const t of tables) if (existed.includes(prefix + t.suffix)) problems.push(...(await tableProblems(raw, prefix + t.suffix, t)));
  if (problems.length > 0) throw new ConfigError(problems);
}

/**
 * Create each table of these CreateTable requests unless it exists, and wait until each is ACTIVE (a template's
 * tables: `fencepost run`, lib/cli/assembly.ts).
 * @returns the names of the tables that existed already (not created)
 */
export async function createTablesFrom(raw: DynamoDBClient, inputs: readonly CreateTableCommandInput[]): Promise<string[]> {
  const existed: string[] = [];
  for (const input of inputs) {
    try {
      await raw.send(new CreateTableCommand(input));
    } catch (err) {
      if (!(err instanceof ResourceInUseException) && (err as Error).name !== 'ResourceInUseException') throw err;
      existed.push(String(input.TableName));
    }
    // The SDK's waiter (its own timers, not the core's): DescribeTable until ACTIVE, or a TimeoutError.
    await waitUntilTableExists({ client: raw, minDelay: 1, maxDelay: 5, maxWaitTime: ACTIVE_WITHIN_S }, { TableName: input.TableName });
  }
  return existed;
}

/**
 * Create the lock table and the job table (with its sparse `claimed` index) that `withLease`, `fenceOn` and the
 * sweeper use, unless they exist; resolves once both are ACTIVE. A table that exists is checked: the wrong key, no
 * sparse index or a TTL (which would reset the fencing tokens) is a ConfigError naming the table. Your own record tables are yours to create.
 * @param clients - `clients.raw` sends the requests (`localClients(...)` or `awsClients()`)
 * @param prefix - the tables are `<prefix>locks` and `<prefix>jobs` @defaultValue `fencepost-`
 * @returns their names, as `tableNames(prefix)` gives them
 */
export async function createTables(clients: { readonly raw: DynamoDBClient }, prefix: string = DEFAULT_TABLE_PREFIX): Promise<TableNames> {
  await createDescribedTables(clients.raw, prefix, TABLES);
  return tableNames(prefix);
}

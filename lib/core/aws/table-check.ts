/**
 * What the stores hold, asked without writing (DescribeTable, DescribeTimeToLive; DynamoDB Local answers both):
 *   - whether a table exists: the commands that only read (`bump-epochs --dry-run`, `audit`, `leader`) and the restore
 *     bump ask this instead of provisioning, so a mistyped table name is refused rather than created;
 *   - whether a table is what the library needs (its key, the job table's sparse index, no TTL on the lock or job
 *     table): checked once per process per table before the first claim or raise (checkTableOnce), and by
 *     `createTables` on a table that already exists. A TTL on the lock table can delete the item that holds the
 *     epoch, and the next claim would start the fencing token again at 1.
 */
import {
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DescribeTableCommandOutput,
  type DescribeTimeToLiveCommandOutput,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { ConfigError } from '../errors';
import { JOB_TABLE, LOCK_TABLE, type KeyAttribute, type TableDescription } from '../schema';
import { timeToLiveProblem, type TableRole } from '../store/tables';
import type { DocumentClient } from './document-client';

/** DynamoDB's answer for a table that does not exist (DescribeTable, and every item operation on it). */
function isTableNotFound(err: unknown): boolean {
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

/** The library's own tables, whose items must never expire (the synth refuses a TTL on them too: lib/constructs/schema-table.ts). */
const ROLES = new Map<TableDescription, TableRole>([
  [LOCK_TABLE, 'lock'],
  [JOB_TABLE, 'job'],
]);

const key = (k: KeyAttribute) => `${k.name} (${k.type})`;

/**
 * What is wrong with table `name` against `description`: its key (the partition key alone, of its type), its sparse
 * index (name, keys, projection ALL) and, on the lock and job tables, a TTL. Empty when it is right.
 * @throws the SDK's error when the table cannot be described (ResourceNotFoundException when it does not exist)
 */
export async function tableProblems(ddb: DynamoDBClient | DocumentClient, name: string, description: TableDescription): Promise<string[]> {
  const send = (ddb as DynamoDBClient).send.bind(ddb) as DynamoDBClient['send'];
  const { Table: t }: DescribeTableCommandOutput = await send(new DescribeTableCommand({ TableName: name }));
  const problems: string[] = [];
  const typeOf = (attribute: string | undefined) => t?.AttributeDefinitions?.find((a) => a.AttributeName === attribute)?.AttributeType;
  const shown = (schema: readonly { AttributeName?: string; KeyType?: string }[] | undefined) =>
    (schema ?? []).map((k) => `${k.AttributeName} (${typeOf(k.AttributeName)}, ${k.KeyType})`).join(', ') || 'none';
  const want = description.partitionKey;
  const keys = t?.KeySchema ?? [];
  if (keys.length !== 1 || keys[0].KeyType !== 'HASH' || keys[0].AttributeName !== want.name || typeOf(want.name) !== want.type)
    problems.push(`table ${name} must have the partition key ${key(want)} and no sort key, got ${shown(keys)}`);
  const index = description.sparseIndex;
  if (index) {
    const found = t?.GlobalSecondaryIndexes?.find((i) => i.IndexName === index.name);
    const wanted = `${index.name} (partition key ${key(index.partitionKey)}, sort key ${key(index.sortKey)}, projection ALL)`;
    const ks = found?.KeySchema ?? [];
    const right =
      found !== undefined &&
      ks.length === 2 &&
      ks.some((k) => k.KeyType === 'HASH' && k.AttributeName === index.partitionKey.name && typeOf(k.AttributeName) === index.partitionKey.type) &&
      ks.some((k) => k.KeyType === 'RANGE' && k.AttributeName === index.sortKey.name && typeOf(k.AttributeName) === index.sortKey.type) &&
      found.Projection?.ProjectionType === 'ALL';
    if (!right)
      problems.push(
        `table ${name} must have the sparse index ${wanted}, the orphan sweeper reads the claimed rows through it; got ${
          found ? `keys ${shown(ks)}, projection ${found.Projection?.ProjectionType}` : 'no such index'
        }`,
      );
  }
  const role = ROLES.get(description);
  if (role) {
    const { TimeToLiveDescription: ttl }: DescribeTimeToLiveCommandOutput = await send(new DescribeTimeToLiveCommand({ TableName: name }));
    // DISABLING too: until TTL is off, expired items may still be deleted.
    const status = ttl?.TimeToLiveStatus ?? 'DISABLED';
    if (status !== 'DISABLED') problems.push(timeToLiveProblem(name, role, ttl?.AttributeName, status));
  }
  return problems;
}

/** Per client (one per process in a Lambda), per table: the check, once; a failed one is forgotten and asked again. */
const checked = new WeakMap<object, Map<string, Promise<void>>>();

/**
 * Check table `name` against `description` once per client and table (tableProblems), before the first claim or
 * raise: a wrong table is a ConfigError naming it and every problem, before anything is written to it.
 * @throws ConfigError for a wrong table; the SDK's error when it cannot be described (a transient one is retried by the caller)
 */
export function checkTableOnce(ddb: DocumentClient, name: string, description: TableDescription): Promise<void> {
  let tables = checked.get(ddb);
  if (tables === undefined) checked.set(ddb, (tables = new Map()));
  let check = tables.get(name);
  if (check === undefined) {
    const memo = tables;
    check = tableProblems(ddb, name, description).then((problems) => {
      if (problems.length > 0) throw new ConfigError(problems);
    });
    check.catch(() => memo.delete(name)); // a wrong table, or no answer: asked again next time
    tables.set(name, check);
  }
  return check;
}

/**
 * The error a request on table `name` failed with, explained: a ValidationException (a key that does not match the
 * table's) becomes the table check's ConfigError when the table is wrong; anything else, or a check that cannot run
 * (no grant to describe it), is the error as it came. Only on the failure path: a read that succeeds costs nothing.
 */
export async function explained(ddb: DocumentClient, name: string, description: TableDescription, err: unknown): Promise<unknown> {
  if ((err as { name?: string } | undefined)?.name !== 'ValidationException') return err;
  const problems = await tableProblems(ddb, name, description).catch(() => []);
  return problems.length > 0 ? new ConfigError(problems) : err;
}

/**
 * The settings every Fencepost table shares, from a lib/core/schema.ts description (keys and sparse index are never
 * re-typed here): PAY_PER_REQUEST, point-in-time recovery, deletion protection, RETAIN, and no TTL attribute.
 *
 * No TTL anywhere, the lock table above all: "TTL is not a deadline, and it resets epochs": a TTL delete of
 * a lock item starts its epoch (the fencing token) again at 1, and a TTL delete of a fence item forgets the token
 * that refuses a late holder. A point-in-time restore also brings old epochs back, so a restored lock table is
 * bumped before use (docs/DESIGN.md "Restores"; the `restore bump` command).
 *
 * `Table` (AWS::DynamoDB::Table), not `TableV2` (AWS::DynamoDB::GlobalTable): the lock table must be one
 * linearizable authority in one Region. With TableV2 an asynchronously replicated
 * replica is one `replicas:` line away; with Table it is a deliberate migration.
 */
import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { IConstruct } from 'constructs';
import type { KeyAttribute, TableDescription } from '../core/schema';

const ATTRIBUTE_TYPE: Record<KeyAttribute['type'], dynamodb.AttributeType> = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
};

function attribute(key: KeyAttribute): dynamodb.Attribute {
  return { name: key.name, type: ATTRIBUTE_TYPE[key.type] };
}

/**
 * A table exactly as `description` says, with the settings every Fencepost table shares. Its name is
 * CloudFormation's. A sparse index in the description is added (projection ALL).
 *
 * @param scope - where the table is created
 * @param id - the table's construct id
 * @param description - keys and sparse index, from lib/core/schema.ts
 * @param options - the table's warm throughput (a pre-warmed table for a known first peak) @default - a new table's
 * @returns the table
 */
export function schemaTable(
  scope: IConstruct,
  id: string,
  description: TableDescription,
  options: Pick<dynamodb.TableProps, 'warmThroughput'> = {},
): dynamodb.Table {
  const table = new dynamodb.Table(scope, id, {
    warmThroughput: options.warmThroughput,
    partitionKey: attribute(description.partitionKey),
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
    // timeToLiveAttribute is deliberately absent; refuseTimeToLive keeps it so.
  });
  const index = description.sparseIndex;
  if (index) {
    table.addGlobalSecondaryIndex({
      indexName: index.name,
      partitionKey: attribute(index.partitionKey),
      sortKey: attribute(index.sortKey),
      projectionType: dynamodb.ProjectionType.ALL,
    });
  }
  return table;
}

/**
 * Fails the synth if a TTL attribute is ever set on the table, by a prop or an escape hatch: items of a table that
 * holds epochs or fences must never be deleted.
 *
 * @param table - the table that must never have a TTL attribute
 * @param why - what a TTL delete would break, for the error
 */
export function refuseTimeToLive(table: dynamodb.Table, why: string): void {
  const cfn = table.node.defaultChild as dynamodb.CfnTable;
  table.node.addValidation({
    validate: () => (cfn.timeToLiveSpecification === undefined ? [] : [`${table.node.path} must never have a TTL attribute: ${why}`]),
  });
}

const describe = (key: KeyAttribute) => `${key.name} (${key.type})`;
const TYPE_LETTER: Record<string, string> = {
  [dynamodb.AttributeType.STRING]: 'S',
  [dynamodb.AttributeType.NUMBER]: 'N',
  [dynamodb.AttributeType.BINARY]: 'B',
};
const given = (a: dynamodb.Attribute | undefined) => (a ? `${a.name} (${TYPE_LETTER[a.type] ?? a.type})` : 'none');
const same = (a: dynamodb.Attribute | undefined, key: KeyAttribute) => a?.name === key.name && TYPE_LETTER[a.type] === key.type;

/**
 * What is wrong with a table a stack gives in place of one the library would create: its keys, its sparse index,
 * a TTL attribute. Only a `Table` of this app can be read at synth; any other ITable (imported by name or ARN, a
 * TableV2) is taken as it is, unchecked, and must be made as `description` says (docs/FENCED-JOB.md).
 *
 * @param prop - the prop that gave the table, which each problem names
 * @param table - the given table
 * @param description - what the table must be (lib/core/schema.ts)
 * @returns the problems; empty when the table is right or cannot be read
 */
export function givenTableProblems(prop: string, table: dynamodb.ITable, description: TableDescription): string[] {
  if (!(table instanceof dynamodb.Table)) return [];
  const problems: string[] = [];
  const keys = table.schema();
  if (!same(keys.partitionKey, description.partitionKey) || keys.sortKey !== undefined) {
    problems.push(
      `${prop} must have the partition key ${describe(description.partitionKey)} and no sort key, got ${given(keys.partitionKey)}` +
        (keys.sortKey ? ` and the sort key ${given(keys.sortKey)}` : ''),
    );
  }
  const cfn = table.node.defaultChild as dynamodb.CfnTable;
  if (cfn.timeToLiveSpecification !== undefined) {
    problems.push(
      `${prop} must have no TTL attribute: a TTL delete of a lock item or a fence item forgets the fencing token, and the next claim hands out tokens the fences already accepted`,
    );
  }
  const index = description.sparseIndex;
  if (index) {
    const wanted = `${index.name} (partition key ${describe(index.partitionKey)}, sort key ${describe(index.sortKey)}, projection ALL)`;
    const indexes = (Stack.of(table).resolve(cfn.globalSecondaryIndexes) ?? []) as { indexName: string; projection?: { projectionType?: string } }[];
    const found = indexes.find((i) => i.indexName === index.name);
    const indexKeys = found && table.schema(index.name);
    if (!found || !indexKeys) problems.push(`${prop} must have the sparse index ${wanted}: the orphan sweeper reads the claimed rows through it`);
    else if (
      !same(indexKeys.partitionKey, index.partitionKey) ||
      !same(indexKeys.sortKey, index.sortKey) ||
      found.projection?.projectionType !== 'ALL'
    ) {
      problems.push(
        `${prop} has the index ${index.name}, but it must be ${wanted}; got partition key ${given(indexKeys.partitionKey)}, sort key ${given(indexKeys.sortKey)}, projection ${found.projection?.projectionType ?? 'none'}`,
      );
    }
  }
  return problems;
}

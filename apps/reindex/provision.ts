/**
 * Create the reindex job's tables on a local DynamoDB (or any endpoint), from the library's descriptions of the
 * lock and job tables and the job's own descriptions of the source and index tables; and seed the source table.
 * Idempotent: a table that exists is left as it is. The CDK stack (stack.ts) deploys the same descriptions.
 */
import { CreateTableCommand, DescribeTableCommand, type AttributeDefinition, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, type BatchWriteCommandInput, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Clock, KeyAttribute, TableDescription } from '../../lib/core/internal';
import { REINDEX_TABLES, productKey, reindexTables, type ReindexTables } from './schema';

/** One table exactly as its description says: its key, and its sparse index if it has one. */
async function createTable(raw: DynamoDBClient, clock: Clock, name: string, t: TableDescription): Promise<void> {
  const attributes = new Map<string, AttributeDefinition>();
  const define = (k: KeyAttribute) => attributes.set(k.name, { AttributeName: k.name, AttributeType: k.type });
  define(t.partitionKey);
  const index = t.sparseIndex;
  if (index) [index.partitionKey, index.sortKey].forEach(define);
  try {
    await raw.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: t.partitionKey.name, KeyType: 'HASH' }],
        AttributeDefinitions: [...attributes.values()],
        ...(index
          ? {
              GlobalSecondaryIndexes: [
                {
                  IndexName: index.name,
                  KeySchema: [
                    { AttributeName: index.partitionKey.name, KeyType: 'HASH' },
                    { AttributeName: index.sortKey.name, KeyType: 'RANGE' },
                  ],
                  Projection: { ProjectionType: 'ALL' },
                },
              ],
            }
          : {}),
      }),
    );
  } catch (err) {
    if ((err as Error).name !== 'ResourceInUseException') throw err;
  }
  // DynamoDB Local creates a table at once; elsewhere it is usable only once ACTIVE.
  for (let i = 0; i < 120; i++) {
    const d = await raw.send(new DescribeTableCommand({ TableName: name }));
    if (d.Table?.TableStatus === 'ACTIVE') return;
    await clock.sleep(500);
  }
}

/**
 * Create the job's four tables under `prefix` (`<prefix>locks`, `<prefix>jobs`, `<prefix>source`, `<prefix>index`).
 * @returns their names
 */
export async function provisionReindex(raw: DynamoDBClient, clock: Clock, prefix: string): Promise<ReindexTables> {
  for (const t of REINDEX_TABLES) await createTable(raw, clock, prefix + t.suffix, t);
  return reindexTables(prefix);
}

type Requests = NonNullable<BatchWriteCommandInput['RequestItems']>[string];

/** Put `count` products in the source table: `prod#00000` … with a made-up name and price each. */
export async function seedProducts(ddb: DynamoDBDocumentClient, tables: Pick<ReindexTables, 'source'>, count: number): Promise<void> {
  const colours = ['Red', 'Blue', 'Green', 'Black'];
  const kinds = ['Kettle', 'Lamp', 'Chair', 'Desk', 'Mug'];
  for (let first = 0; first < count; first += 25) {
    const items = Array.from({ length: Math.min(25, count - first) }, (_, k) => {
      const i = first + k;
      return { pk: productKey(i), name: `${colours[i % colours.length]} ${kinds[i % kinds.length]} No. ${i}`, price: 5 + (i % 50) };
    });
    let requests: Requests = items.map((Item) => ({ PutRequest: { Item } }));
    // A batch may come back partly unprocessed (throttling): send what is left until nothing is.
    while (requests.length > 0) {
      const out = await ddb.send(new BatchWriteCommand({ RequestItems: { [tables.source]: requests } }));
      requests = out.UnprocessedItems?.[tables.source] ?? [];
    }
  }
}

// Create the tables a fenced job needs: the library's lock and job tables (`store.createTables`, idempotent) and your own
// table for the job's records. Against `npx fencepost local` here; in AWS, `awsClients()` instead of `localClients`.
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { localClients, store } from 'fencepost';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! }); // the dynamodbEndpoint it printed

async function main(): Promise<void> {
  const tables = await store.createTables(clients, 'reminders-'); // reminders-locks, reminders-jobs
  await clients.raw.send(
    new CreateTableCommand({
      TableName: 'reminders-sent', // yours: one item per reminder sent
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    }),
  );
  console.log(JSON.stringify({ ...tables, sent: 'reminders-sent' }));
}

main().finally(() => clients.destroy());

// Bill one night with the core library, on stores you already have (here: the embedded local stack).
import { systemClock } from '../lib/core/clock';
import { validateBillingConfig } from '../apps/billing/settings';
import { billingDeps, runBilling } from '../apps/billing/night';
import { Events } from '../lib/core/events';
import { billingTables as tableNames } from '../apps/billing/schema';
import { localClients } from '../lib/core/aws/clients';
import { provisionBilling as provision } from '../verify/billing-stores';
import { startEmbeddedStack } from '../lib/local/stack';

async function billOneNight(): Promise<void> {
  const stack = await startEmbeddedStack(); // DynamoDB Local (a JVM) + the local S3 endpoint
  const clients = localClients(stack.endpoints);
  try {
    await provision(clients.raw, clients.s3, 'example-', 'example-manifests');
    const events = new Events('worker-1', systemClock).on((e) => console.log(e.event, e.token ?? ''));
    const summary = await runBilling(billingDeps(clients, tableNames('example-'), 'example-manifests', systemClock, events), {
      date: '2026-09-28',
      worker: 'worker-1',
      config: validateBillingConfig({ invoices: 5_000 }),
    });
    console.log(summary.outcome, summary.token, summary.invoicesRecorded); // completed 1 5000
  } finally {
    clients.destroy();
    await stack.stop();
  }
}

if (require.main === module) void billOneNight();

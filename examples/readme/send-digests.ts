// Side effects the fence cannot reach (an email, a payment, a webhook), made once: `held.sendOnce` records each
// effect's intent through the fence, calls with an idempotency key every holder derives alike (never the token), then
// records the call DONE. Run it twice: the second holder finds every digest DONE and sends nothing. The "provider"
// here is a file; yours takes the key as its idempotency key (an Idempotency-Key header, a ClientToken).
import { appendFileSync } from 'node:fs';
import { awsStores, fenceOn, localClients, systemClock, tableNames, withLease } from 'fencepost';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const tables = tableNames('reminders-');
const stores = awsStores(clients, tables);
const week = process.argv[2] ?? '2026-W49';
const job = `digest#${week}`;

async function sendDigest(to: string, idempotencyKey: string): Promise<string> {
  appendFileSync('outbox.jsonl', JSON.stringify({ to, idempotencyKey }) + '\n'); // your mail API, given the key
  return `queued:${to}`; // what the API answered (a message id): recorded with the effect
}

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const result = await withLease(deps, job, `worker-${process.pid}`, {}, async (lease) => {
    const held = lease.fenced(fenceOn({ fences: stores.jobs, table: tables.jobs, key: { pk: job } }));
    await lease.act(() => held.raise()); // first, as before any write
    let sent = 0;
    for (const user of ['ana', 'bo', 'cy']) {
      const effect = await held.sendOnce(`digest#${user}`, (key) => sendDigest(user, key)); // its own id in the job
      if (effect.sent) sent++;
    }
    return { token: lease.token, sent };
  });
  console.log(JSON.stringify(result));
}

main().finally(() => clients.destroy());

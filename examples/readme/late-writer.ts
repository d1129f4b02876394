// What the fence is for: a holder that paused past its lease (a GC pause, a frozen VM) wakes up and writes with the
// token it claimed before. A newer holder raised the fence since: the store refuses the write, and none of it lands.
import { FencedOutError, fenceOn, localClients, tableNames, writeFenced } from 'fencepost';

const clients = localClients({ dynamodb: process.env.DYNAMODB_ENDPOINT! });
const tables = tableNames('reminders-');
const night = process.argv[2] ?? '2026-12-01';
const token = Number(process.argv[3] ?? 1); // the token it claimed before it paused

async function main(): Promise<void> {
  const fence = fenceOn({ ddb: clients.ddb, table: tables.jobs, key: { pk: `reminders#${night}` } });
  try {
    await writeFenced(fence, token, [{ pk: `${night}#dee`, user: 'dee', token }], { table: 'reminders-sent' });
    console.log(`token ${token} wrote: no newer holder has raised the fence`);
  } catch (err) {
    if (!(err instanceof FencedOutError)) throw err;
    console.log(`refused: token ${err.token} is below the fence, ${err.fence}`);
  }
}

main().finally(() => clients.destroy());

/**
 * Test helper, run as its own Node process (node --import tsx test/support/start-ddb-child.ts <mode>).
 * Starts DynamoDB Local and prints one JSON line: {"javaPid","port","endpoint"} or {"error","message"}. Then:
 *   wait    keep running until killed (default)
 *   throw   throw an uncaught exception
 *   forget  return without stop(): the process exits on its own
 */
import { startDynamoDbLocal } from '../../lib/local/dynamodb-local';

const mode = process.argv[2] ?? 'wait';

startDynamoDbLocal().then(
  (ddb) => {
    process.stdout.write(`${JSON.stringify({ javaPid: ddb.pid, port: ddb.port, endpoint: ddb.endpoint })}\n`);
    if (mode === 'wait') setInterval(() => undefined, 60_000);
    if (mode === 'throw')
      setTimeout(() => {
        throw new Error('boom from start-ddb-child');
      }, 100);
  },
  (e: Error) => {
    process.stdout.write(`${JSON.stringify({ error: e.name, message: e.message })}\n`);
    process.exitCode = 2;
  },
);

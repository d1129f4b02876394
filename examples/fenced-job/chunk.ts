// The chunk function of your own fenced job: FencedJob's workflow calls it once per chunk, after raising every fence
// to the holder's token. Put the chunk fence's guard in each transaction you write, and check the lease before it.
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { fencedChunkHandler, required } from 'fencepost/lambda';

export const handler = fencedChunkHandler(async ({ lease, fence, chunk, date, env, runtime }) => {
  const table = required(env, 'REPORT_TABLE'); // the job's own table, set on the function by its stack (stack.ts)
  for (let line = 0; line < 10; line++) {
    const put = { TableName: table, Item: { pk: { S: `${date}#${chunk}#${line}` }, token: { N: String(lease.token) } } };
    // The check before every act; the guard makes a late write (a paused holder's) fail, whatever it believes.
    await lease.act(() => runtime.clients.raw.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(lease.token), { Put: put }] })));
  }
  return { lines: 10 };
});

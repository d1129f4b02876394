// The chunk function of your own fenced job: FencedJob's workflow calls it once per chunk, after raising every fence
// to the holder's token. Write the chunk's records through its fence with the batched writer: plain items, any number,
// cut into transactions of 1 check on the fence + up to 99 puts, each record once, the lease checked before each.
import { writeFenced } from 'fencepost';
import { fencedChunkHandler, required } from 'fencepost/lambda';

export const handler = fencedChunkHandler(async ({ lease, fence, chunk, date, env }) => {
  const table = required(env, 'REPORT_TABLE'); // the job's own table, set on the function by its stack (nightly-report-stack.ts)
  const lines = Array.from({ length: 250 }, (_, line) => ({ pk: `${date}#${chunk}#${line}`, line, token: lease.token }));
  // A late write (a paused holder's) is refused by the fence, whatever it believes; a redo finds its lines recorded.
  const written = await writeFenced(fence, lines, { table, check: () => lease.check() });
  return { lines: written.recorded.length, alreadyRecorded: written.alreadyRecorded.length };
});

// Test your FencedJob's chunk function the same way: exploreFencedJob runs it under the workflow FencedJob synthesizes
// for your job (its real claim, raise, chunk, complete and sweeper functions around your work), on in-memory stores
// and one virtual clock, with the faults of AWS around it: `npx tsx --test statements.test.ts` (aws-cdk-lib builds
// the workflow in the test's process: your CDK app has it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFenced } from 'fencepost';
import type { FencedChunkContext } from 'fencepost/lambda';
import { exploreFencedJob } from 'fencepost/testing';

/** What the work calls beyond the fence: a mail API (in the function, the real one: `fencedChunkHandler((c) => statements(c, mail))`). */
interface Mail {
  send(to: string, idempotencyKey: string): Promise<string>;
}

/** A pretend mail API that deduplicates by idempotency key, as a real one would. */
class PretendMail implements Mail {
  readonly delivered = new Map<string, string>(); // idempotency key -> recipient
  async send(to: string, idempotencyKey: string): Promise<string> {
    if (!this.delivered.has(idempotencyKey)) this.delivered.set(idempotencyKey, to);
    return `msg-${this.delivered.size}`;
  }
}

const customersOf = (chunk: number) => [`customer-${chunk}-a`, `customer-${chunk}-b`];

/** The chunk function's work: record each customer's statement through the chunk's fence, then email it once. */
async function statements({ lease, fence, chunk, date }: FencedChunkContext, mail: Mail) {
  const rows = customersOf(chunk).map((customer) => ({ pk: `${date}#${customer}`, customer, token: lease.token })); // derived from the key
  await writeFenced(fence, rows, { table: 'statements', check: () => lease.check() });
  for (const { customer } of rows) await fence.sendOnce(`statement#${customer}`, (key) => mail.send(customer, key));
  return { statements: rows.length };
}

test('the nightly statements: each recorded once and emailed once, whatever fails where', async () => {
  const chunks = 3;
  const result = await exploreFencedJob({
    work: (chunk, kit) => statements(chunk, kit.fakes), // the schedule's fakes: each call a step the faults can land on
    chunks,
    fakes: () => new PretendMail(),
    // Yours, over the end of each schedule: never an email twice; once the night is DONE, every statement, once.
    check: ({ fakes: mail, items, state }) => {
      const customers = Array.from({ length: chunks }, (_, chunk) => customersOf(chunk)).flat();
      const got = (customer: string) => [...mail.delivered.values()].filter((to) => to === customer).length;
      const due = state === 'DONE' ? 1 : undefined;
      return [
        ...customers.filter((c) => got(c) > 1 || (due !== undefined && got(c) !== due)).map((c) => `${c} got ${got(c)} emails`),
        ...(due === undefined || items('statements').length === customers.length ? [] : [`${items('statements').length} statements recorded`]),
      ];
    },
    seed: 1,
    schedules: 100,
  });
  assert.deepEqual(result.violations, [], JSON.stringify(result.violations[0], null, 1));
});

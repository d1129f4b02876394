/**
 * One DynamoDB Local and one S3 endpoint per test run (the JVM's start-up is the expensive part): test/run.ts
 * starts them and passes the endpoints in the environment. A test file run on its own starts its own. A file of a tier
 * that test/run.ts's TIERS runs without the stack is refused it, so it cannot come to depend on it unseen.
 * Each test gets its own table prefix and bucket, so tests never see each other's data.
 */
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import { startEmbeddedStack } from '../../lib/local/stack';
import { localClients, type Clients, type Endpoints } from '../../lib/core/aws/clients';
import { billingTables, type BillingTables } from '../../apps/billing/schema';
import { provisionBilling as provision } from '../../verify/billing-stores';
import { callLogSink } from '../../verify/proofs/call-log';
import type { CallSink } from '../../lib/local/call-log';

let own: ReturnType<typeof startEmbeddedStack> | undefined;
const given =
  process.env.FENCEPOST_TEST_DYNAMODB && process.env.FENCEPOST_TEST_S3
    ? { dynamodb: process.env.FENCEPOST_TEST_DYNAMODB, s3: process.env.FENCEPOST_TEST_S3 }
    : undefined;
// Registered at import, so it runs after the file's last test (not after the first test that asked).
if (!given) after(async () => (await own)?.stop());

export async function endpoints(): Promise<Endpoints> {
  // Set by test/run.ts for a tier its TIERS table runs without the stack.
  const tier = process.env.FENCEPOST_TEST_NO_STACK;
  if (tier !== undefined)
    throw new Error(`a test in test/${tier}/ asked for DynamoDB Local: files that need the stack belong in test/store/ or test/process/`);
  if (given) return given;
  own ??= startEmbeddedStack();
  return (await own).endpoints;
}

export interface Namespace {
  readonly endpoints: Endpoints;
  readonly clients: Clients;
  readonly prefix: string;
  readonly bucket: string;
  readonly tables: BillingTables;
  /** The run's call log (the IAM proof), for the calls a local workflow in this process makes; none if none is kept. */
  readonly onCall?: CallSink;
}

/** A fresh, provisioned set of tables and a bucket for one test. */
export async function namespace(): Promise<Namespace> {
  const ep = await endpoints();
  const id = randomBytes(4).toString('hex');
  const prefix = `t${id}-`;
  const bucket = `b${id}`;
  const clients = localClients(ep);
  await provision(clients.raw, clients.s3, prefix, bucket);
  after(() => clients.destroy());
  return { endpoints: ep, clients, prefix, bucket, tables: billingTables(prefix), onCall: callLogSink() };
}

/** A fresh prefix and bucket name that nothing has created (for "nothing was written" checks). */
export function unusedNames(): { prefix: string; bucket: string } {
  const id = randomBytes(4).toString('hex');
  return { prefix: `u${id}-`, bucket: `u${id}` };
}

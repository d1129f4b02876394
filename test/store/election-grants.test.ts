/**
 * `grantCampaign` and `grantHandover` (fencepost/constructs) are proven both ways, as FencedJob's grants are
 * (verify/proofs/iam-proof.ts): every call a real election and a real handover make, recorded by a proxy in front of
 * DynamoDB Local, is allowed by the synthesized role of the function that made it; every grant is used by some call;
 * and the same roles are refused another role's items.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { App, Stack, type CfnElement } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../../lib/core/clock';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { JOB_TABLE, LOCK_TABLE } from '../../lib/core/schema';
import { grantCampaign, grantHandover, JobTable, LockTable } from '../../lib/constructs/index';
import { Election, ledgerKey } from '../../lib/election/election';
import { EpochFence } from '../../lib/election/epoch-fence';
import { handover, writerLedgerKey } from '../../lib/election/handover';
import type { AwsCall } from '../../lib/local/call-log';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { formatReport, proveGrants, type Template } from '../../verify/proofs/iam-proof';
import { namespace } from '../support/stack';

/** A user's stack: the library's two tables (the job table holds the ledgers), a candidate function and a writer function. */
function userStack() {
  const app = new App();
  const stack = new Stack(app, 'Pacer');
  const locks = new LockTable(stack, 'Locks');
  const jobs = new JobTable(stack, 'Jobs');
  const fn = (id: string) =>
    new lambda.Function(stack, id, {
      runtime: lambda.Runtime.NODEJS_20_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async () => {}'),
    });
  const candidate = fn('Candidate');
  const writer = fn('Writer');
  grantCampaign(candidate, { lockTable: locks.table, role: 'pacer', jobTable: jobs.table });
  grantHandover(writer, { lockTable: locks.table, role: 'journal', jobTable: jobs.table });
  const template = app.synth().getStackByName(stack.stackName).template as Template;
  const id = (c: lambda.Function | LockTable | JobTable) =>
    stack.getLogicalId((c instanceof lambda.Function ? c : c.table).node.defaultChild as CfnElement);
  return {
    template,
    ids: { candidate: id(candidate), writer: id(writer) },
    resources: { tableBySuffix: { [LOCK_TABLE.suffix]: id(locks), [JOB_TABLE.suffix]: id(jobs) } },
  };
}

test(
  'a campaign and a handover, each signing as its function: every call is allowed by its grant, every grant is used, and another role is refused',
  { timeout: 60_000 },
  async () => {
    const { template, ids, resources } = userStack();
    const ns = await namespace();
    const calls: AwsCall[] = [];
    const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb, onCall: (c) => calls.push(c) });
    const signingAs = (principal: string) =>
      DynamoDBDocumentClient.from(
        new DynamoDBClient({ endpoint: proxy.endpoint, region: 'us-east-1', credentials: { accessKeyId: principal, secretAccessKey: 'x' } }),
      );
    const asCandidate = signingAs(ids.candidate);
    const asWriter = signingAs(ids.writer);
    try {
      const lease = { leaseMs: 900, renewMs: 250, marginMs: 200 };
      const deps = { locks: new DynamoLockStore(asCandidate, ns.tables.locks), clock: systemClock };
      const election = new Election(deps, 'pacer', lease);
      const fence = new EpochFence({ ledger: new DynamoLedgerStore(asCandidate, ns.tables.jobs), clock: systemClock }, ledgerKey('pacer'));
      // A leads (the role's first join: it reads and checks the epoch floor), renews, appends; B queues and watches A;
      // A resigns; B leads, appends, resigns; observe reads the role and its head.
      const a = await election.campaign('A');
      const bLeads = election.campaign('B');
      await (await a.ledger(fence)).append({ n: 1 });
      await new Promise((r) => setTimeout(r, lease.renewMs * 2)); // a renewal or two, and B's polls of A's item
      assert.deepEqual((await election.observe()).queue, [1, 2]);
      await a.resign();
      const b = await bLeads;
      await (await b.ledger(fence)).append({ n: 2 });
      await b.resign();

      const writerLease = { leaseMs: 600, renewMs: 200, marginMs: 0, waitMarginMs: 100 };
      const writerDeps = { locks: new DynamoLockStore(asWriter, ns.tables.locks), clock: systemClock };
      const journal = new EpochFence({ ledger: new DynamoLedgerStore(asWriter, ns.tables.jobs), clock: systemClock }, writerLedgerKey('journal'));
      const w1 = await handover(writerDeps, 'journal', 'W1', writerLease, journal); // nobody held it: its first flip reads the floor
      await w1.ledger.append({ n: 1 });
      const w2 = await handover(writerDeps, 'journal', 'W2', writerLease, journal); // waits lease + margin, bumps
      await w2.ledger.append({ n: 2 });
      await w1.lease.stopHeartbeat();
      assert.equal(await w2.release(), true);
    } finally {
      asCandidate.destroy();
      asWriter.destroy();
      await proxy.stop();
    }

    const report = await proveGrants(template, calls, { resources });
    console.log(formatReport(report));
    const mine = report.principals.filter((p) => p.principal === ids.candidate || p.principal === ids.writer);
    assert.deepEqual(
      mine.map((p) => p.calls > 0),
      [true, true],
      'both functions made calls',
    );
    assert.equal(report.totals.deniedCalls, 0, formatReport(report));
    for (const p of mine)
      assert.deepEqual(
        p.unused.map((g) => `${g.action} on ${g.resource}`),
        [],
        `${p.principal}: every grant is used by some call`,
      );

    // The same roles, on another role's items and on a job's lease in the same table: refused.
    const foreign: AwsCall[] = [
      { principal: ids.candidate, service: 'dynamodb', operation: 'UpdateItem', table: ns.tables.locks, partitionKey: 'election/other' },
      {
        principal: ids.candidate,
        service: 'dynamodb',
        operation: 'DeleteItem',
        table: ns.tables.locks,
        partitionKey: 'election/pacer2/000000000001',
      },
      { principal: ids.candidate, service: 'dynamodb', operation: 'UpdateItem', table: ns.tables.locks, partitionKey: 'billing#2026-12-01' },
      { principal: ids.candidate, service: 'dynamodb', operation: 'PutItem', table: ns.tables.jobs, partitionKey: 'ledger/other#000000000001' },
      { principal: ids.candidate, service: 'dynamodb', operation: 'Scan', table: ns.tables.jobs },
      { principal: ids.writer, service: 'dynamodb', operation: 'UpdateItem', table: ns.tables.locks, partitionKey: 'writer/other' },
      { principal: ids.writer, service: 'dynamodb', operation: 'GetItem', table: ns.tables.locks, partitionKey: 'election/journal' },
    ];
    const refused = await proveGrants(template, foreign, { resources });
    assert.equal(refused.totals.deniedCalls, foreign.length, formatReport(refused));
  },
);

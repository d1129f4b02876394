/**
 * Crash answers (docs/DESIGN.md "Crash answers"): a process that dies between two steps (a holder's claim and raise,
 * completion's writes, the restore bump's items, a handover's flip and bump), and what the next one finds and
 * finishes. A death is a client that sends nothing more from a given call on: what the stores see of a process
 * killed there.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { audit } from '../apps/billing/audit';
import { runBilling } from '../apps/billing/night';
import { DEFAULTS } from '../apps/billing/settings';
import { Keys } from '../apps/billing/keys';
import { systemClock } from '../core/clock';
import { Events } from '../core/events';
import * as fence from '../core/fence';
import { EpochFence, ledgerViolations } from '../core/epoch-fence';
import { FencedOutError } from '../core/errors';
import { handover, writerLedgerKey, type HandoverConfig } from '../core/handover';
import { readLock } from '../core/lease';
import { readManifest } from '../core/manifest';
import { bumpEpochs } from '../core/restore';
import { localClients, type Clients } from '../core/aws/clients';
import { Sweeper } from '../core/sweeper';
import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { namespace, type Namespace } from './support/stack';

const DATE = '2026-09-28';
const night = { ...DEFAULTS, leaseMs: 600, renewMs: 150, marginMs: 150, invoices: 198, chunkSize: 99, putsPerTransaction: 99 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const updateOf = (command: string, input: unknown) =>
  command === 'UpdateItemCommand' ? String((input as { UpdateExpression?: unknown }).UpdateExpression) : '';
/** Is this the job row's DONE write (core/fence.ts complete)? */
const isDoneWrite = (command: string, input: unknown) => /^SET #state = :done\b/.test(updateOf(command, input));
/** Is this the raise of the job row (core/fence.ts raiseJobRow), the holder's first write after its claim? */
const isJobRowRaise = (command: string, input: unknown) => /^SET fence = :t, #state = :running\b/.test(updateOf(command, input));

/** Clients of a process that dies at a given call: that call (`before`) or every call after it (`after`) is never sent. */
function dyingClients(ns: Namespace, at: (command: string, input: unknown) => boolean, when: 'before' | 'after'): Clients {
  const clients = localClients(ns.endpoints);
  let dead = false;
  const death = () => Object.assign(new Error('the process is dead'), { name: 'ProcessDied' });
  for (const client of [clients.raw, clients.s3] as { middlewareStack: Clients['raw']['middlewareStack'] }[]) {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (dead) throw death();
        const hit = at(String(context.commandName), args.input);
        if (hit && when === 'before') {
          dead = true;
          throw death();
        }
        const result = await next(args);
        if (hit) dead = true;
        return result;
      },
      { step: 'finalizeRequest', name: 'dies-here' },
    );
  }
  return clients;
}

function billing(ns: Namespace, clients: Clients, worker: string) {
  return { ddb: clients.ddb, s3: clients.s3, tables: ns.tables, bucket: ns.bucket, clock: systemClock, events: new Events(worker, systemClock) };
}

const auditNight = (ns: Namespace) => audit({ ddb: ns.clients.ddb, s3: ns.clients.s3, tables: ns.tables, bucket: ns.bucket }, DATE, night.invoices);

test('dies between the manifest DONE and the job row DONE: the row stays RUNNING in the index, the sweeper re-queues it, the next holder completes', async () => {
  const ns = await namespace();
  const a = dyingClients(ns, isDoneWrite, 'before');
  await assert.rejects(runBilling(billing(ns, a, 'A'), { date: DATE, worker: 'A', config: night }), { name: 'ProcessDied' });
  a.destroy();
  const manifest = await readManifest({ s3: ns.clients.s3, bucket: ns.bucket }, Keys.manifestPlace(DATE).key);
  assert.equal(manifest?.body.state, 'DONE', 'the manifest says DONE first');
  const row = await fence.readJob({ ddb: ns.clients.ddb, jobs: ns.tables.jobs }, Keys.job(DATE));
  assert.deepEqual([row?.state, row?.claim_shard !== undefined], ['RUNNING', true], 'the row is RUNNING and findable');
  const sweeper = new Sweeper(
    { ddb: ns.clients.ddb, jobs: ns.tables.jobs, locks: ns.tables.locks, clock: systemClock },
    { leaseMs: night.leaseMs, stormShare: 0.5, stormMinimum: 3, maxRequeuesPerSweep: 10 },
  );
  const started: string[] = [];
  await sweeper.sweep((jobId) => void started.push(jobId));
  await sleep(night.leaseMs + 50);
  await sweeper.sweep((jobId) => void started.push(jobId));
  assert.deepEqual(started, [Keys.job(DATE)], 'the sweeper starts the night again');
  const b = await runBilling(billing(ns, ns.clients, 'B'), { date: DATE, worker: 'B', config: night });
  assert.equal(b.outcome, 'completed');
  assert.equal(b.invoicesRecorded, 0, 'every chunk was already done: B only completes');
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('dies between the job row DONE and the release: the lease lapses by itself; the next trigger finds DONE and claims nothing', async () => {
  const ns = await namespace();
  const a = dyingClients(ns, isDoneWrite, 'after');
  await assert.rejects(runBilling(billing(ns, a, 'A'), { date: DATE, worker: 'A', config: night }), { name: 'ProcessDied' });
  a.destroy();
  const b = await runBilling(billing(ns, ns.clients, 'B'), { date: DATE, worker: 'B', config: night });
  assert.equal(b.outcome, 'already-done');
  assert.equal(b.token, undefined, 'no claim: the DONE row is read first');
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('dies between its claim (epoch + 1) and the raise of the job row: no claim marker anywhere; the next claimant waits out the lease, raises, completes', async () => {
  const ns = await namespace();
  const a = dyingClients(ns, isJobRowRaise, 'before');
  await assert.rejects(runBilling(billing(ns, a, 'A'), { date: DATE, worker: 'A', config: night }), { name: 'ProcessDied' });
  a.destroy();
  const lock = await readLock({ ddb: ns.clients.ddb, table: ns.tables.locks }, Keys.lock(DATE));
  assert.equal(lock?.holder, 'A', 'A claimed the lease ...');
  assert.equal(await fence.readJob({ ddb: ns.clients.ddb, jobs: ns.tables.jobs }, Keys.job(DATE)), undefined, '... and raised nothing');
  const b = await runBilling(billing(ns, ns.clients, 'B'), { date: DATE, worker: 'B', config: night });
  assert.equal(b.outcome, 'completed');
  assert.equal(b.token, Number(lock?.epoch) + 1, "B claimed after A's lease lapsed, with the next epoch");
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('the restore bump stopped half way: the same run id again bumps only the rest, so every epoch is bumped exactly once', async () => {
  const ns = await namespace();
  const before = new Map(['a', 'b', 'c', 'd', 'e'].map((k, i) => [`restore-test/${k}`, 7 * (i + 1)]));
  for (const [pk, epoch] of before) await ns.clients.ddb.send(new PutCommand({ TableName: ns.tables.locks, Item: { pk, epoch } }));
  const epochs = async () => {
    const out = await ns.clients.ddb.send(new ScanCommand({ TableName: ns.tables.locks, ConsistentRead: true }));
    return new Map((out.Items ?? []).map((i) => [String(i.pk), Number(i.epoch)]));
  };
  const by = 1_000_000;
  const diesAt = 2;
  let bumps = 0;
  const dying = dyingClients(ns, (command, input) => /bump_runs/.test(updateOf(command, input)) && ++bumps === diesAt, 'after');
  await assert.rejects(bumpEpochs({ ddb: dying.ddb, locks: ns.tables.locks }, { by, runId: 'restore-1', dryRun: false }), { name: 'ProcessDied' });
  dying.destroy();
  const half = await epochs();
  const bumped = [...before.keys()].filter((k) => half.get(k) !== before.get(k)).sort();
  assert.equal(bumped.length, diesAt, `the bump died after its item ${diesAt} landed`);
  for (const k of bumped) assert.equal(half.get(k), before.get(k)! + by);
  const again = await bumpEpochs({ ddb: ns.clients.ddb, locks: ns.tables.locks }, { by, runId: 'restore-1', dryRun: false });
  assert.deepEqual([...again.alreadyBumped].sort(), bumped, 'the items the first try bumped are not bumped again');
  assert.equal(again.changed.length, before.size - diesAt);
  const after = await epochs();
  for (const [k, epoch] of before) assert.equal(after.get(k), epoch + by, `${k} bumped exactly once`);
});

test("handover: the new writer dies between its flip and its epoch bump; the next writer's handover works and the old writer's writes are refused", async () => {
  const ns = await namespace();
  const role = 'payments';
  const config: HandoverConfig = { leaseMs: 600, renewMs: 150, marginMs: 150, claimBudget: 3, waitMarginMs: 100 };
  const writer = (clients: Clients, name: string) => ({
    deps: { ddb: clients.ddb, table: ns.tables.locks, clock: systemClock, events: new Events(name, systemClock) },
    fence: new EpochFence({ ddb: clients.ddb, table: ns.tables.jobs, clock: systemClock }, writerLedgerKey(role)),
  });
  const a = await handover(writer(ns.clients, 'A').deps, role, 'A', config, writer(ns.clients, 'A').fence);
  await a.ledger.append({ amount: 1 });
  // B flips the writer lease (epoch + 1), waits A out, and dies as it sends the bump: the store never hears of B.
  const dying = dyingClients(ns, (command, input) => updateOf(command, input) === 'SET fence = :e', 'before');
  const b = writer(dying, 'B');
  await assert.rejects(handover(b.deps, role, 'B', config, b.fence), { name: 'ProcessDied' });
  dying.destroy();
  const ledger = writer(ns.clients, 'C').fence;
  assert.equal((await ledger.head()).epoch, a.epoch, "the store's fence is still A's epoch");
  const c = await handover(writer(ns.clients, 'C').deps, role, 'C', config, ledger);
  assert.equal(c.epoch, a.epoch + 2, "C flips over B's epoch");
  await c.ledger.append({ amount: 2 });
  // A, paused past its stop time with a write in hand, sends it now: the store refuses it.
  await assert.rejects(ledger.append(a.epoch, 3, 'A', { amount: 3 }), FencedOutError);
  const entries = await ledger.entries();
  assert.deepEqual(
    entries.map((e) => [e.writer, e.epoch]),
    [
      ['A', a.epoch],
      ['C', c.epoch],
    ],
  );
  assert.deepEqual(ledgerViolations(entries, await ledger.head()), []);
  await a.release();
  await c.release();
});

/**
 * Crash answers (docs/DESIGN.md "Crash answers"): a holder that dies between two steps of completion, and the
 * night still ends DONE with the audit clean. A death is a client that sends nothing more from a given call on:
 * what the stores see of a process killed there.
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
import { readManifest } from '../core/manifest';
import { localClients, type Clients } from '../core/stores';
import { Sweeper } from '../core/sweeper';
import { namespace, type Namespace } from './support/stack';

const DATE = '2026-09-28';
const night = { ...DEFAULTS, leaseMs: 600, renewMs: 150, marginMs: 150, invoices: 198, chunkSize: 99, putsPerTransaction: 99 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Is this the job row's DONE write (core/fence.ts complete)? */
const isDoneWrite = (command: string, input: unknown) =>
  command === 'UpdateItemCommand' && /^SET #state = :done\b/.test(String((input as { UpdateExpression?: unknown }).UpdateExpression));

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

/**
 * Crash answers (docs/DESIGN.md "Crash answers"): a process that dies between two steps (a holder's claim and raise,
 * completion's writes, the restore bump's items, a handover's flip and bump), and what the next one finds and
 * finishes. A death is a client that sends nothing more from a given call on: what the stores see of a process
 * killed there.
 *
 * The waits (a lease to wait out, the sweeper's two sightings, the handover's lease + margin) run on virtual time: the
 * real local stack answers every call, and each call takes no virtual time (VirtualClock.track), so every wait is the
 * exact one the config says, with no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { audit, auditDeps } from '../../apps/billing/audit';
import { billingDeps, runBilling } from '../../apps/billing/night';
import { DEFAULTS } from '../../apps/billing/settings';
import { Keys } from '../../apps/billing/keys';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { Events } from '../../lib/core/events';
import type { Clock } from '../../lib/core/clock';
import * as fence from '../../lib/core/fence';
import { EpochFence, ledgerViolations } from '../../lib/election/epoch-fence';
import { FencedOutError, LeaseLostError } from '../../lib/core/errors';
import { handover, writerLedgerKey, type HandoverConfig } from '../../lib/election/handover';
import { pollMsOf, readLock } from '../../lib/core/lease';
import { readManifest } from '../../lib/core/manifest';
import { bumpEpochs } from '../../lib/core/restore';
import { EPOCH_FLOOR_KEY } from '../../lib/core/store/lock';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import { Sweeper } from '../../lib/core/sweeper';
import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { namespace, type Namespace } from '../support/stack';
import { DynamoJobStore } from '../../lib/core/aws/job-store';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';

const DATE = '2026-09-28';
const night = { ...DEFAULTS, leaseMs: 600, renewMs: 150, marginMs: 150, invoices: 198, chunkSize: 99, putsPerTransaction: 99 };

const updateOf = (command: string, input: unknown) =>
  command === 'UpdateItemCommand' ? String((input as { UpdateExpression?: unknown }).UpdateExpression) : '';
/** The key a raw DynamoDB call names (marshalled: the middleware sees the wire form). */
const keyOf = (input: unknown) => (input as { Key?: { pk?: { S?: string } } }).Key?.pk?.S;
/** Is this the restore bump's write of one lock item (not of the epoch floor)? */
const isItemBump = (command: string, input: unknown) => /bump_runs/.test(updateOf(command, input)) && keyOf(input) !== EPOCH_FLOOR_KEY;
/** Is this the restore bump's raise of the epoch floor, its first write? */
const isFloorRaise = (command: string, input: unknown) => /bump_runs/.test(updateOf(command, input)) && keyOf(input) === EPOCH_FLOOR_KEY;
/** Is this the job row's DONE write (lib/core/fence.ts complete)? */
const isDoneWrite = (command: string, input: unknown) => /^SET #state = :done\b/.test(updateOf(command, input));
/** Is this the raise of the job row (lib/core/fence.ts raiseJobRow), the holder's first write after its claim? */
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

/** Clients whose calls reach the local stack but take no virtual time on `clock`: the clock waits for each answer. */
function onClock<C extends Pick<Clients, 'ddb' | 's3'>>(clients: C, clock: VirtualClock): C {
  const tracked = <T extends { send: (...args: never[]) => Promise<unknown> }>(client: T): T =>
    ({ send: (...args: Parameters<T['send']>) => clock.track(client.send(...args)) }) as unknown as T;
  return { ...clients, ddb: tracked(clients.ddb), s3: tracked(clients.s3) };
}

function billing(ns: Namespace, clients: Clients, worker: string, clock: Clock = systemClock) {
  const c = clock instanceof VirtualClock ? onClock(clients, clock) : clients;
  return billingDeps(c, ns.tables, ns.bucket, clock, new Events(worker, clock));
}

/** Run `work` on virtual time: the clock fires every timer it sets until none is left (the run is over). */
async function untilIdle<T>(clock: VirtualClock, work: Promise<T>): Promise<T> {
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  await clock.runUntilIdle(10_000);
  await settled;
  return work;
}

const auditNight = (ns: Namespace) => audit(auditDeps(ns.clients, ns.tables, ns.bucket), DATE, night.invoices);

test('dies between the manifest DONE and the job row DONE: the row stays RUNNING in the index, the sweeper re-queues it, the next holder completes', async () => {
  const ns = await namespace();
  const clock = new VirtualClock();
  const a = dyingClients(ns, isDoneWrite, 'before');
  await assert.rejects(untilIdle(clock, runBilling(billing(ns, a, 'A', clock), { date: DATE, worker: 'A', config: night })), { name: 'ProcessDied' });
  a.destroy();
  const manifest = await readManifest({ manifests: new S3ManifestStore(ns.clients.s3, ns.bucket) }, Keys.manifestPlace(DATE).key);
  assert.equal(manifest?.body.state, 'DONE', 'the manifest says DONE first');
  const row = await fence.readJob({ jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs) }, Keys.job(DATE));
  assert.deepEqual([row?.state, row?.claim_shard !== undefined], ['RUNNING', true], 'the row is RUNNING and findable');
  const sweeper = new Sweeper(
    {
      job: Keys.keys.name,
      jobs: new DynamoJobStore(onClock(ns.clients, clock).ddb, ns.tables.jobs),
      locks: new DynamoLockStore(onClock(ns.clients, clock).ddb, ns.tables.locks),
      clock,
    },
    { leaseMs: night.leaseMs, stormShare: 0.5, stormMinimum: 3, maxRequeuesPerSweep: 10, maxRequeuesPerRun: 5 },
  );
  const started: string[] = [];
  await sweeper.sweep((jobId) => void started.push(jobId));
  await clock.advance(night.leaseMs); // the second sighting, a full lease later
  await sweeper.sweep((jobId) => void started.push(jobId));
  assert.deepEqual(started, [Keys.job(DATE)], 'the sweeper starts the night again');
  const b = await untilIdle(clock, runBilling(billing(ns, ns.clients, 'B', clock), { date: DATE, worker: 'B', config: night }));
  assert.equal(b.outcome, 'completed');
  assert.equal(b.invoicesRecorded, 0, 'every chunk was already done: B only completes');
  // B's first sighting shows A's last rvn, and B claims once it has stayed a full lease on B's poll grid.
  const poll = pollMsOf(night);
  assert.equal(b.seconds, (Math.ceil(night.leaseMs / poll) * poll) / 1000, "B waited out A's lease, exactly, and nothing more");
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('dies between the job row DONE and the release: the lease lapses by itself; the next trigger finds DONE and claims nothing', async () => {
  const ns = await namespace();
  // On virtual time A's night takes no time at all, so it reaches its DONE write inside its stop time on any machine
  // (in real time a loaded machine could stop A at its 600 ms stop time first: a lost lease, not this crash).
  const clock = new VirtualClock();
  const a = dyingClients(ns, isDoneWrite, 'after');
  await assert.rejects(untilIdle(clock, runBilling(billing(ns, a, 'A', clock), { date: DATE, worker: 'A', config: night })), { name: 'ProcessDied' });
  a.destroy();
  const b = await untilIdle(clock, runBilling(billing(ns, ns.clients, 'B', clock), { date: DATE, worker: 'B', config: night }));
  assert.equal(b.outcome, 'already-done');
  assert.equal(b.token, undefined, 'no claim: the DONE row is read first');
  assert.equal(b.seconds, 0, "B did not wait out A's lease: it read DONE first");
  const report = await auditNight(ns);
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('dies between its claim (epoch + 1) and the raise of the job row: no claim marker anywhere; the next claimant waits out the lease, raises, completes', async () => {
  const ns = await namespace();
  const clock = new VirtualClock();
  const a = dyingClients(ns, isJobRowRaise, 'before');
  await assert.rejects(untilIdle(clock, runBilling(billing(ns, a, 'A', clock), { date: DATE, worker: 'A', config: night })), { name: 'ProcessDied' });
  a.destroy();
  const lock = await readLock({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, Keys.lock(DATE));
  assert.equal(lock?.holder, 'A', 'A claimed the lease ...');
  assert.equal(
    await fence.readJob({ jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs) }, Keys.job(DATE)),
    undefined,
    '... and raised nothing',
  );
  const b = await untilIdle(clock, runBilling(billing(ns, ns.clients, 'B', clock), { date: DATE, worker: 'B', config: night }));
  assert.equal(b.outcome, 'completed');
  assert.equal(b.token, Number(lock?.epoch) + 1, "B claimed after A's lease lapsed, with the next epoch");
  const poll = pollMsOf(night);
  assert.equal(b.seconds, (Math.ceil(night.leaseMs / poll) * poll) / 1000, "B waited out A's lease from its claim, exactly, and nothing more");
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
  const dying = dyingClients(ns, (command, input) => isItemBump(command, input) && ++bumps === diesAt, 'after');
  await assert.rejects(bumpEpochs({ locks: new DynamoLockStore(dying.ddb, ns.tables.locks) }, { by, runId: 'restore-1', dryRun: false }), {
    name: 'ProcessDied',
  });
  dying.destroy();
  const half = await epochs();
  const bumped = [...before.keys()].filter((k) => half.get(k) !== before.get(k)).sort();
  assert.equal(bumped.length, diesAt, `the bump died after its item ${diesAt} landed`);
  for (const k of bumped) assert.equal(half.get(k), before.get(k)! + by);
  const again = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by, runId: 'restore-1', dryRun: false });
  assert.deepEqual([...again.alreadyBumped].sort(), bumped, 'the items the first try bumped are not bumped again');
  assert.equal(again.changed.length, before.size - diesAt);
  const after = await epochs();
  for (const [k, epoch] of before) assert.equal(after.get(k), epoch + by, `${k} bumped exactly once`);
});

test('the restore bump dies between its two steps, after the floor and before the items: the same run id again bumps the items, not the floor', async () => {
  const ns = await namespace();
  const before = new Map(['a', 'b', 'c'].map((k, i) => [`restore-test/${k}`, 5 * (i + 1)]));
  for (const [pk, epoch] of before) await ns.clients.ddb.send(new PutCommand({ TableName: ns.tables.locks, Item: { pk, epoch } }));
  const store = new DynamoLockStore(ns.clients.ddb, ns.tables.locks);
  const floor = await store.readFloor();
  const by = 1_000_000;
  const dying = dyingClients(ns, isFloorRaise, 'after');
  await assert.rejects(bumpEpochs({ locks: new DynamoLockStore(dying.ddb, ns.tables.locks) }, { by, runId: 'restore-1', dryRun: false }), {
    name: 'ProcessDied',
  });
  dying.destroy();
  assert.equal(await store.readFloor(), floor + by, 'the floor is raised: every new key starts above it ...');
  for (const [pk, epoch] of before) assert.equal((await store.read(pk))?.epoch, epoch, `... but ${pk} is not bumped: the table is not ready`);
  const again = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by, runId: 'restore-1', dryRun: false });
  assert.deepEqual(again.floor, { from: floor + by, to: floor + by, alreadyRaised: true }, 'the floor is not raised twice');
  assert.deepEqual(again.changed.map((c) => c.key).sort(), [...before.keys()].sort());
  for (const [pk, epoch] of before) assert.equal((await store.read(pk))?.epoch, epoch + by, `${pk} bumped exactly once`);
  const fresh = await store.claim('restore-test/new', { free: true }, { holder: 'A', leaseMs: 600, rvn: 'r', wallIso: new Date(0).toISOString() });
  assert.equal(fresh.ok && fresh.item.epoch, floor + by + 1, 'a key the table lacked starts above the floor');
});

test("handover: the new writer dies between its flip and its epoch bump; the next writer's handover works and the old writer's writes are refused", async () => {
  const ns = await namespace();
  const clock = new VirtualClock();
  const role = 'payments';
  const config: HandoverConfig = { leaseMs: 600, renewMs: 150, marginMs: 150, claimBudget: 3, waitMarginMs: 100 };
  const writer = (clients: Clients, name: string) => {
    const c = onClock(clients, clock);
    return {
      deps: { locks: new DynamoLockStore(c.ddb, ns.tables.locks), clock, events: new Events(name, clock) },
      fence: new EpochFence({ ledger: new DynamoLedgerStore(c.ddb, ns.tables.jobs), clock }, writerLedgerKey(role)),
    };
  };
  const a = await handover(writer(ns.clients, 'A').deps, role, 'A', config, writer(ns.clients, 'A').fence); // nobody held it: no wait
  await a.ledger.append({ amount: 1 });
  // B flips the writer lease (epoch + 1), waits A out (lease + margin from its flip), and dies as it sends the bump:
  // the store never hears of B.
  const dying = dyingClients(ns, (command, input) => updateOf(command, input) === 'SET fence = :e', 'before');
  const b = writer(dying, 'B');
  const bFlippedAt = clock.monotonicMs();
  const bDies = handover(b.deps, role, 'B', config, b.fence).catch((err: unknown) => err);
  await clock.advance(config.leaseMs + config.waitMarginMs);
  assert.equal(((await bDies) as Error).name, 'ProcessDied');
  assert.equal(clock.monotonicMs(), bFlippedAt + config.leaseMs + config.waitMarginMs);
  dying.destroy();
  assert.throws(() => a.lease.check(), LeaseLostError, "A's next renewal met B's flip: A's writer lease is lost");
  const ledger = writer(ns.clients, 'C').fence;
  assert.equal((await ledger.head()).epoch, a.epoch, "the store's fence is still A's epoch");
  // C flips over B's epoch and waits B's lease + margin out from its flip, exactly.
  let cReady: number | undefined;
  const cHandover = handover(writer(ns.clients, 'C').deps, role, 'C', config, ledger).then((w) => ((cReady = clock.monotonicMs()), w));
  const cFlippedAt = clock.monotonicMs();
  await clock.advance(config.leaseMs + config.waitMarginMs - 1);
  assert.equal(cReady, undefined, 'not 1 ms before lease + margin from its flip');
  await clock.advance(1);
  const c = await cHandover;
  assert.equal(cReady, cFlippedAt + config.leaseMs + config.waitMarginMs);
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
  assert.equal(clock.timers, 0);
});

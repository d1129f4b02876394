/**
 * Leader election and the epoch fence in this process (reference Part 7): the queue, the epochs, resign, observe,
 * onLost, the restore bump on the counter, the fence's refusals and the ledger checker. The watch (a resign found at
 * the next poll, a silent predecessor found a lease after its last rvn) runs on virtual time and the in-memory lock
 * store, every instant computed from the config; the rest on DynamoDB Local.
 * A silent predecessor, pauses, kills and clock faults are real processes: election-processes.test.ts.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import { candidateKey, Election, roleKey, type CampaignOptions, type Leadership } from '../../lib/election/election';
import { EpochFence, LedgerWriter, entryKey, ledgerViolations, type LedgerEntry } from '../../lib/election/epoch-fence';
import { ConfigError, FencedOutError, StopTimePassedError, VersionConflictError } from '../../lib/core/errors';
import { Events, type FencepostEvent } from '../../lib/core/events';
import { pollMsOf } from '../../lib/core/lease';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import type { LockStore } from '../../lib/core/store/lock';
import { bumpEpochs } from '../../lib/core/restore';
import { localClients } from '../../lib/core/aws/clients';
import { startDynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { namespace, type Namespace } from '../support/stack';
import { onVirtualTime } from '../support/virtual-time';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';

const fast: LeaseConfig = { leaseMs: 900, renewMs: 250, marginMs: 200, claimBudget: 3 };

async function setup(t: TestContext) {
  const ns = await namespace();
  const seen: FencepostEvent[] = [];
  const deps = (name: string) => ({
    locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks),
    clock: systemClock,
    events: new Events(name, systemClock).on((e) => seen.push(e)),
  });
  const fence = new EpochFence({ ledger: new DynamoLedgerStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock }, 'ledger/pacer');
  return { ns, seen, deps, fence, ...campaignsEndWith(t) };
}

/**
 * Campaigns that end with the test, passed or failed: a waiting one is aborted (it resigns), a leading one resigns.
 * Without this, a failed assertion would leave candidates renewing and polling, and the file would never exit.
 */
function campaignsEndWith(t: TestContext) {
  const stop = new AbortController();
  const leaders: Leadership[] = [];
  t.after(async () => {
    stop.abort();
    await Promise.all(leaders.map((l) => l.resign().catch(() => false)));
  });
  const campaign = (election: Election, candidate: string, options: Omit<CampaignOptions, 'signal'> = {}): Promise<Leadership> => {
    const leads = election.campaign(candidate, { ...options, signal: stop.signal });
    leads.then((l) => leaders.push(l)).catch(() => undefined); // an aborted wait rejects: the test has already ended
    return leads;
  };
  return { campaign };
}

/** One candidate's deps on virtual time: the real store, whose calls take no virtual time (test/support/virtual-time.ts). */
function virtual(ns: Namespace, seen: FencepostEvent[]) {
  const clock = new VirtualClock();
  const store = onVirtualTime(ns.clients.ddb, clock);
  const deps = { locks: new DynamoLockStore(store.ddb, ns.tables.locks), clock, events: new Events('A', clock).on((e) => seen.push(e)) };
  return { clock, store, deps };
}

/** Resolves once `candidate` has joined the queue (its `campaign` event): joins started after it queue behind it. */
async function joined(seen: readonly FencepostEvent[], candidate: string, withinMs = 30_000): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!seen.some((e) => e.event === 'campaign' && e.candidate === candidate)) {
    if (performance.now() > deadline) throw new Error(`${candidate} did not join within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Candidates on virtual time and one in-memory lock store: every poll, renewal and stop time at an instant the test
 * computes. `kill` makes a candidate's process die: from then on its calls are never answered (as under SIGKILL).
 */
function memoryElection(role: string) {
  const clock = new VirtualClock();
  const store = new MemoryLockStore();
  const seen: FencepostEvent[] = [];
  const dead = new Set<string>();
  const storeOf = (name: string): LockStore =>
    new Proxy(store, {
      get: (target, method: keyof LockStore) => {
        const f = target[method] as (...args: unknown[]) => Promise<unknown>;
        return (...args: unknown[]) => (dead.has(name) ? new Promise(() => undefined) : f.apply(target, args));
      },
    });
  const election = (name: string) =>
    new Election({ locks: storeOf(name), clock, events: new Events(name, clock).on((e) => seen.push(e)) }, role, fast);
  const at = (event: FencepostEvent['event'], worker: string) => seen.find((e) => e.event === event && e.worker === worker)?.monoMs;
  return { clock, store, seen, election, at, kill: (name: string) => void dead.add(name) };
}

test('candidates queue in sequence; the lowest leads with its sequence as epoch; resign hands over at the next poll (virtual time)', async () => {
  const w = memoryElection('pacer');
  const poll = pollMsOf(fast);
  const a = await w.election('A').campaign('A'); // at 0, alone: leads at once
  assert.equal(a.epoch, 1);
  const bJoinsAt = poll / 4; // each joins off the others' grids, so no poll falls at the instant of a resign
  const cJoinsAt = poll / 2;
  await w.clock.advance(bJoinsAt);
  const bLeads = w.election('B').campaign('B');
  await w.clock.advance(cJoinsAt - bJoinsAt);
  const cLeads = w.election('C').campaign('C');
  await w.clock.advance(0);
  const view = await w.election('O').observe();
  assert.deepEqual(
    { leader: view.leader, epoch: view.epoch, queue: view.queue, last: view.lastEpoch },
    { leader: 'A', epoch: 1, queue: [1, 2, 3], last: 3 },
  );
  // A resigns: B, which reads A's item every poll period from its join, finds it deleted at its next poll and leads
  // then (it does not wait out A's lease).
  const aResignsAt = 3 * fast.renewMs + poll / 8;
  await w.clock.advance(aResignsAt - w.clock.monotonicMs());
  assert.equal(await a.resign(), true);
  const nextPoll = (joinedAt: number, after: number) => joinedAt + (Math.floor((after - joinedAt) / poll) + 1) * poll;
  await w.clock.advance(nextPoll(bJoinsAt, aResignsAt) - w.clock.monotonicMs());
  const b = await bLeads;
  assert.equal(b.epoch, 2);
  assert.equal(w.at('leading', 'B'), nextPoll(bJoinsAt, aResignsAt), "B leads at its first poll after A's resign");
  const gone = w.seen.find((e) => e.event === 'predecessor-gone' && e.seq === 2);
  assert.equal(gone?.event === 'predecessor-gone' && gone.how, 'resigned');
  assert.equal(
    b.reads.predecessors[1],
    (nextPoll(bJoinsAt, aResignsAt) - bJoinsAt) / poll + 1,
    "B read A's item once a poll period, from its join to A's departure",
  );
  assert.ok(!w.seen.some((e) => e.event === 'predecessor-gone' && e.seq === 3), "C watched B, not A: A's departure did not reach it");
  const bResignsAt = w.clock.monotonicMs() + 2 * fast.renewMs + poll / 8;
  await w.clock.advance(bResignsAt - w.clock.monotonicMs());
  await b.resign();
  await w.clock.advance(nextPoll(cJoinsAt, bResignsAt) - w.clock.monotonicMs());
  const c = await cLeads;
  assert.equal(c.epoch, 3);
  assert.equal(w.at('leading', 'C'), nextPoll(cJoinsAt, bResignsAt), "C leads at its first poll after B's resign");
  assert.deepEqual(Object.keys(c.reads.predecessors), ['2'], "C only ever read B's item");
  assert.equal(await w.store.read(candidateKey('pacer', 1)), undefined, "a resigned candidate's item is deleted");
  assert.equal((await w.store.readRole(roleKey('pacer')))?.epoch, 3, 'the counter stays: never deleted, never reset');
  await c.resign();
  assert.equal(w.clock.timers, 0);
});

test("a silent predecessor is found gone a full lease after its last rvn on the successor's clock; the dead leader's stop time falls before (virtual time)", async () => {
  const w = memoryElection('relay');
  const poll = pollMsOf(fast);
  let aLostAt: number | undefined;
  const a = await w.election('A').campaign('A', { onLost: () => (aLostAt = w.clock.monotonicMs()) }); // at 0
  const bJoinsAt = poll / 2; // off A's renewal grid
  await w.clock.advance(bJoinsAt);
  let bLedAt: number | undefined;
  const bLeads = w
    .election('B')
    .campaign('B')
    .then((l) => ((bLedAt = w.clock.monotonicMs()), l));
  const killedAt = 4 * fast.renewMs + poll / 4; // just after A's 4th renewal
  await w.clock.advance(killedAt - w.clock.monotonicMs());
  w.kill('A'); // A's process dies: it renews nothing more, and nothing it sends is answered
  const lastRvnAt = Math.floor(killedAt / fast.renewMs) * fast.renewMs;
  // B reads A's item every poll from its join; the first read that shows A's last rvn starts the count of a lease.
  const firstSeenAt = bJoinsAt + Math.ceil((lastRvnAt - bJoinsAt) / poll) * poll;
  const expected = firstSeenAt + fast.leaseMs;
  await w.clock.advance(expected - 1 - w.clock.monotonicMs());
  assert.equal(bLedAt, undefined, `B does not lead 1 ms before ${expected}`);
  await w.clock.advance(1);
  const b = await bLeads;
  assert.equal(bLedAt, expected, "B leads at the first read showing A's last rvn, plus A's declared lease");
  assert.ok(bLedAt - lastRvnAt >= fast.leaseMs && bLedAt - lastRvnAt < fast.leaseMs + poll, 'within a poll of last rvn + lease, never before');
  assert.equal(b.epoch, 2);
  const gone = w.seen.find((e) => e.event === 'predecessor-gone' && e.seq === 2);
  assert.equal(gone?.event === 'predecessor-gone' && gone.how, 'found-gone');
  // A, had it only been paused, stopped at its own stop time: its last renewal's sent_at + lease − margin, before B led.
  assert.equal(a.stopAtMs, lastRvnAt + fast.leaseMs - fast.marginMs);
  assert.equal(aLostAt, a.stopAtMs, "A's watchdog fired at its stop time ...");
  assert.ok(aLostAt < bLedAt, '... before B led: no overlap');
  assert.deepEqual((await w.election('O').observe()).queue, [2], "A's item and sequence are gone");
  await b.resign();
  assert.equal(w.clock.timers, 0);
});

test('onLost fires at the stop time when the renewals fail, not before (virtual time)', async (t) => {
  const { ns, seen, campaign } = await setup(t);
  const { clock, deps } = virtual(ns, seen);
  let lostAt: number | undefined;
  const a = await campaign(new Election(deps, 'lost', fast), 'A', { onLost: () => (lostAt = clock.monotonicMs()) });
  const stopAt = a.stopAtMs;
  // As a successor that found A silent would: A's item goes, so A's next renewal fails on its condition.
  await ns.clients.ddb.send(new DeleteCommand({ TableName: ns.tables.locks, Key: { pk: candidateKey('lost', a.epoch) } }));
  await clock.advance(stopAt - clock.monotonicMs() - 1);
  assert.ok(
    seen.some((e) => e.event === 'lease-lost'),
    'a renewal went out and found the item gone',
  );
  assert.equal(lostAt, undefined, 'not before the stop time');
  await clock.advance(1);
  assert.equal(lostAt, stopAt, 'at the stop time');
  assert.equal(seen.filter((e) => e.event === 'leader-lost').length, 1);
  await a.resign();
});

test('a renewal answered after the stop time does not bring the leadership back: check and act refuse, and renewals stop (virtual time)', async (t) => {
  const { ns, seen, campaign } = await setup(t);
  const { clock, deps, store } = virtual(ns, seen);
  let lostAt: number | undefined;
  const a = await campaign(new Election(deps, 'late', fast), 'A', { onLost: () => (lostAt = clock.monotonicMs()) });
  const stopAt = a.stopAtMs;
  // The first renewal (due a renewal period after the campaign started the heartbeat) lands at once, but its answer
  // comes 1 ms after the stop time it should have moved on.
  store.holdNextUpdate(stopAt - (clock.monotonicMs() + fast.renewMs) + 1);
  await clock.advance(stopAt - clock.monotonicMs());
  assert.equal(lostAt, stopAt, 'onLost at the stop time, the renewal still unanswered');
  const sent = store.updatesSentAt.length;
  await clock.advance(3 * fast.leaseMs); // the late answer comes back, and time goes on
  assert.equal(a.stopAtMs, stopAt, 'the late answer did not move the stop time on');
  assert.throws(() => a.check(), StopTimePassedError);
  await assert.rejects(
    a.act(() => 'acted'),
    StopTimePassedError,
  );
  assert.equal(seen.filter((e) => e.event === 'leader-lost').length, 1);
  // No renewal after the loss: the successor would find the item silent a lease later.
  assert.equal(store.updatesSentAt.length, sent, 'no renewal was sent after the loss');
  assert.equal(clock.timers, 0, 'no heartbeat and no watchdog left running');
});

test('the epoch fence: the first write of a new epoch raises it; a lower epoch is refused; versions have no gap and no twin', async (t) => {
  const { fence, seen, deps } = await setup(t);
  const events = deps('L').events;
  const guard = { check: () => undefined };
  const one = new LedgerWriter(fence, guard, 1, 'A', 0, { events });
  await one.append({ n: 1 });
  await one.append({ n: 2 });
  const two = new LedgerWriter(fence, guard, 2, 'B', (await fence.head()).version, { events });
  await two.append({ n: 3 });
  await assert.rejects(one.append({ n: 4 }), (e: unknown) => e instanceof FencedOutError && e.fence === 2 && e.token === 1);
  assert.ok(seen.some((e) => e.event === 'append-refused' && e.epoch === 1));
  // A writer of the current epoch that is behind moves on from the head (a version conflict, not a refusal).
  const late = new LedgerWriter(fence, guard, 2, 'B', 1, { events });
  const entry = await late.append({ n: 5 });
  assert.equal(entry.version, 4);
  await assert.rejects(fence.append(2, 4, 'B'), VersionConflictError);
  await assert.rejects(fence.raise(1), FencedOutError, 'the bump never lowers the fence');
  assert.deepEqual(await fence.raise(3), { epoch: 3, version: 4 });
  const entries = await fence.entries();
  assert.deepEqual(
    entries.map((e) => [e.version, e.epoch]),
    [
      [1, 1],
      [2, 1],
      [3, 2],
      [4, 2],
    ],
  );
  assert.deepEqual(ledgerViolations(entries, await fence.head()), []);
});

test('the ledger checker finds a twin version, a gap, an epoch that went down and two writers under one epoch', () => {
  const e = (version: number, epoch: number, pk = entryKey('ledger/x', version), writer = `w${epoch}`): LedgerEntry => ({
    pk,
    version,
    epoch,
    writer,
    written_at: '',
  });
  assert.deepEqual(ledgerViolations([e(1, 1), e(2, 2)], { epoch: 2, version: 2 }), []);
  assert.match(ledgerViolations([e(1, 1), e(1, 1, 'ledger/x#dup')], { epoch: 1, version: 2 }).join('\n'), /version 1 is in the ledger 2 times/);
  assert.match(ledgerViolations([e(1, 1), e(3, 1)], { epoch: 1, version: 3 }).join('\n'), /a gap or a duplicate/);
  assert.match(ledgerViolations([e(1, 2), e(2, 1)], { epoch: 2, version: 2 }).join('\n'), /written with epoch 1 after version 1 had epoch 2/);
  assert.match(ledgerViolations([e(1, 1)], { epoch: 1, version: 2 }).join('\n'), /head says version 2/);
  assert.deepEqual(ledgerViolations([e(1, 1, undefined, 'A'), e(2, 2, undefined, 'B'), e(3, 2, undefined, 'C')], { epoch: 2, version: 3 }), [
    'epoch 2 was written by B and C: two writers under one epoch',
  ]);
});

test('the restore bump raises the role counter, so every later leader has an epoch above every old one', async (t) => {
  const { deps, ns, campaign } = await setup(t);
  const a = await campaign(new Election(deps('A'), 'writer', fast), 'A');
  await a.resign();
  await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by: 1_000_000, runId: 'restore-1', dryRun: false });
  const b = await campaign(new Election(deps('B'), 'writer', fast), 'B');
  assert.equal(b.epoch, 1_000_002, 'the counter was 1, bumped to 1,000,001; the next candidate takes 1,000,002');
  await b.resign();
});

test('bad names are refused before anything is written', async (t) => {
  const { deps, ns } = await setup(t);
  assert.throws(() => new Election(deps('A'), 'a/b', fast), ConfigError);
  await assert.rejects(new Election(deps('A'), 'ok', fast).campaign('has space'), ConfigError);
  const role = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { pk: roleKey('ok') }, ConsistentRead: true }));
  assert.equal(role.Item, undefined);
});

test('a removal cancelled for a transient reason is sent again: a resign that met a throttled transaction still leaves the queue', async (t) => {
  const { ns, seen, campaign } = await setup(t);
  const proxy = await startDynamoDbProxy({ target: ns.endpoints.dynamodb });
  const clients = localClients({ dynamodb: proxy.endpoint });
  try {
    const deps = (name: string) => ({
      locks: new DynamoLockStore(clients.ddb, ns.tables.locks),
      clock: systemClock,
      events: new Events(name, systemClock).on((e) => seen.push(e)),
    });
    const a = await campaign(new Election(deps('A'), 'throttled', fast), 'A');
    const bLeads = campaign(new Election(deps('B'), 'throttled', fast), 'B');
    await joined(seen, 'B');
    // The next transaction (A's resign: delete its item, leave the queue) is cancelled with a ThrottlingError reason.
    proxy.inject({ kind: 'throttle-cancel', count: 1, operation: 'TransactWriteItems' });
    assert.equal(await a.resign(), true);
    assert.equal(proxy.stats().injected['throttle-cancel'], 1, 'the cancellation did happen');
    const b = await bLeads;
    const gone = seen.find((e) => e.event === 'predecessor-gone' && e.worker === 'B');
    assert.equal(gone?.event === 'predecessor-gone' && gone.how, 'resigned', "B found A's item deleted, not silent for a lease");
    assert.deepEqual((await new Election(deps('O'), 'throttled', fast).observe()).queue, [2], "A's sequence left the queue");
    await b.resign();
  } finally {
    clients.destroy();
    await proxy.stop();
  }
});

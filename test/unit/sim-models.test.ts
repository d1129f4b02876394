/** The simulator's models, each on its own (lib/sim): engine, clocks, workers, network, authorities, store, sweeper. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkerClock } from '../../lib/sim/clocks';
import { Rng, Sim } from '../../lib/sim/engine';
import { Holder } from '../../lib/sim/holder';
import { DynamoLockItem, ItemClaimant } from '../../lib/sim/lock-item';
import { ConsensusLockService } from '../../lib/sim/lock-service';
import { RedisPrimaryReplica, RedlockMaster, redlockAcquire } from '../../lib/sim/redis';
import { FencedStore, Manifest, fenceAccepts } from '../../lib/sim/store';
import { SimSweeper } from '../../lib/sim/sweeper';
import { Network, Worker } from '../../lib/sim/worker';

const T = { leaseMs: 10_000, renewMs: 3_000, marginMs: 2_000 };

test('engine: events run in true-time order, ties in the order scheduled; the same seed gives the same numbers', () => {
  const sim = new Sim();
  const seen: string[] = [];
  sim.at(20, () => seen.push('b'));
  sim.at(10, () => seen.push('a'));
  sim.at(20, () => seen.push('c'));
  sim.at(5, () => sim.after(10, () => seen.push('a2')));
  sim.run();
  assert.deepEqual(seen, ['a', 'a2', 'b', 'c']);
  const [x, y] = [new Rng(42), new Rng(42)];
  assert.deepEqual([x.next(), x.next()], [y.next(), y.next()]);
  assert.notEqual(new Rng(1).next(), new Rng(2).next());
});

test('clocks: the monotonic clock runs at its rate; the wall clock has an offset and steps', () => {
  const c = new WorkerClock({ rate: 0.01, offsetMs: 3_000, steps: [{ at: 16_000, byMs: -3_000 }] });
  assert.equal(c.monotonic(10_000), 10_100);
  assert.equal(c.trueAtMonotonic(10_100), 10_000);
  assert.equal(c.wall(10_000), 13_000);
  assert.equal(c.wall(16_000), 16_000);
  assert.equal(new WorkerClock({ steps: [{ at: 16_000, byMs: -3_000 }] }).wall(16_000), 13_000, 'a step back at 16.0');
});

test('worker: a pause defers what it was about to do to its wake-up; a crash drops everything after it', () => {
  const sim = new Sim();
  const w = new Worker(sim, 'A');
  w.pause(4_000, 15_000);
  const done: number[] = [];
  w.act(3_900, () => done.push(sim.now));
  w.act(4_000, () => done.push(sim.now));
  const v = new Worker(sim, 'B');
  v.crash(21_000);
  v.act(20_000, () => done.push(-sim.now));
  v.act(22_000, () => done.push(-sim.now));
  sim.run();
  assert.deepEqual(done, [3_900, 19_000, -20_000]);
  assert.ok(sim.rows.some((r) => r.actor === 'A' && /freezes/.test(r.event) && r.t === 4_000));
});

test('network: a message arrives after the delay, a lost or cut one never does; a call with no answer times out', () => {
  const sim = new Sim();
  const net = new Network(sim, { delayMs: 50 });
  const arrived: number[] = [];
  net.send('a', 'b', () => arrived.push(sim.now));
  net.cut('a', 'c');
  assert.equal(
    net.send('a', 'c', () => arrived.push(-1)),
    false,
  );
  assert.equal(
    new Network(sim, { loss: 1 }).send('a', 'b', () => arrived.push(-2)),
    false,
  );
  const w = new Worker(sim, 'w');
  const replies: unknown[] = [];
  net.call(
    w,
    'dead',
    () => undefined,
    (r) => replies.push([r, sim.now]),
    100,
  );
  net.call(
    w,
    'live',
    () => 'ok',
    (r) => replies.push([r, sim.now]),
    1_000,
  );
  sim.run();
  assert.deepEqual(arrived, [50]);
  assert.deepEqual(replies, [
    [undefined, 100],
    ['ok', 100],
  ]);
});

test("lock service: the token is the key's create revision; keep-alives reset the deadline in memory; expiry deletes the key", () => {
  const sim = new Sim();
  const svc = new ConsensusLockService(sim, { revision: 6 });
  const a = svc.acquire('job', 'A', 10_000);
  assert.deepEqual(a, { ok: true, leaseId: 1, revision: 7 });
  assert.deepEqual(svc.acquire('job', 'B', 10_000), { ok: false, reason: 'key exists' });
  sim.at(3_000, () => assert.deepEqual(svc.keepAlive(1), { ok: true, deadline: 13_000 }));
  sim.run(12_999);
  assert.equal(svc.isLive('job'), true);
  sim.run(13_000);
  assert.equal(svc.isLive('job'), false);
  assert.equal(svc.revision, 8, 'the expiry delete moved the revision on');
});

test('lock service: a leader failover rebuilds every deadline at full length; the checkpoint rebuilds from the remaining TTL', () => {
  for (const [checkpointMs, expected] of [
    [undefined, 59_100],
    [500, 49_100 + 9_700],
  ] as const) {
    const sim = new Sim();
    const svc = new ConsensusLockService(sim, { revision: 14, electionMs: 2_100, checkpointMs });
    sim.at(40_200, () => svc.acquire('job', 'C', 10_000));
    sim.at(46_200, () => svc.keepAlive(1));
    svc.crashNode(0, 47_000);
    let deleted = 0;
    sim.at(40_201, () => svc.watchDelete('job', () => (deleted = sim.now)));
    sim.run(70_000);
    assert.equal(svc.leaderName(), 'n2');
    // Without a checkpoint the new leader restarts the TTL at its election (49.1 + 10); with one, from the last
    // persisted remaining TTL (46.2's deadline 56.2, persisted at 46.5: 9.7 s left).
    assert.equal(deleted, expected);
  }
});

test('lock service: with two of three nodes down nothing commits; a restore forgets tokens unless the revision is bumped', () => {
  const sim = new Sim();
  const svc = new ConsensusLockService(sim, { revision: 14 });
  svc.crashNode(1, 0);
  svc.crashNode(2, 0);
  sim.run(1);
  assert.deepEqual(svc.acquire('job', 'C', 10_000), { ok: false, reason: 'no quorum' });
  const s2 = new ConsensusLockService(new Sim(), { revision: 14 });
  const snap = s2.snapshot();
  assert.equal(s2.acquire('job', 'C', 10_000).ok && s2.revision, 15);
  s2.restore(snap);
  assert.equal((s2.acquire('job', 'D', 10_000) as { revision: number }).revision, 15, 'the same token again');
  s2.restore(snap, 1_000_000);
  assert.equal((s2.acquire('job', 'D', 10_000) as { revision: number }).revision, 1_000_015);
});

test('lock item: the three claim rules; the epoch only grows; release keeps the item', () => {
  const sim = new Sim();
  const item = new DynamoLockItem(sim);
  assert.equal(item.claim('A', 'clock-free', { claimantWallMs: 0, marginMs: 2_000, leaseMs: 10_000 }), 1);
  // lease_until 10.0 by A's wall clock; D's clock reads 10.5 + 3 = 13.5 at true 10.5.
  assert.equal(item.claim('D', 'margin', { claimantWallMs: 11_500, marginMs: 2_000, leaseMs: 10_000 }), undefined, '10.0 < 11.5 - 2 fails');
  assert.equal(
    item.claim('D', 'clock-free', { claimantWallMs: 11_500, marginMs: 2_000, leaseMs: 10_000, seenRvn: 'v0' }),
    undefined,
    'a changed rvn',
  );
  assert.equal(item.claim('D', 'no-margin', { claimantWallMs: 10_001, marginMs: 2_000, leaseMs: 10_000 }), 2);
  assert.equal(item.renew('A', 1, 5_000), false, 'the old holder can no longer renew');
  assert.equal(item.release('D', 2), true);
  assert.equal(item.read()?.epoch, 2);
  assert.equal(item.claim('A', 'clock-free', { claimantWallMs: 0, marginMs: 0, leaseMs: 10_000 }), 3);
});

test('lock item claimant: the clock-free rule is lib/core/lease.ts nextClaimStep: claim once the rvn stayed unchanged a full lease', () => {
  const c = new ItemClaimant('clock-free', 10_000, 2_000);
  const seen = { holder: 'A', rvn: 'v2', epoch: 1, leaseMs: 10_000, leaseUntil: 13_000 };
  assert.equal(c.decide({ ...seen, rvn: 'v1' }, 2_500, 0).claim, false);
  assert.equal(c.decide(seen, 3_500, 0).claim, false, 'a new rvn: the count starts again');
  assert.equal(c.decide(seen, 13_000, 0).claim, false);
  assert.deepEqual(c.decide(seen, 13_500, 0), { claim: true, seenRvn: 'v2' });
  assert.equal(new ItemClaimant('no-margin', 10_000, 2_000).decide(seen, 0, 13_001).claim, true);
  assert.equal(new ItemClaimant('margin', 10_000, 2_000).decide(seen, 0, 15_000).claim, false);
});

test('holder: stop time = sent_at + lease - margin, renewed from each send; the check before acting reads the monotonic clock', () => {
  const sim = new Sim();
  const w = new Worker(sim, 'A');
  const h = new Holder(w, 7, T, 0, (done) => done(true));
  assert.equal(h.stopAtTrue(), 8_000);
  sim.run(3_000);
  assert.equal(h.stopAtTrue(), 11_000);
  assert.equal(h.mayAct(), true);
  const fast = new Holder(new Worker(new Sim(), 'F', new WorkerClock({ rate: 0.25 })), 1, T, 0);
  assert.equal(fast.stopAtTrue(), 6_400, 'a clock 25 % fast reaches its stop reading early in true time');
});

test('store: fence <= :t accepts equal and refuses lower; the sweeper re-queue is conditional on the owner and fence seen', () => {
  assert.equal(fenceAccepts(undefined, 1), true);
  assert.equal(fenceAccepts(12, 12), true);
  assert.equal(fenceAccepts(12, 7), false);
  const sim = new Sim();
  const store = new FencedStore(sim);
  store.raise('A', 7);
  assert.equal(store.write('A', 7, 'b1'), true);
  store.raise('B', 12);
  assert.equal(store.write('A', 7, 'b2'), false);
  assert.equal(store.refused, 1);
  assert.equal(store.requeue('sweeper', 7, 7), false, 'B raised the fence in between');
  assert.equal(store.requeue('sweeper', 12, 12), true);
  assert.equal(store.row.state, 'QUEUED');
  const open = new FencedStore(sim, false);
  open.write('A', 7, 'b1');
  open.write('B', 12, 'b1');
  assert.deepEqual(open.writtenTwice(), ['b1']);
});

test('manifest: If-Match on the ETag last seen; a stale ETag gets 412', () => {
  const m = new Manifest(new Sim());
  assert.equal(m.putIfMatch('A', 'E0', 7), 'E1');
  assert.equal(m.putIfMatch('A', 'E1', 7, 'chunk 1'), 'E2');
  assert.equal(m.putIfMatch('B', m.read().etag, 12), 'E3');
  assert.equal(m.putIfMatch('A', 'E2', 7, 'chunk 2'), undefined);
  assert.equal(m.read().token, 12);
});

test('sweeper: re-queues only on a second sighting at least confirmMs after the first, never while a lease is live', () => {
  const sim = new Sim();
  const store = new FencedStore(sim);
  store.raise('B', 12);
  let live = true;
  sim.at(25_000, () => (live = false));
  let requeued = 0;
  const sw = new SimSweeper(
    sim,
    store,
    () => (live ? 'live' : 'gone'),
    () => (requeued = sim.now),
  );
  sim.run(60_000);
  assert.equal(requeued, 40_000, 'first sighting at 30, second at 40');
  assert.equal(sw.requeuedAt, 40_000);
});

test('redis: an async replica loses the lock and the last INCR in a failover; Redlock majorities can share a jumped node', () => {
  const sim = new Sim();
  const r = new RedisPrimaryReplica(sim, 100);
  r.seed('token', 14);
  assert.equal(r.setNx('lock', 'C', 10_000), true);
  assert.equal(r.incr('token'), 15);
  r.failover(50, 1_000);
  sim.run(2_000);
  assert.equal(r.setNx('lock', 'D', 10_000), true, 'the lock was lost');
  assert.equal(r.incr('token'), 15, 'and the increment');
  const masters = [1, 2, 3, 4, 5].map(
    (i) => new RedlockMaster(sim, `m${i}`, new WorkerClock(i === 3 ? { steps: [{ at: 3_000, byMs: 10_000 }] } : {})),
  );
  const one = redlockAcquire(masters, (m) => ['m1', 'm2', 'm3'].includes(m.name), 'k', 'c1', 10_000, 10);
  assert.deepEqual([one.held, one.validityMs], [true, 9_990]);
  sim.run(5_000);
  const two = redlockAcquire(masters, () => true, 'k', 'c2', 10_000, 10);
  assert.deepEqual(two.granted, ['m3', 'm4', 'm5']);
  assert.equal(redlockAcquire(masters, () => true, 'k', 'c3', 10_000, 10_000).held, false, 'no majority, and elapsed >= TTL');
});

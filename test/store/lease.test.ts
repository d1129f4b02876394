/**
 * The lease: clock-free claim, renew, stop time, release that keeps the epoch (Parts 2, 3, 5). Every test whose point
 * is an instant (a claim, a give-up, a stop time) runs on virtual time and the in-memory lock store, with the instant
 * computed from the config; the item's life on real DynamoDB Local (release keeps the epoch, one lease-lost) stays.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { systemClock, VirtualClock, type Clock } from '../../lib/core/clock';
import { type LeaseConfig } from '../../lib/core/config';
import { DEFAULTS } from '../../apps/billing/settings';
import { ClaimBudgetExhaustedError, ConfigError, LeaseLostError, StopTimePassedError } from '../../lib/core/errors';
import { isTransient } from '../../lib/core/conditions';
import { Events, type FencepostEvent } from '../../lib/core/events';
import { claim, nextClaimStep, pollMsOf, readLock, resume, sight, tryClaim, type LeaseDeps, type Sighting } from '../../lib/core/lease';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { EPOCH_FLOOR_KEY, type LockStore } from '../../lib/core/store/lock';
import { namespace } from '../support/stack';
import { onVirtualTime } from '../support/virtual-time';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';

const fast: LeaseConfig = { ...DEFAULTS, leaseMs: 900, renewMs: 300, marginMs: 200, claimBudget: 3 };

async function deps(worker: string): Promise<LeaseDeps & { seen: FencepostEvent[] }> {
  const clock = systemClock;
  const ns = await namespace();
  const seen: FencepostEvent[] = [];
  return { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock, events: new Events(worker, clock).on((e) => seen.push(e)), seen };
}

test('a free lock is claimed at once with epoch 1; release keeps the item and the epoch; the next claim gets epoch 2', async () => {
  const d = await deps('A');
  const a = await claim(d, 'billing#2026-09-28', 'A', fast);
  assert.equal(a.token, 1);
  assert.equal(d.seen.find((e) => e.event === 'sighted')?.waitMs, 0, 'no wait on a free lock');
  assert.equal(await a.release(), true);
  const after = await readLock(d, 'billing#2026-09-28');
  assert.ok(after, 'release never deletes the lock item');
  assert.equal(after.holder, undefined);
  assert.equal(after.epoch, 1, 'the epoch survives release');
  const b = await claim({ ...d, events: new Events('B', systemClock) }, 'billing#2026-09-28', 'B', fast);
  assert.equal(b.token, 2);
  await b.release();
});

test("the epoch floor's key is no lease: a claim of it is refused with a clear error, and nothing is written", async () => {
  const store = new MemoryLockStore();
  const d = { locks: store, clock: new VirtualClock() };
  await store.raiseFloor(10, 'r1');
  const before = await store.read(EPOCH_FLOOR_KEY);
  await assert.rejects(
    claim(d, EPOCH_FLOOR_KEY, 'A', fast),
    (err: Error) => err instanceof ConfigError && /reserved for the epoch floor/.test(err.message),
  );
  assert.deepEqual(await store.read(EPOCH_FLOOR_KEY), before, 'the floor is as it was');
  assert.equal((await claim(d, 'billing#2026-09-28', 'A', fast)).token, Number(before?.epoch) + 1, 'a new key starts above it');
});

test('the claim rule: claim when free, or once one rvn has stayed unchanged a full lease; a new rvn starts the count again', () => {
  const cfg = { leaseMs: 10_000, claimBudget: 3 };
  const held = (rvn: string): Sighting => ({ holder: 'A', epoch: 1, seenRvn: rvn, waitMs: 10_000 });
  assert.equal(pollMsOf(cfg), 500, 'a 10 s lease is re-read every 500 ms');
  assert.equal(pollMsOf({ leaseMs: 900 }), 100, 'never more often than every 100 ms');
  assert.equal(nextClaimStep(undefined, { waitMs: 0 }, 0, cfg).action, 'claim', 'a free lock is claimed at once');

  let step = nextClaimStep(undefined, held('v1'), 0, cfg);
  assert.deepEqual(step, { action: 'wait', waitMs: 500, newRvn: true, watch: { rvn: 'v1', unchangedMs: 0, waitedMs: 0 } });
  for (let i = 0; i < 19; i++) {
    step = nextClaimStep(step.watch, held('v1'), 500, cfg);
    assert.equal(step.action, 'wait', `after ${(i + 1) * 500} ms of v1 unchanged: not yet a lease`);
  }
  assert.equal(step.watch.unchangedMs, 9_500);
  assert.equal(step.action === 'wait' && step.waitMs, 500, 'the last wait is what is left of the lease');
  step = nextClaimStep(step.watch, held('v2'), 500, cfg);
  assert.deepEqual(step.watch, { rvn: 'v2', unchangedMs: 0, waitedMs: 10_000 }, 'a renewal (new rvn): the holder is alive, count again');
  assert.equal(step.action === 'wait' && step.newRvn, true);
  step = nextClaimStep(step.watch, held('v2'), 10_000, cfg);
  assert.equal(step.action, 'claim', "v2 unchanged for a full lease on the claimant's timer");
  assert.equal(
    nextClaimStep({ rvn: 'v9', unchangedMs: 0, waitedMs: 29_000 }, held('v10'), 1_000, cfg).action,
    'give-up',
    'the budget is counted in leases of waiting: 3 × 10 s',
  );
  assert.equal(
    nextClaimStep({ rvn: 'v9', unchangedMs: 0, waitedMs: 0 }, held('v9'), 9_999, cfg).action,
    'wait',
    'one ms short of a lease is not a lease',
  );
});

test('clock-free claim: a claimant that keeps seeing the rvn change never claims (the holder is alive), and gives up at its budget', async () => {
  // Virtual time on the in-memory lock store: the instant B gives up, and what it saw on the way, are exact.
  const clock = new VirtualClock();
  const store = new MemoryLockStore();
  const a = await claim({ locks: store, clock }, 'k', 'A', fast); // at 0
  a.startHeartbeat(); // A renews at renewMs, 2 × renewMs, ...: the rvn keeps changing
  const config = { ...fast, claimBudget: 2 };
  const poll = pollMsOf(config);
  const startAt = poll / 2; // B starts between two of A's renewals, so no poll of B falls at a renewal's instant
  await clock.advance(startAt);
  const bSeen: FencepostEvent[] = [];
  let gaveUpAt: number | undefined;
  const b = claim({ locks: store, clock, events: new Events('B', clock).on((e) => bSeen.push(e)) }, 'k', 'B', config).then(
    (lease) => lease,
    (err: unknown) => {
      gaveUpAt = clock.monotonicMs();
      return err;
    },
  );
  // B sights every poll period (the rvn never stays a lease), and gives up at the first sighting once it has waited
  // its budget of leases (A's declared lease) in all.
  const expectedAt = startAt + Math.ceil((config.claimBudget * fast.leaseMs) / poll) * poll;
  await clock.advance(expectedAt - 1 - clock.monotonicMs());
  assert.equal(gaveUpAt, undefined, `still watching 1 ms before ${expectedAt}`);
  await clock.advance(1);
  const outcome = await b;
  assert.ok(outcome instanceof ClaimBudgetExhaustedError, String(outcome));
  assert.equal(gaveUpAt, expectedAt, 'gave up at the sighting that completed its budget of two leases');
  // Each rvn B saw is reported once: A's claim, then each renewal that landed after B started and before its last poll.
  const lastReportedPoll = expectedAt - poll; // the give-up sighting reports nothing
  const renewalsSeen = Array.from({ length: Math.floor(lastReportedPoll / fast.renewMs) }, (_, i) => (i + 1) * fast.renewMs).filter(
    (at) => at > startAt,
  ).length;
  assert.ok(renewalsSeen >= 2, 'the case is the one meant: B saw A renew, more than once');
  assert.deepEqual(
    bSeen.map((e) => e.event),
    Array.from({ length: 1 + renewalsSeen }, () => 'sighted'),
    `B saw A's claim and its ${renewalsSeen} renewals, each once, and claimed nothing`,
  );
  a.check(); // A is still inside its stop time
  const item = await store.read('k');
  assert.equal(item?.holder, 'A');
  assert.equal(item?.epoch, 1, 'no claim happened');
  await a.release();
  assert.equal(clock.timers, 0);
});

test("a holder that stops renewing is taken over one full lease after its last rvn, on the claimant's own clock, with a higher token", async () => {
  // Virtual time on the in-memory lock store: the takeover instant is exact, on any machine.
  const clock = new VirtualClock();
  const store = new MemoryLockStore();
  const d = { locks: store, clock };
  const a = await claim(d, 'k', 'A', fast); // at 0
  a.startHeartbeat(); // A renews at renewMs, 2 × renewMs, ...
  const bSeen: FencepostEvent[] = [];
  let claimedAt: number | undefined;
  const b = claim({ ...d, events: new Events('B', clock).on((e) => bSeen.push(e)) }, 'k', 'B', fast).then((l) => {
    claimedAt = clock.monotonicMs();
    return l;
  }); // B sights at 0, then every poll period
  const poll = pollMsOf(fast);
  const watchMs = 1_000; // B watches A renew for a while (not a multiple of renewMs: no renewal at the instant A stops)
  await clock.advance(watchMs);
  await a.stopHeartbeat();
  await clock.advance(poll / 2); // off B's poll grid, so which poll first shows A's last rvn is not a tie
  const lastRenewalAt = clock.monotonicMs();
  await a.renew(); // A's last rvn, applied at lastRenewalAt (the store takes no virtual time)
  // The claim rule: B first sees the last rvn at its next poll (B polls at multiples of `poll` from 0, while the count
  // is below a lease every wait is a full poll), and claims once that rvn has stayed unchanged a full lease from there.
  const firstSeenAt = Math.ceil(lastRenewalAt / poll) * poll;
  const expectedClaimAt = firstSeenAt + fast.leaseMs;
  await clock.advance(expectedClaimAt - 1 - clock.monotonicMs());
  assert.equal(claimedAt, undefined, `not claimed 1 ms before ${expectedClaimAt}`);
  await clock.runUntilIdle(1_000); // bounded: a claimant that never claims fails here instead of hanging
  const bLease = await b;
  assert.equal(claimedAt, expectedClaimAt, 'claimed at the first poll that shows the last rvn, plus a full lease');
  assert.equal(bLease.stopAtMs, expectedClaimAt + fast.leaseMs - fast.marginMs, "the claim was sent then: B's stop time counts from it");
  assert.ok(claimedAt - lastRenewalAt >= fast.leaseMs, `never before last renewal + lease (${claimedAt - lastRenewalAt} ms)`);
  assert.ok(claimedAt - lastRenewalAt < fast.leaseMs + poll, `within a poll period of the formula, not a second lease`);
  assert.equal(bLease.token, a.token + 1);
  // B reports each rvn once: A's claim, every heartbeat renewal while B watched, and the last one.
  const renewals = Math.floor(watchMs / fast.renewMs);
  assert.deepEqual(
    bSeen.filter((e) => e.event === 'sighted').length,
    1 + renewals + 1,
    `B saw A's claim, its ${renewals} heartbeat renewals and its last renewal, each once`,
  );
  // B claimed a full lease after A's last renewal, past A's stop time: A sends nothing more, and stays stopped.
  assert.ok(a.stopAtMs < claimedAt, "B's claim falls after A's stop time");
  await assert.rejects(a.renew(), StopTimePassedError, 'renew after takeover → refused at the stop time');
  assert.throws(() => a.check(), StopTimePassedError, 'the loss is remembered for the next check');
  assert.equal(await a.release(), false, "a holder that lost the lock cannot release the next holder's lease");
  assert.equal((await readLock(d, 'k'))?.holder, 'B');
  await bLease.release();
  assert.equal(clock.timers, 0);
});

/** The lock store whose writes land when sent and are answered `ms` later on the virtual clock (reads answer at once). */
function answeredLate(store: LockStore, clock: VirtualClock, ms: number): LockStore {
  const late =
    <A extends unknown[], R>(write: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const out = await write.apply(store, args);
      await clock.sleep(ms);
      return out;
    };
  return Object.assign(Object.create(store) as LockStore, { claim: late(store.claim), renew: late(store.renew), release: late(store.release) });
}

test('the check before every action: stop time = sent_at + lease − margin, renewals move it', async () => {
  // Virtual time on the in-memory lock store, whose writes are answered a while after they land: the stop time must
  // count from when the request was sent, never from its answer.
  const clock = new VirtualClock({ monotonicMs: 5_000 });
  const answerMs = 40;
  const d = { locks: answeredLate(new MemoryLockStore(), clock, answerMs), clock };
  const claimSentAt = clock.monotonicMs();
  const claiming = claim(d, 'k', 'A', fast);
  await clock.advance(answerMs);
  const a = await claiming;
  assert.equal(a.stopAtMs, claimSentAt + fast.leaseMs - fast.marginMs, 'sent_at is read before the request, not at its answer');
  a.check();
  await clock.advance(400);
  const renewSentAt = clock.monotonicMs();
  const renewing = a.renew();
  await clock.advance(answerMs);
  await renewing;
  assert.equal(a.stopAtMs, renewSentAt + fast.leaseMs - fast.marginMs, 'the renewal moved it to its own sent_at + lease − margin');
  await clock.advance(a.stopAtMs - 1 - clock.monotonicMs());
  a.check(); // 1 ms before the stop time: act
  await clock.advance(1);
  assert.throws(
    () => a.check(),
    (err: unknown) => err instanceof StopTimePassedError && err.stopAtMs === renewSentAt + fast.leaseMs - fast.marginMs,
    'at the stop time: stop',
  );
  const releasing = a.release();
  await clock.advance(answerMs);
  assert.equal(await releasing, true);
});

test('the heartbeat stops at the stop time: no renewal is sent after it, whether they kept failing or one was answered after it', async () => {
  for (const fault of ['throttle', 'late'] as const) {
    const ns = await namespace();
    const clock = new VirtualClock();
    const store = onVirtualTime(ns.clients.ddb, clock);
    const d: LeaseDeps = { locks: new DynamoLockStore(store.ddb, ns.tables.locks), clock, random: () => 0.99, events: new Events('A', clock) };
    const a = await claim(d, 'k', 'A', fast);
    a.startHeartbeat();
    await clock.advance(fast.renewMs); // the first renewal is sent at renewMs and answered in time
    const stopAt = a.stopAtMs;
    assert.equal(stopAt, fast.renewMs + fast.leaseMs - fast.marginMs, 'the renewal moved the stop time on');
    const sentBefore = store.updatesSentAt.length;
    if (fault === 'throttle') store.throttleUpdates(true);
    else store.holdNextUpdate(stopAt - (clock.monotonicMs() + fast.renewMs) + 1); // the next one is answered 1 ms after it
    await clock.advance(3 * fast.leaseMs);
    const sent = store.updatesSentAt.slice(sentBefore);
    assert.ok(sent.length > 0 && sent[0] < stopAt, `${fault}: renewals went out before the stop time (${sent.join(', ')})`);
    const after = sent.filter((at) => at >= stopAt);
    assert.deepEqual(after, [], `${fault}: renewals sent at or after the stop time ${stopAt} (sent at ${sent.join(', ')})`);
    assert.throws(() => a.check(), StopTimePassedError, `${fault}: the lease is over locally`);
    assert.equal(a.stopAtMs, stopAt, `${fault}: no late answer moved the stop time on`);
    assert.equal(clock.timers, 0, `${fault}: the heartbeat stopped`);
    store.throttleUpdates(false);
    assert.equal(await a.release(), true);
  }
});

test('durations ignore the wall clock: a holder whose wall clock steps back 3 s stops at the same monotonic stop time', async () => {
  // Virtual time on the in-memory lock store: B's wall clock is stepped, C's is not; both claim and renew at the same
  // instants, so their stop times must be equal to the millisecond.
  const clock = new VirtualClock();
  let wallOffset = 0;
  const stepped: Clock = {
    monotonicMs: () => clock.monotonicMs(),
    wallMs: () => clock.wallMs() + wallOffset,
    sleep: (ms) => clock.sleep(ms),
    after: (ms, fn) => clock.after(ms, fn),
  };
  const store = new MemoryLockStore();
  const b = await claim({ locks: store, clock: stepped }, 'b', 'B', fast);
  const control = await claim({ locks: store, clock }, 'c', 'C', fast);
  b.startHeartbeat();
  control.startHeartbeat();
  const stepAt = fast.renewMs + fast.renewMs / 2; // between two renewals
  await clock.advance(stepAt);
  const wallBefore = stepped.wallMs();
  wallOffset = -3_000; // the wall clock the code sees is stepped back 3 s (Part 3's trace)
  assert.equal(stepped.wallMs(), wallBefore - 3_000);
  const lastRenewalAt = 3 * fast.renewMs; // one more renewal after the step, then both stop renewing
  await clock.advance(lastRenewalAt + 1 - clock.monotonicMs());
  await b.stopHeartbeat();
  await control.stopHeartbeat();
  const stopAt = lastRenewalAt + fast.leaseMs - fast.marginMs;
  assert.equal(b.stopAtMs, stopAt, "B's stop time counts from its last renewal on the monotonic clock, as without the step");
  assert.equal(control.stopAtMs, stopAt, 'the unstepped holder: the same stop time');
  await clock.advance(stopAt - 1 - clock.monotonicMs());
  b.check(); // the step did not stop B early ...
  await clock.advance(1);
  assert.ok(stepped.wallMs() < wallBefore + (stopAt - stepAt), 'the wall clock B sees lags true time');
  assert.throws(() => b.check(), StopTimePassedError, '... nor give it 3 s more: stopped on the monotonic clock, as without the step');
  assert.throws(() => control.check(), StopTimePassedError);
  await b.release();
  await control.release();
  assert.equal(clock.timers, 0);
});

test('no code path deletes a lock item or puts a TTL on it', () => {
  const root = path.resolve(__dirname, '..', '..');
  const offenders: string[] = [];
  for (const dir of ['lib', 'apps', 'cli', 'verify', 'bin']) {
    const walk = (d: string): void => {
      let entries: string[];
      try {
        entries = readdirSync(d);
      } catch {
        return;
      }
      for (const f of entries) {
        const p = path.join(d, f);
        if (!f.includes('.')) walk(p);
        else if (f.endsWith('.ts')) {
          // Code only: a comment may well say why there is no TTL.
          const text = readFileSync(p, 'utf8')
            .replace(/\/\*[\s\S]*?\*\//g, '')
            .replace(/\/\/.*$/gm, '');
          if (/DeleteCommand|DeleteItemCommand|DeleteRequest|UpdateTimeToLive|timeToLiveAttribute/.test(text)) offenders.push(path.relative(root, p));
        }
      }
    };
    walk(path.join(root, dir));
  }
  assert.deepEqual(offenders, [], 'no DynamoDB delete and no TTL anywhere in runtime code');
});

test('a lost lease is reported once: two renewals in flight when another holder took over emit one lease-lost between them', async () => {
  // Virtual time on the in-memory lock store: both renewals are sent inside A's stop time however loaded the machine
  // (on real time a slow store could push them past it, where they are refused locally and meet no loss at all).
  const clock = new VirtualClock();
  const seen: FencepostEvent[] = [];
  const d = { locks: new MemoryLockStore(), clock, events: new Events('A', clock).on((e) => seen.push(e)) };
  const a = await claim(d, 'k', 'A', fast);
  // B takes the lock over A's rvn, as a claimant that watched it unchanged for a full lease would.
  const b = await tryClaim(d, 'k', 'B', fast, await sight(d, 'k', fast));
  assert.equal(b, a.token + 1);
  const failures = await Promise.all([a.renew().catch((e: unknown) => e), a.renew().catch((e: unknown) => e)]);
  assert.ok(failures[0] instanceof LeaseLostError, String(failures[0]));
  assert.equal(seen.filter((e) => e.event === 'lease-lost').length, 1, 'one lease-lost event, however many renewals met the loss');
  assert.equal(failures[0], failures[1], 'both renewals throw the same loss');
});

test("resume: a first renewal that gets no answer is the store's transient error, not a lost lease; resuming again takes up the same token", async () => {
  for (const fault of ['throttled', 'answer lost'] as const) {
    const clock = new VirtualClock();
    const store = new MemoryLockStore({ clock });
    const d = { locks: store, clock };
    const claimed = await claim(d, 'k', 'A', fast);
    let failNext = true;
    const flaky: LeaseDeps = {
      ...d,
      locks: new Proxy(store, {
        get: (t, prop, receiver) =>
          prop !== 'renew'
            ? (Reflect.get(t, prop, receiver) as unknown)
            : async (...args: Parameters<MemoryLockStore['renew']>) => {
                if (!failNext) return t.renew(...args);
                failNext = false;
                if (fault === 'answer lost') await t.renew(...args); // applied, its answer lost
                throw Object.assign(new Error(`renew ${fault}`), { name: fault === 'throttled' ? 'ThrottlingException' : 'TimeoutError' });
              },
      }),
    };
    const err = await resume(flaky, 'k', 'A', claimed.token, fast).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.ok(err && !(err instanceof LeaseLostError), `${fault}: ${err?.name} must not say the lease was lost`);
    assert.ok(isTransient(err), `${fault}: the caller sees a transient error and may resume again`);
    const again = await resume(flaky, 'k', 'A', claimed.token, fast);
    assert.equal(again.token, claimed.token, `${fault}: the same holder and token`);
    again.check();
    assert.equal(await again.release(), true);
  }
});

/**
 * `Election.run`, the term a user of `fencepost/election` runs: the callbacks (started leading, stopped leading and
 * why, a new leader seen), the work's signal at the stop time, the AbortSignal that resigns at once, and the
 * settings validated together. On virtual time and the in-memory lock and ledger stores: every instant asserted is
 * computed from the settings and the moments the test chose, and the ledger is read back from its store.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import { ConfigError, FencedOutError, StopTimePassedError } from '../../lib/core/errors';
import { pollMsOf } from '../../lib/core/lease';
import type { LockStore } from '../../lib/core/store/lock';
import { candidateKey, Election, type LeaderView, type Leadership, type TermEnd } from '../../lib/election/election';
import { EpochFence, ledgerViolations } from '../../lib/election/epoch-fence';
import { MemoryLedgerStore } from '../../lib/testing/ledger-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';

const fast: LeaseConfig = { leaseMs: 900, renewMs: 250, marginMs: 200, claimBudget: 3 };
const poll = pollMsOf(fast);

/** One role on one clock and one store; `failRenewals(name)` makes that candidate's renewals answer 500 from then on. */
function world() {
  const clock = new VirtualClock();
  const store = new MemoryLockStore();
  const failing = new Set<string>();
  const storeOf = (name: string): LockStore =>
    new Proxy(store, {
      get: (target, method: keyof LockStore) => {
        const f = target[method] as (...args: unknown[]) => Promise<unknown>;
        if (method !== 'renew') return f.bind(target);
        return (...args: unknown[]) =>
          failing.has(name) ? Promise.reject(Object.assign(new Error('500'), { name: 'InternalServerError' })) : f.apply(target, args);
      },
    });
  const election = (name: string, config: Partial<LeaseConfig> = fast) => new Election({ locks: storeOf(name), clock }, 'pacer', config);
  const fence = new EpochFence({ ledger: new MemoryLedgerStore(clock), clock }, 'ledger/pacer');
  return { clock, store, fence, election, failRenewals: (name: string) => void failing.add(name) };
}

/** Resolves when `signal` aborts (the work of a leader that serves until it must stop). */
const aborted = (signal: AbortSignal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));

test('run: the leader works until its caller stops it, resigning at once; the waiting candidate saw it lead, then leads at its next poll and resigns when its work returns', async () => {
  const w = world();
  const stopA = new AbortController();
  const ends: Record<string, TermEnd[]> = { A: [], B: [] };
  const seenByB: Array<{ leader?: string; epoch?: number; self?: boolean }> = [];
  let aSignalAt: number | undefined;
  const aRun = w.election('A').run('A', {
    signal: stopA.signal,
    onStartedLeading: async (leadership) => {
      const ledger = await leadership.ledger(w.fence);
      await ledger.append({ n: 1 });
      await aborted(leadership.signal);
      aSignalAt = w.clock.monotonicMs();
    },
    onStoppedLeading: (end) => ends.A.push(end),
  });
  await w.clock.advance(0);
  const bJoinsAt = poll / 2;
  await w.clock.advance(bJoinsAt);
  let bLedAt: number | undefined;
  const bRun = w.election('B').run('B', {
    watchEveryMs: poll * 4,
    onNewLeader: (view: LeaderView & { self?: boolean }) => seenByB.push({ leader: view.leader, epoch: view.epoch, self: view.self }),
    onStartedLeading: async (leadership: Leadership) => {
      bLedAt = w.clock.monotonicMs();
      const ledger = await leadership.ledger(w.fence);
      await ledger.append({ n: 2 });
      await ledger.append({ n: 3 });
    },
    onStoppedLeading: (end) => ends.B.push(end),
  });
  await w.clock.advance(0);
  const stopAt = 5 * fast.renewMs + poll / 8; // off every grid: no poll or renewal falls at this instant
  await w.clock.advance(stopAt - w.clock.monotonicMs());
  stopA.abort();
  await w.clock.advance(0);
  assert.equal(await w.store.read(candidateKey('pacer', 1)), undefined, "A's candidate item is gone the instant its caller stopped it");
  assert.equal(aSignalAt, stopAt, "A's work saw its leadership's signal abort at that instant");
  assert.deepEqual(await aRun, { why: 'stopped', epoch: 1 });
  const nextPoll = bJoinsAt + (Math.floor((stopAt - bJoinsAt) / poll) + 1) * poll;
  await w.clock.advance(nextPoll - w.clock.monotonicMs());
  assert.deepEqual(await bRun, { why: 'resigned', epoch: 2 });
  assert.equal(bLedAt, nextPoll, "B leads at its first poll after A's resign");
  assert.deepEqual(ends, { A: [{ why: 'stopped', epoch: 1 }], B: [{ why: 'resigned', epoch: 2 }] }, 'onStoppedLeading once each, with why');
  assert.deepEqual(
    seenByB,
    [
      { leader: 'A', epoch: 1, self: undefined },
      { leader: 'B', epoch: 2, self: true },
    ],
    'B saw A lead while it waited, then itself',
  );
  const entries = await w.fence.entries();
  assert.deepEqual(
    entries.map((e) => [e.version, e.epoch, e.writer]),
    [
      [1, 1, 'A'],
      [2, 2, 'B'],
      [3, 2, 'B'],
    ],
  );
  assert.deepEqual(ledgerViolations(entries, await w.fence.head()), []);
  assert.deepEqual((await w.election('O').observe()).queue, [], 'both left the queue');
  assert.equal(w.clock.timers, 0, 'no timer left behind');
});

test("run: a leader whose renewals fail is told at its stop time, computed from its last answered renewal; its term ends 'lost'", async () => {
  const w = world();
  let signalAt: number | undefined;
  const ends: TermEnd[] = [];
  const run = w.election('A').run('A', {
    onStartedLeading: async (leadership) => {
      await aborted(leadership.signal);
      signalAt = w.clock.monotonicMs();
      assert.throws(() => leadership.check(), StopTimePassedError, 'past the signal, the leadership refuses to act');
    },
    onStoppedLeading: (end) => ends.push(end),
  });
  const failFrom = 3 * fast.renewMs + poll / 4; // just after the 3rd renewal was answered
  await w.clock.advance(failFrom);
  w.failRenewals('A');
  const lastAnsweredSentAt = Math.floor(failFrom / fast.renewMs) * fast.renewMs;
  const stopTime = lastAnsweredSentAt + fast.leaseMs - fast.marginMs;
  await w.clock.advance(stopTime - 1 - w.clock.monotonicMs());
  assert.equal(signalAt, undefined, 'not before the stop time');
  await w.clock.advance(1);
  const end = await run;
  assert.equal(signalAt, stopTime, 'the work is told at the stop time: last answered renewal sent + lease - margin');
  assert.equal(end.why, 'lost');
  assert.ok(end.error instanceof StopTimePassedError, String(end.error));
  assert.deepEqual(ends, [end]);
});

test("run: a work refused by the fence ends the term 'lost'; a work that fails otherwise resigns and rethrows", async () => {
  const w = world();
  const fenced = await w.election('A').run('A', {
    onStartedLeading: () => {
      throw new FencedOutError('ledger/pacer', 1, 7);
    },
  });
  assert.equal(fenced.why, 'lost');
  assert.ok(fenced.error instanceof FencedOutError);
  const ends: TermEnd[] = [];
  await assert.rejects(
    w.election('A').run('A', {
      onStartedLeading: () => {
        throw new Error('the work broke');
      },
      onStoppedLeading: (end) => ends.push(end),
    }),
    /the work broke/,
  );
  assert.equal(ends.length, 1);
  assert.equal(ends[0].why, 'resigned');
  assert.equal(ends[0].epoch, 2, 'a new term, a new epoch');
  assert.deepEqual((await w.election('O').observe()).queue, [], 'each term left the queue');
});

test('run: a waiting candidate stopped by its caller leaves the queue at once, not at its next poll', async () => {
  const w = world();
  const a = await w.election('A').campaign('A');
  const stopB = new AbortController();
  const ends: TermEnd[] = [];
  let started = false;
  const b = w.election('B').run('B', { signal: stopB.signal, onStartedLeading: () => void (started = true), onStoppedLeading: (e) => ends.push(e) });
  await w.clock.advance(poll / 2);
  assert.deepEqual((await w.election('O').observe()).queue, [1, 2]);
  let settled: TermEnd | undefined;
  void b.then((end) => (settled = end));
  stopB.abort();
  await w.clock.advance(0);
  assert.deepEqual(settled, { why: 'stopped' }, 'run returned at the instant of the abort');
  assert.deepEqual((await w.election('O').observe()).queue, [1], "B's candidacy left at the abort's instant");
  assert.equal(started, false);
  assert.deepEqual(ends, [{ why: 'stopped' }]);
  await a.resign();
  assert.equal(w.clock.timers, 0);
});

test('the settings are validated together before anything is written; absent ones take the defaults', async () => {
  const w = world();
  assert.throws(
    () => w.election('A', { leaseMs: 900, renewMs: 400 }),
    (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.includes('renewMs (400) must be at most leaseMs / 3')),
  );
  assert.throws(
    () => w.election('A', { leaseMs: 900, marginMs: 900 }),
    (err: unknown) =>
      err instanceof ConfigError && err.problems.some((p) => p.includes('renewMs')) && err.problems.some((p) => p.includes('marginMs')),
    'every problem at once (the default renewal is too long for this lease, and the margin is not below it)',
  );
  await assert.rejects(
    w.election('A').watch(() => undefined, { everyMs: 0 }),
    ConfigError,
  );
  assert.deepEqual(await w.election('O').observe(), { role: 'pacer', queue: [], lastEpoch: 0 }, 'nothing was written');
  const defaults = await w.election('D', {}).campaign('D');
  assert.equal(defaults.stopAtMs, 10_000 - 2_000, 'LEASE_DEFAULTS: a 10 s lease, a 2 s margin');
  await defaults.resign();
});

test('run: a work refused by the fence after its stop time passed reports the refusal, the more telling of the two', async () => {
  const w = world();
  const run = w.election('A').run('A', {
    onStartedLeading: async (leadership) => {
      w.failRenewals('A');
      await aborted(leadership.signal); // the stop time passes: the watchdog aborts the signal first
      throw new FencedOutError('ledger/pacer', leadership.epoch, leadership.epoch + 1); // then a held write meets the fence
    },
  });
  await w.clock.advance(fast.leaseMs);
  const end = await run;
  assert.equal(end.why, 'lost');
  assert.ok(end.error instanceof FencedOutError, String(end.error));
});

/**
 * Side effects made safe (`held.sendOnce`, lib/core/effects.ts): a digest job that emails five users, killed at every
 * point of its run, then finished by the next holder. A pretend mail provider records every call it gets; the checks
 * are computed from its log and from the store's records as they stood when the first holder died, never from what
 * `sendOnce` reported. On virtual time and the in-memory stores (the same conformance suite runs on them as on
 * DynamoDB Local): every point, deterministically.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { FencedOutError } from '../../lib/core/errors';
import { fenceOn } from '../../lib/core/fence';
import { idempotencyKeyOf } from '../../lib/core/effects';
import type { LockStore } from '../../lib/core/store/lock';
import type { EffectRecord, JobStore } from '../../lib/core/store/jobs';
import { withLease } from '../../lib/core/with-lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';

const USERS = ['ana', 'bo', 'cy', 'dee', 'eli'];
const JOB = 'digest#2026-12-01';
const LEASE = { leaseMs: 1_000, renewMs: 300, marginMs: 200 };

/** A mail API that keeps every call it was sent; `delivered` is what reached inboxes, deduplicated by key or not. */
class PretendMail {
  readonly calls: { to: string; key: string; by: string }[] = [];
  constructor(private readonly dedupes: boolean) {}
  send(to: string, key: string, by: string): string {
    this.calls.push({ to, key, by });
    return `msg-${this.calls.length}`;
  }
  deliveredTo(user: string): number {
    const calls = this.calls.filter((c) => c.to === user);
    return this.dedupes ? new Set(calls.map((c) => c.key)).size : calls.length;
  }
}

/**
 * One process: its stores and its mail calls pass through `boundary`, before each call and after each answer. At
 * boundary `killAt` it dies: from then on nothing it sends is answered (as under SIGKILL), and `died` resolves.
 */
function processOf(name: string, locks: LockStore, jobs: JobStore, mail: PretendMail, killAt: number, onDeath: () => void = () => undefined) {
  let n = 0;
  let dead = false;
  const boundary = (): boolean => {
    if (dead) return false;
    if (++n === killAt) {
      dead = true;
      onDeath();
      return false;
    }
    return true;
  };
  const never = new Promise<never>(() => undefined);
  const wrap = <S extends object>(store: S): S =>
    new Proxy(store, {
      get: (target, method) => {
        const f = (target as Record<string | symbol, unknown>)[method];
        if (typeof f !== 'function') return f;
        return async (...args: unknown[]) => {
          if (!boundary()) return never;
          const answer = (await (f as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
          if (!boundary()) return never; // landed, its answer lost with the process
          return answer;
        };
      },
    });
  const send = async (to: string, key: string) => {
    if (!boundary()) return never;
    const id = mail.send(to, key, name);
    if (!boundary()) return never; // the provider took it; the process died before hearing back
    return id;
  };
  return { locks: wrap(locks), jobs: wrap(jobs), send, boundaries: () => n };
}

/** The digest job, as a user writes it: claim, raise the fence first, then each email once through `sendOnce`. */
function digest(p: ReturnType<typeof processOf>, clock: VirtualClock, name: string): Promise<string[]> {
  return withLease({ locks: p.locks, clock }, JOB, name, LEASE, async (lease) => {
    const held = lease.fenced(fenceOn({ fences: p.jobs, table: 'jobs', key: { pk: JOB }, clock }));
    await lease.act(() => held.raise());
    const sent: string[] = [];
    for (const user of USERS) if ((await held.sendOnce(`email#${user}`, (key) => p.send(user, key))).sent) sent.push(user);
    return sent;
  });
}

/** A run of the digest killed at boundary `killAt` of its first holder, finished by a second. */
async function killedAt(killAt: number, dedupes: boolean) {
  const clock = new VirtualClock();
  const locks = new MemoryLockStore();
  const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
  const mail = new PretendMail(dedupes);
  let atDeath: EffectRecord[] | undefined;
  const first = processOf(
    'first',
    locks,
    jobs,
    mail,
    killAt,
    () => (atDeath = jobs.dump('jobs').filter((i) => String(i.pk).startsWith('effect#')) as unknown as EffectRecord[]),
  );
  const firstRun = digest(first, clock, 'first');
  firstRun.catch(() => undefined);
  await clock.advance(0);
  const second = processOf('second', locks, jobs, mail, Infinity);
  let finished = false;
  const secondRun = digest(second, clock, 'second').finally(() => (finished = true));
  for (let i = 0; i < 100 && !finished; i++) await clock.advance(100);
  await secondRun;
  // A third holder redoes the job: every effect is recorded DONE by now, so it sends nothing.
  const callsBefore = mail.calls.length;
  let thirdDone = false;
  const third = digest(processOf('third', locks, jobs, mail, Infinity), clock, 'third').finally(() => (thirdDone = true));
  for (let i = 0; i < 100 && !thirdDone; i++) await clock.advance(100);
  assert.deepEqual(await third, [], 'a redo after the job finished sends nothing');
  assert.equal(mail.calls.length, callsBefore, 'the provider got no call from the redo');
  return { mail, atDeath: atDeath ?? [], boundaries: first.boundaries() };
}

test('the digest killed at every point of its run, then finished by the next holder: each email delivered once by a provider that deduplicates by key', async () => {
  // The whole run's boundaries, counted on an unkilled run: every one of them is a point to die at.
  const whole = await killedAt(Infinity, true);
  const points = whole.boundaries;
  assert.ok(points >= USERS.length * 6, `every email's read, intent, call and DONE record are points (${points} in all)`);
  let resent = 0;
  for (let k = 1; k <= points; k++) {
    const { mail } = await killedAt(k, true);
    for (const user of USERS) assert.equal(mail.deliveredTo(user), 1, `killed at point ${k}: ${user} got the digest once`);
    // Every call for one user carried one key: the one derived from the job's fence and the effect, not the token.
    for (const user of USERS) assert.equal(new Set(mail.calls.filter((c) => c.to === user).map((c) => c.key)).size, 1);
    resent += mail.calls.length - USERS.length;
  }
  console.log(`${points} kill points; the provider saw ${resent} second calls across them, each with the first call's key`);
});

test('a provider that does not deduplicate: a second delivery only for the email whose call was made and not yet recorded DONE when the holder died', async () => {
  const { boundaries: points } = await killedAt(Infinity, false);
  let duplicated = 0;
  for (let k = 1; k <= points; k++) {
    const { mail, atDeath } = await killedAt(k, false);
    const doneAtDeath = new Set(atDeath.filter((r) => r.state === 'DONE').map((r) => r.effect));
    for (const user of USERS) {
      // From the outside: the provider's log of the first holder's calls, and the records as they stood when it died.
      const calledByFirst = mail.calls.some((c) => c.to === user && c.by === 'first');
      const expected = calledByFirst && !doneAtDeath.has(`email#${user}`) ? 2 : 1;
      assert.equal(mail.deliveredTo(user), expected, `killed at point ${k}: ${user}`);
      if (expected === 2) duplicated++;
    }
  }
  assert.ok(duplicated > 0, 'some point falls between a call and its DONE record');
  console.log(
    `without deduplication: ${duplicated} duplicate deliveries over ${points} kill points, each where a call was made and not yet recorded`,
  );
});

test('a holder fenced out before its intent is recorded sends nothing; the holder that took over sends every email once', async () => {
  const clock = new VirtualClock();
  const locks = new MemoryLockStore();
  const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
  const mail = new PretendMail(false);
  // A pauses on its way to its first intent, after its raise, its stop-time check and its read (no record yet): the
  // intent's transaction and its renewals wait until it is continued, as a stopped process's would.
  let release: () => void = () => undefined;
  const parked = new Promise<void>((r) => (release = r));
  const parking = <S extends object>(store: S, method: string): S =>
    new Proxy(store, {
      get: (t, m) => {
        const f = (t as Record<string | symbol, unknown>)[m];
        if (m !== method || typeof f !== 'function') return typeof f === 'function' ? f.bind(t) : f;
        return async (...args: unknown[]) => (await parked, (f as (...a: unknown[]) => unknown).apply(t, args));
      },
    });
  const a = processOf('A', parking(locks, 'renew'), parking(jobs, 'recordBatch'), mail, Infinity);
  const b = processOf('B', locks, jobs, mail, Infinity);
  let aOutcome: unknown;
  const aRun = digest(a, clock, 'A').then(
    (sent) => (aOutcome = sent),
    (err: unknown) => (aOutcome = err),
  );
  await clock.advance(0);
  assert.equal((await jobs.readFence({ table: 'jobs', key: { pk: JOB } }))?.fence, 1, 'A raised the fence before it paused');
  // B finds A's lease unrenewed for a full lease on its own clock, claims, raises the fence, and sends.
  const bRun = digest(b, clock, 'B');
  let bDone = false;
  void bRun.finally(() => (bDone = true));
  for (let i = 0; i < 100 && !bDone; i++) await clock.advance(100);
  assert.deepEqual(await bRun, USERS, 'B sent every email');
  release();
  await clock.advance(0);
  await aRun;
  assert.ok(aOutcome instanceof FencedOutError, `A's intent met B's fence: ${String(aOutcome)}`);
  assert.deepEqual(
    USERS.map((u) => mail.deliveredTo(u)),
    [1, 1, 1, 1, 1],
  );
  assert.deepEqual(new Set(mail.calls.map((c) => c.by)), new Set(['B']), 'A made no call');
  assert.equal(mail.calls[0].key, idempotencyKeyOf({ fence: fenceOn({ fences: jobs, table: 'jobs', key: { pk: JOB } }) }, 'email#ana'));
});

test(
  'a holder paused in its read of the effect past its stop time records no intent: the check comes right before the intent',
  { timeout: 10_000 },
  async () => {
    // Found by exploreFencedJob: a pause in sendOnce's read, then the intent sent with no check in between.
    const clock = new VirtualClock();
    const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
    let pause: Promise<void> | undefined;
    const calls = <T extends object>(store: T, before: (method: string | symbol) => Promise<void> | undefined): T =>
      new Proxy(store, {
        get: (t, m) => {
          const f = Reflect.get(t, m, t) as unknown;
          if (typeof f !== 'function') return f;
          return async (...a: unknown[]) => {
            await before(m);
            return (f as (...x: unknown[]) => unknown).apply(t, a);
          };
        },
      });
    // The process stands still in the read for two leases: its renewals wait for it too, so its stop time passes.
    const locks = calls(new MemoryLockStore(), (m) => (m === 'renew' ? pause : undefined));
    const slowRead = calls(jobs, (m) => (m === 'readEffect' ? (pause = clock.sleep(2 * LEASE.leaseMs)) : undefined));
    let sent = 0;
    const run = withLease({ locks, clock }, JOB, 'first', LEASE, async (lease) => {
      const held = lease.fenced(fenceOn({ fences: slowRead, table: 'jobs', key: { pk: JOB }, clock }));
      await lease.act(() => held.raise());
      await held.sendOnce('email#ana', async () => void sent++);
    });
    run.catch(() => undefined);
    for (let i = 0; i < 40; i++) await clock.advance(100);
    await assert.rejects(run, { name: 'StopTimePassedError' });
    assert.deepEqual(
      jobs.dump('jobs').filter((i) => String(i.pk).startsWith('effect#')),
      [],
      'no intent recorded past the stop time',
    );
    assert.equal(sent, 0);
  },
);

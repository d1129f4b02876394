/** The virtual clock the timing tests run on (lib/core/clock.ts VirtualClock): time moves only when the test says. No store. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { VirtualClock } from '../../lib/core/clock';

test('timers fire in order of due time (ties in the order set), each at its own time, and only once time reaches it', async () => {
  const clock = new VirtualClock({ monotonicMs: 100, wallMs: 5_000 });
  const fired: string[] = [];
  const at = (name: string) => () => fired.push(`${name}@${clock.monotonicMs()}`);
  clock.after(30, at('c'));
  clock.after(10, at('a'));
  clock.after(30, at('d'));
  const cancelled = clock.after(20, at('never'));
  cancelled.cancel();
  await clock.advance(29);
  assert.deepEqual(fired, ['a@110']);
  assert.equal(clock.monotonicMs(), 129);
  assert.equal(clock.wallMs(), 5_029, 'the wall clock moves with the monotonic one');
  await clock.advance(1);
  assert.deepEqual(fired, ['a@110', 'c@130', 'd@130']);
  assert.equal(clock.timers, 0);
});

test('code a timer wakes runs until it waits again before the next timer fires: a sleep loop sees every step', async () => {
  const clock = new VirtualClock();
  const woke: number[] = [];
  const loop = (async () => {
    for (let i = 0; i < 3; i++) {
      await clock.sleep(100);
      await Promise.resolve(); // a continuation or two later, still before the next timer
      woke.push(clock.monotonicMs());
    }
  })();
  clock.after(150, () => woke.push(-clock.monotonicMs()));
  await clock.advance(1_000);
  await loop;
  assert.deepEqual(woke, [100, -150, 200, 300]);
});

test('a tracked call takes no virtual time: the clock waits for its answer before it moves on', async () => {
  const clock = new VirtualClock();
  const order: string[] = [];
  clock.after(10, () => {
    void clock.track(new Promise((resolve) => setTimeout(resolve, 50))).then(() => {
      order.push(`answered@${clock.monotonicMs()}`);
      clock.after(0, () => order.push(`next@${clock.monotonicMs()}`));
    });
  });
  clock.after(11, () => order.push(`later@${clock.monotonicMs()}`));
  await clock.advance(20);
  assert.deepEqual(order, ['answered@10', 'next@10', 'later@11']);
});

// The claim's rvn wait sums its polls' intervals; from a fractional start the sum can fall a fraction of an ulp short
// of the lease, and the rest it then waits is too short to move `now`: time must still move, as a real timer's does.
test('a positive wait moves time even when it is too short to move a fractional now', async () => {
  const clock = new VirtualClock({ monotonicMs: 34_502.59728031118 });
  const now = clock.monotonicMs();
  const rest = 3e-12;
  assert.equal(now + rest, now, 'too short to move now in floating point');
  const slept = clock.sleep(rest);
  await clock.runUntilIdle();
  await slept;
  assert.ok(clock.monotonicMs() > now, 'time moved');
  assert.equal(clock.timers, 0);
});

test('runUntilIdle fires timers until none is left, and says so when one keeps re-arming', async () => {
  const clock = new VirtualClock();
  let ticks = 0;
  const tick = () => {
    if (++ticks < 5) clock.after(100, tick);
  };
  clock.after(100, tick);
  await clock.runUntilIdle();
  assert.equal(ticks, 5);
  assert.equal(clock.monotonicMs(), 500);
  const forever = () => void clock.after(1, forever);
  clock.after(1, forever);
  await assert.rejects(clock.runUntilIdle(50), /still not idle after 50 timers/);
  await assert.rejects(clock.advance(-1), RangeError);
});

test('the library times nothing on its own: no global timer or clock call outside its clock module', () => {
  const lib = path.resolve(__dirname, '..', '..', 'lib');
  const offenders = ['core', 'election', 'testing', 'sim']
    .flatMap((dir) => readdirSync(path.join(lib, dir), { recursive: true, encoding: 'utf8' }).map((f) => path.join(dir, f)))
    .filter((f) => f.endsWith('.ts') && !/clock[^/]*$/.test(f))
    .flatMap((f) =>
      readFileSync(path.join(lib, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/(^|[^.a-zA-Z])(setTimeout|setInterval)\(|Date\.now\(|performance\.now\(/.test(line) ? [`lib/${f}:${i + 1}`] : [])),
    );
  assert.deepEqual(offenders, [], 'every wait and reading goes through the injected Clock');
});

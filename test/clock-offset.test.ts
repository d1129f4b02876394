/** The Date-header offset estimator (pure): intervals, intersection, error bound, a stepped clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClockOffsetEstimator } from '../lib/core/clock-offset';

const at = (ms: number) => new Date(ms).toUTCString(); // a Date header: whole seconds

test('one call bounds the offset to [Date − t_received, Date + 1 s − t_sent]', () => {
  const e = new ClockOffsetEstimator();
  // Our clock is 300 ms behind: the server stamps true time 10,000.4 s → "10 s"; we read 10,000.1 → 10,000.12.
  e.observe(10_000_100, 10_000_120, at(10_000_400));
  const est = e.estimate()!;
  assert.equal(est.samples, 1);
  assert.ok(est.offsetMs - est.errorMs <= 300 && 300 <= est.offsetMs + est.errorMs, JSON.stringify(est));
  assert.equal(est.errorMs, (1000 + 20) / 2 - 0, 'width = 1 s resolution + the round trip');
});

test('calls on both sides of a second boundary narrow the bound around the true offset', () => {
  const e = new ClockOffsetEstimator();
  const trueOffset = 300;
  for (let t = 10_000_000; t < 10_004_000; t += 137) {
    const serverMs = t + 10 + trueOffset; // stamped 10 ms into a 20 ms round trip
    e.observe(t, t + 20, at(Math.floor(serverMs / 1000) * 1000));
  }
  const est = e.estimate()!;
  assert.ok(Math.abs(est.offsetMs - trueOffset) <= est.errorMs, JSON.stringify(est));
  assert.ok(est.errorMs < 50, `bound narrowed to ±${est.errorMs} ms`);
  assert.equal(e.stepped, false);
});

test('a wall clock stepped between calls is noticed and the estimate restarts', () => {
  const e = new ClockOffsetEstimator();
  e.observe(10_000_000, 10_000_020, at(10_000_000));
  e.observe(10_005_000 - 3_000, 10_005_020 - 3_000, at(10_005_000)); // our clock stepped back 3 s
  assert.equal(e.stepped, true);
  const est = e.estimate()!;
  assert.ok(Math.abs(est.offsetMs - 3_000) <= est.errorMs + 20, JSON.stringify(est));
  assert.equal(est.samples, 1);
});

test('no Date header, no estimate', () => {
  const e = new ClockOffsetEstimator();
  e.observe(1, 2, undefined);
  assert.equal(e.estimate(), undefined);
});

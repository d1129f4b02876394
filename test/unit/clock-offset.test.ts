/** The Date-header offset estimator (pure): intervals, intersection, error bound, a stepped clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClockOffsetEstimator, offsetBeyondErrorMs, type OffsetEstimate } from '../../lib/core/clock-offset';
import { STACK_DEFAULTS } from '../../apps/billing/config';
import { prng } from '../../lib/core/prng';

const at = (ms: number) => new Date(ms).toUTCString(); // a Date header: whole seconds

test('one call bounds the offset to [Date − t_received, Date + 1 s − t_sent]', () => {
  const e = new ClockOffsetEstimator();
  // Our clock is 300 ms behind: the server stamps true time 10,000.4 s → "10 s"; we read 10,000.1 → 10,000.12.
  e.addSample(10_000_100, 10_000_120, at(10_000_400));
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
    e.addSample(t, t + 20, at(Math.floor(serverMs / 1000) * 1000));
  }
  const est = e.estimate()!;
  assert.ok(Math.abs(est.offsetMs - trueOffset) <= est.errorMs, JSON.stringify(est));
  assert.ok(est.errorMs < 50, `bound narrowed to ±${est.errorMs} ms`);
  assert.equal(e.stepped, false);
});

test('a wall clock stepped between calls is noticed and the estimate restarts', () => {
  const e = new ClockOffsetEstimator();
  e.addSample(10_000_000, 10_000_020, at(10_000_000));
  e.addSample(10_005_000 - 3_000, 10_005_020 - 3_000, at(10_005_000)); // our clock stepped back 3 s
  assert.equal(e.stepped, true);
  const est = e.estimate()!;
  assert.ok(Math.abs(est.offsetMs - 3_000) <= est.errorMs + 20, JSON.stringify(est));
  assert.equal(est.samples, 1);
});

test('no Date header, no estimate', () => {
  const e = new ClockOffsetEstimator();
  e.addSample(1, 2, undefined);
  assert.equal(e.estimate(), undefined);
});

/**
 * Warm Lambda processes as the middleware sees them: each makes 1..60 calls with random latencies (mostly a few ms,
 * sometimes hundreds), the server stamping its true time at a random point of the flight, truncated to the second
 * as a Date header is. `skewMs` is how far our clock is behind the true one (local = true − skew). Yields every
 * estimate an invocation would publish (after each call), the metric the alarm reads among them.
 */
function* simulate(skewMs: number, processes: number, seed: number): Generator<OffsetEstimate & { process: number }> {
  const random = prng(seed);
  let trueMs = Date.UTC(2026, 0, 1);
  for (let p = 0; p < processes; p++) {
    const e = new ClockOffsetEstimator();
    const calls = 1 + Math.floor(random() * 60);
    for (let i = 0; i < calls; i++) {
      trueMs += random() * 5_000; // time between calls
      const latency = random() < 0.9 ? 2 + random() * 40 : 50 + random() * 800;
      const sentTrue = trueMs;
      const stampedTrue = sentTrue + random() * latency; // when the server read its clock
      trueMs += latency;
      e.addSample(sentTrue - skewMs, trueMs - skewMs, new Date(Math.floor(stampedTrue / 1000) * 1000).toUTCString());
      yield { ...e.estimate()!, process: p };
    }
  }
}

const threshold = STACK_DEFAULTS.clockOffsetAlarmMs;

test('a perfect clock never crosses the alarm threshold: the published part beyond the error bound stays 0', () => {
  let samples = 0;
  let rawAbove = 0;
  let worst = 0;
  for (const est of simulate(0, 2_000, 1)) {
    samples++;
    worst = Math.max(worst, offsetBeyondErrorMs(est));
    if (Math.abs(est.offsetMs) > threshold) rawAbove++;
  }
  assert.ok(samples > 50_000, `${samples} estimates`);
  assert.equal(worst, 0, 'a true clock lies inside every interval, so nothing lies beyond the bound');
  // The old alarm read |offset| alone: one truncated Date header puts a correct clock up to ~500 ms off, and a slow call more.
  assert.ok(rawAbove > 0, `|offset| alone crossed ${threshold} ms on a perfect clock ${rawAbove} times out of ${samples}`);
});

for (const skewMs of [2_000, -2_000]) {
  test(`a clock ${skewMs / 1000} s off crosses the threshold in every process (the alarm reads the Maximum)`, () => {
    let samples = 0;
    let least = Infinity;
    const maxByProcess = new Map<number, number>();
    for (const est of simulate(skewMs, 500, 2)) {
      samples++;
      const beyond = offsetBeyondErrorMs(est);
      least = Math.min(least, beyond);
      maxByProcess.set(est.process, Math.max(maxByProcess.get(est.process) ?? 0, beyond));
      assert.ok(Math.abs(est.offsetMs - skewMs) <= est.errorMs + 1e-9, `the true offset stays inside the bound: ${JSON.stringify(est)}`);
    }
    assert.ok(samples > 10_000, `${samples} estimates`);
    // One sample proves at least 2 s − (1 s + round trip): > 0 even for the simulation's slowest (850 ms) calls.
    assert.ok(least > 0, `the proven part is never 0 for a 2 s skew (least ${least} ms)`);
    const quiet = [...maxByProcess.values()].filter((m) => m <= threshold).length;
    assert.equal(quiet, 0, `${quiet} of ${maxByProcess.size} processes never crossed ${threshold} ms`);
  });
}

test('a clock 2 s off with ordinary latencies is always above the threshold', () => {
  for (const skewMs of [2_000, -2_000]) {
    const e = new ClockOffsetEstimator();
    const random = prng(3);
    let t = Date.UTC(2026, 0, 1) + 123;
    for (let i = 0; i < 200; i++) {
      t += random() * 3_000;
      const latency = 5 + random() * 60; // under 100 ms: DynamoDB and S3 from Lambda in the same Region
      const stamped = t + random() * latency;
      e.addSample(t - skewMs, t + latency - skewMs, new Date(Math.floor(stamped / 1000) * 1000).toUTCString());
      t += latency;
      assert.ok(offsetBeyondErrorMs(e.estimate()!) > threshold, `after ${i + 1} calls: ${JSON.stringify(e.estimate())}`);
    }
  }
});

test('offsetBeyondErrorMs: max(0, |offset| − error)', () => {
  assert.equal(offsetBeyondErrorMs({ offsetMs: 300, errorMs: 510, samples: 1 }), 0);
  assert.equal(offsetBeyondErrorMs({ offsetMs: -2_000, errorMs: 510, samples: 1 }), 1_490);
  assert.equal(offsetBeyondErrorMs({ offsetMs: 700, errorMs: 20, samples: 9 }), 680);
});

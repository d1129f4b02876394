/** The epoch fence on its store (lib/election/epoch-fence.ts): the logic on the in-memory ledger store, on virtual time. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { fullJitterMs } from '../../lib/core/conditions';
import { EpochFence, LedgerWriter, ledgerViolations } from '../../lib/election/epoch-fence';
import { FencedOutError } from '../../lib/core/errors';
import { MemoryLedgerStore } from '../../lib/testing/ledger-store';
import type { LedgerStore } from '../../lib/core/store/ledger';

const KEY = 'ledger/pacer';
const open = { check() {} };

test('a deposed writer is refused once its successor raised the fence; the ledger has no gap and epochs never go down', async () => {
  const clock = new VirtualClock();
  const fence = new EpochFence({ ledger: new MemoryLedgerStore(clock), clock }, KEY);
  const one = new LedgerWriter(fence, open, 1, 'A', 0);
  await one.append({ n: 1 });
  await fence.raise(2);
  const two = new LedgerWriter(fence, open, 2, 'B', (await fence.head()).version);
  await two.append({ n: 2 });
  await assert.rejects(one.append({ n: 3 }), (err) => err instanceof FencedOutError && err.fence === 2 && err.token === 1);
  await assert.rejects(fence.raise(1), (err) => err instanceof FencedOutError && err.fence === 2);
  const late = new LedgerWriter(fence, open, 2, 'B', 0); // B's writer behind the head: moves on from the head the store returned
  await late.append({ n: 3 });
  assert.equal(late.head, 3);
  const entries = await fence.entries();
  assert.deepEqual(
    entries.map((e) => [e.version, e.epoch, e.writer]),
    [
      [1, 1, 'A'],
      [2, 2, 'B'],
      [3, 2, 'B'],
    ],
  );
  assert.deepEqual(ledgerViolations(entries, await fence.head()), []);
});

test('a transient failure of an append is retried by the retry helper: the same request and token, after a jittered sleep on the clock', async () => {
  const clock = new VirtualClock();
  const inner = new MemoryLedgerStore(clock);
  const tokens: string[] = [];
  let answersLost = 0;
  // The append lands, then its answer is lost as a TransactionConflict cancellation would be: the retry must succeed
  // through the token, writing nothing twice.
  const store: LedgerStore = {
    head: (k) => inner.head(k),
    raise: (k, e) => inner.raise(k, e),
    entries: (k) => inner.entries(k),
    async append(k, entry, token) {
      tokens.push(token);
      const out = await inner.append(k, entry, token);
      if (answersLost++ === 0)
        throw Object.assign(new Error('injected'), {
          name: 'TransactionCanceledException',
          CancellationReasons: [{ Code: 'TransactionConflict' }, { Code: 'None' }],
        });
      return out;
    },
  };
  const random = () => 0.5;
  const fence = new EpochFence({ ledger: store, clock, random }, KEY);
  const started = clock.monotonicMs();
  const appending = fence.append(1, 1, 'A');
  await clock.runUntilIdle();
  const entry = await appending;
  assert.equal(tokens.length, 2);
  assert.equal(tokens[1], tokens[0], 'the same token on the retry');
  assert.equal(clock.monotonicMs() - started, fullJitterMs(0, random), 'one backoff, on the injected clock');
  assert.deepEqual(await fence.entries(), [entry], 'written once');
});

test("a writer's append retried after a transient failure is checked again first: no resend once the writer must stop", async () => {
  const clock = new VirtualClock();
  const inner = new MemoryLedgerStore(clock);
  let sends = 0;
  // Every send lands, and its answer is lost: without a check before the resend, the writer sends past its stop time.
  const store: LedgerStore = {
    head: (k) => inner.head(k),
    raise: (k, e) => inner.raise(k, e),
    entries: (k) => inner.entries(k),
    async append(k, entry, token) {
      sends++;
      await inner.append(k, entry, token);
      throw Object.assign(new Error('injected: the answer was lost'), { name: 'TimeoutError' });
    },
  };
  const stopAtMs = 1;
  const stopped = new Error('past the stop time');
  const guard = {
    checks: 0,
    check() {
      this.checks++;
      if (clock.monotonicMs() >= stopAtMs) throw stopped;
    },
  };
  const fence = new EpochFence({ ledger: store, clock, random: () => 1 }, KEY);
  const writer = new LedgerWriter(fence, guard, 1, 'A', 0);
  const refused = assert.rejects(writer.append({ n: 1 }), (err) => err === stopped);
  await clock.runUntilIdle();
  await refused;
  // One send, at 0 ms; the retry's backoff ends past the stop time, and its check refuses before the resend.
  assert.equal(sends, 1);
  assert.equal(guard.checks, 2);
});

/**
 * The real lease, election and handover on the lock store seam: on the in-memory store and virtual time (no
 * DynamoDB reachable: every call the code makes goes through the LockStore), and the handover's flip, now the one
 * claim of lib/core/lease.ts, surviving a lost answer on DynamoDB Local.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentClient } from '../../lib/core/aws/lock-store';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import { VirtualClock, systemClock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import { Election, type ElectionDeps } from '../../lib/election/election';
import { EpochFence } from '../../lib/election/epoch-fence';
import { handover, writerLedgerKey, HANDOVER_DEFAULTS } from '../../lib/election/handover';
import { claim, pollMsOf, readLock, releaseClaimed } from '../../lib/core/lease';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';

const fast: LeaseConfig = { leaseMs: 900, renewMs: 250, marginMs: 200, claimBudget: 3 };

function onMemory(): { clock: VirtualClock; deps: ElectionDeps; store: MemoryLockStore } {
  const clock = new VirtualClock();
  const store = new MemoryLockStore();
  return { clock, store, deps: { locks: store, clock, random: () => 0.5 } };
}

test('claim on the memory store: a silent holder is claimed over a lease after its rvn was first seen, not before; its release then changes nothing', async () => {
  const { clock, deps } = onMemory();
  const a = await claim(deps, 'k', 'A', fast); // A never renews: silent from here
  assert.equal(a.token, 1);
  let claimed = false;
  const claiming = claim(deps, 'k', 'B', fast).finally(() => (claimed = true));
  await clock.advance(fast.leaseMs - 1);
  assert.equal(claimed, false, 'not before a full lease of the same rvn');
  await clock.advance(pollMsOf(fast));
  const b = await claiming;
  assert.equal(b.token, 2, 'the claim adds 1 to the epoch');
  assert.equal((await readLock(deps, 'k'))?.holder, 'B');
  assert.equal(await releaseClaimed(deps, 'k', 'A', a.token, fast), false, "A's release finds the lease no longer A's");
  assert.equal(await b.release(), true);
});

test('an election on the memory store: B waits behind A and leads once A resigns, with the next epoch', async () => {
  const { clock, deps } = onMemory();
  const a = await new Election(deps, 'pacer', fast).campaign('A');
  assert.equal(a.epoch, 1);
  let led = false;
  const waiting = new Election(deps, 'pacer', fast).campaign('B').finally(() => (led = true));
  await clock.advance(fast.renewMs * 2); // A renews, B watches A's rvn change
  assert.equal(led, false, 'B waits while A leads');
  assert.deepEqual((await new Election(deps, 'pacer', fast).observe()).queue, [1, 2]);
  assert.equal(await a.resign(), true);
  await clock.advance(pollMsOf(fast));
  const bLeads = await waiting;
  assert.equal(bLeads.epoch, 2);
  assert.deepEqual((await new Election(deps, 'pacer', fast).observe()).queue, [2]);
  await bLeads.resign();
  await clock.runUntilIdle();
});

test("the handover's flip lands, its answer is lost: the flip is the claim, so it is sent again and finds its own rvn", async () => {
  const ns = await namespace();
  let lost = 0;
  // The first UpdateItem on the writer's lock item lands, then its answer is lost as a throttle (transient).
  const ddb = {
    send: async (command: Parameters<DocumentClient['send']>[0]) => {
      const out = await ns.clients.ddb.send(command);
      if (command instanceof UpdateCommand && lost === 0) {
        lost++;
        throw Object.assign(new Error('answer lost'), { name: 'ThrottlingException', $retryable: { throttling: true } });
      }
      return out;
    },
  } as unknown as DocumentClient;
  const deps: ElectionDeps = { locks: new DynamoLockStore(ddb, ns.tables.locks), clock: systemClock, random: () => 0 };
  const fence = new EpochFence({ ledger: new DynamoLedgerStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock }, writerLedgerKey('payments'));
  const writer = await handover(deps, 'payments', 'W', HANDOVER_DEFAULTS, fence);
  assert.equal(lost, 1, 'the flip landed and its answer was lost');
  const item = await readLock({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, 'writer/payments');
  assert.equal(writer.epoch, item?.epoch, "the writer's epoch is the one the flip wrote");
  assert.equal(item?.epoch, 1, 'flipped once, not twice');
  assert.equal(item?.holder, 'W');
  assert.equal(await writer.release(), true);
});

test('a join that lands with its answer lost: the retry finds the counter moved and its own rvn in the candidate item, so it queues once', async () => {
  const { clock, deps, store } = onMemory();
  const join = store.join.bind(store);
  let lost = 0;
  // The first join lands, then its answer is lost as a transient cancellation (as a conflict would be reported).
  store.join = async (request) => {
    const out = await join(request);
    if (lost++ > 0) return out;
    throw Object.assign(new Error('answer lost'), {
      name: 'TransactionCanceledException',
      CancellationReasons: [{ Code: 'TransactionConflict' }, { Code: 'None' }],
    });
  };
  const campaigning = new Election(deps, 'once', fast).campaign('A');
  await clock.advance(DEFAULT_BACKOFF.capMs); // the retry's backoff, on virtual time
  const a = await campaigning;
  assert.equal(lost, 2, 'sent twice: the lost one and its retry');
  assert.equal(a.epoch, 1, 'the number the lost try took');
  assert.deepEqual((await new Election(deps, 'once', fast).observe()).queue, [1], 'no second candidate item');
  await a.resign();
  await clock.runUntilIdle();
});

test('the memory store cancels either of two overlapping transactions, as AWS may: with random ≥ 0.5 the one in flight', async () => {
  for (const [random, cancelled] of [
    [0, 'later'],
    [0.5, 'earlier'],
  ] as const) {
    const store = new MemoryLockStore({ random: () => random });
    const role = 'election/r';
    const w = (holder: string) => ({ holder, leaseMs: 1000, rvn: holder, wallIso: 'w' });
    await store.join({ roleKey: role, last: undefined, seq: 1, candidateKey: `${role}/1`, candidate: w('A') });
    await store.join({ roleKey: role, last: 1, seq: 2, candidateKey: `${role}/2`, candidate: w('B') });
    const [first, second] = await Promise.allSettled([
      store.removeCandidate(role, `${role}/1`, 1, { rvn: 'A' }),
      store.removeCandidate(role, `${role}/2`, 2, { rvn: 'B' }),
    ]);
    assert.deepEqual(
      [first.status, second.status],
      cancelled === 'later' ? ['fulfilled', 'rejected'] : ['rejected', 'fulfilled'],
      `random ${random}: the ${cancelled} one is cancelled`,
    );
    assert.deepEqual((await store.readRole(role))?.members, [cancelled === 'later' ? 2 : 1], 'the cancelled one applied nothing');
  }
});

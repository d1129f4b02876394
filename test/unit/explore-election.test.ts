/**
 * The election world (verify/explore/election-world.ts): the real election, handover, restore bump, manifest and
 * epoch ledger on the in-memory stores and virtual time, interleaved and faulted at every store call by the seeded
 * scheduler. No store endpoint, no real sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { DEFAULT_BUMP } from '../../lib/core/restore';
import { ELECTION_SETTINGS, type ElectionPlaced, handoverWaited, oneTermAtATime, runElectionSchedule } from '../../verify/explore/election-world';
import { type LockWrite, type SentCall, stopTimeChecks } from '../../lib/testing/history';
import { ELECTION_MUTATIONS } from '../../verify/explore/mutations';

const digest = (trace: readonly string[]) => createHash('sha256').update(trace.join('\n')).digest('hex');

test('the same seed gives the same trace: two runs of one schedule, equal traces and digests', async () => {
  for (const seed of [1, 7]) {
    const [a, b] = [await runElectionSchedule(seed), await runElectionSchedule(seed)];
    assert.deepEqual(b.trace, a.trace);
    assert.equal(digest(b.trace), digest(a.trace));
    assert.deepEqual(b.crashPoints, a.crashPoints);
  }
  assert.notDeepEqual((await runElectionSchedule(2)).trace, (await runElectionSchedule(1)).trace);
});

const FROM = 1;
const SCHEDULES = 40;
/** The seeds each placed case runs on: the case is placed, the rest of the schedule (start times, jitter) is each seed's. */
const SEEDS = [1, 2, 3];

test(`${SCHEDULES} schedules from seed ${FROM} on the real code: no violation`, async () => {
  const failed: { seed: number; violations: readonly string[] }[] = [];
  for (let seed = FROM; seed < FROM + SCHEDULES; seed++) {
    const r = await runElectionSchedule(seed);
    if (r.violations.length > 0) failed.push({ seed, violations: r.violations });
  }
  assert.deepEqual(failed, []);
});

// One fault of each kind the world draws, placed at a call of each actor kind: each fires where it was placed, and
// the real code rides through all of them.
const EVERY_KIND: ElectionPlaced = {
  faults: [
    { actor: 'c1', method: 'join', kind: 'conflict' },
    { actor: 'c2', method: 'join', kind: 'throttle' },
    { actor: 'c3', method: 'join', kind: 'pause', ms: 3_000 },
    { actor: 'w1', method: 'renew', nth: 2, kind: 'lost' },
    { actor: 'w1', method: 'append', nth: 5, kind: 'crash' },
    { actor: 'c1', method: 'renew', nth: 1, kind: 'late', ms: 2_000 },
    { actor: 'c2', method: 'renew', nth: 1, kind: 'slow', ms: 500 },
    { actor: 'c1', method: 'renew', nth: 3, kind: 'twice' },
    { actor: 'w1', method: 'append', nth: 1, kind: 'server-error' },
    { actor: 'w1', method: 'append', nth: 2, kind: 'throttle-cancel' },
    { actor: 'w1', method: 'raise', nth: 1, kind: 'twice' },
  ],
};

test('a fault of every kind, placed, fires at its call, and the real code passes every check', async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, EVERY_KIND);
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    assert.deepEqual(r.crashPoints.map((p) => p.split(' ')[0]).sort(), EVERY_KIND.faults.map((f) => f.kind).sort());
    for (const f of EVERY_KIND.faults) {
      const at = new RegExp(` ${String(f.actor)} ${f.method} ${f.kind.toUpperCase()} `);
      assert.ok(
        r.trace.some((l) => at.test(l)),
        `seed ${seed}: ${f.kind} at ${String(f.actor)}'s ${f.method}`,
      );
    }
  }
});

// The lock table backed up at 4 s, while the role has a leader and the writer lease is held, and restored 4 s later
// (the queue in the backup names candidates long gone): leaders lead on both sides of the restore.
const RESTORED: ElectionPlaced = { faults: [], restore: { backupAtMs: 4_000, afterMs: 4_000 } };

test('a restore from a backup, bumped before use, hands out epochs above every earlier one', async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, RESTORED);
    const restoredAt = r.trace.findIndex((l) => l.endsWith('restore: the restored table is in use'));
    assert.ok(restoredAt >= 0, `seed ${seed} did not restore:\n${r.trace.join('\n')}`);
    const before = epochs(r.trace.slice(0, restoredAt));
    const after = epochs(r.trace.slice(restoredAt));
    assert.ok(before.length > 0 && after.length > 0, 'leaders before and after the restore');
    assert.ok(Math.min(...after) >= DEFAULT_BUMP, `the first epoch after the restore ${Math.min(...after)} is bumped`);
    assert.ok(Math.min(...after) > Math.max(...before));
    assert.deepEqual(r.violations, []);
    const unbumped = await runElectionSchedule(seed, 'restore-no-bump', RESTORED);
    assert.ok(
      unbumped.violations.some((v) => v.includes('an epoch repeated')),
      `without the bump the same schedule repeats an epoch: ${unbumped.violations.join('; ')}`,
    );
  }
});

const epochs = (lines: readonly string[]) => lines.flatMap((l) => /leads with epoch (\d+)$/.exec(l)?.[1] ?? []).map(Number);

// The old writer w1 paused 6.5 s with its 4th append in hand (checked, sent, not yet applied), across w2's whole
// handover (asked at 5 s: the flip, the wait of a lease and a margin, the bump): it lands after w2's handover
// answered and before w2's first write.
const IN_HAND: ElectionPlaced = { faults: [{ actor: 'w1', method: 'append', nth: 4, kind: 'pause', ms: 6_500 }], handoverAtMs: 5_000 };

test("an old writer's write in hand across the handover is refused on the real code, accepted without the bump", async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, IN_HAND);
    const paused = r.trace.findIndex((l) => / w1 append PAUSE /.test(l));
    const answered = r.trace.findIndex((l) => / w2 is the writer with epoch /.test(l));
    const refused = r.trace.findIndex((l) => / w1 stops writing: FencedOutError$/.test(l));
    const written = r.trace.findIndex((l) => / w2 append accepted /.test(l));
    assert.ok(paused >= 0 && answered > paused, `seed ${seed}: w1's append is not paused across w2's handover:\n${r.trace.join('\n')}`);
    assert.ok(refused > answered && refused < written, "the bump refuses the write w1 held, before w2's first write");
    assert.deepEqual(r.violations, []);
    const unbumped = await runElectionSchedule(seed, 'handover-no-bump', IN_HAND);
    assert.ok(
      unbumped.violations.some((v) => /^w1's append v\d+ at epoch \d+ accepted after w2's handover/.test(v)),
      `without the bump w1's write lands after the handover: ${unbumped.violations.join('; ')}`,
    );
  }
});

// The new writer w2 killed between its two steps: after the flip, at its bump (docs/ELECTION.md: nothing is written then).
const BETWEEN: ElectionPlaced = { faults: [{ actor: 'w2', method: 'raise', kind: 'crash' }] };

test('a new writer killed between its flip and its bump: the old writer stops, nobody writes, the ledger is sound', async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, BETWEEN);
    const flip = r.trace.findIndex((l) => / w2 claim$/.test(l));
    const crash = r.trace.findIndex((l) => / w2 raise CRASH /.test(l));
    assert.ok(flip >= 0 && crash > flip, `seed ${seed}: w2 is not killed between its flip and its bump:\n${r.trace.join('\n')}`);
    const stopped = r.trace.findIndex((l) => / w1 stops writing: LeaseLostError$/.test(l));
    assert.ok(stopped > flip, 'the flip ends the old writer: its renewal fails, its next check refuses');
    assert.ok(!r.trace.slice(stopped).some((l) => / append accepted ledger\/writer\//.test(l)), 'nothing is written after');
    assert.deepEqual(r.violations, []);
  }
});

// A backup taken before the role (and the writer lease) was first used, restored at 7 s: the restored table holds
// neither item, so the bump cannot raise them. The epoch floor it raises does: the first claim of a key the table
// lacks starts above it (docs/TESTING.md, "The election world"). w2 asks for the handover after the restore.
const EARLY_BACKUP: ElectionPlaced = { faults: [], restore: { backupAtMs: 1_000, afterMs: 6_000, early: true }, handoverAtMs: 8_000 };

test("a backup from before the role's first use, restored and bumped, does not repeat an epoch", async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, EARLY_BACKUP);
    const restoredAt = r.trace.findIndex((l) => l.endsWith('restore: the restored table is in use'));
    assert.ok(restoredAt >= 0, `seed ${seed} did not restore:\n${r.trace.join('\n')}`);
    assert.deepEqual(r.violations, []);
    // A candidate that joined before the restore may still log its old epoch after it; the restored table had no floor
    // (nor role item), so the bump raised the floor from 0 to DEFAULT_BUMP, and the next joins start above it.
    const [before, after] = [epochs(r.trace.slice(0, restoredAt)), epochs(r.trace.slice(restoredAt))];
    assert.ok(before.length > 0, 'a leader before the restore');
    assert.ok(
      after.some((e) => e > DEFAULT_BUMP),
      `a leader after the restore starts above the floor ${DEFAULT_BUMP}: ${after.join(', ')}`,
    );
    const writer = r.trace.flatMap((l) => / w2 is the writer with epoch (\d+)$/.exec(l)?.[1] ?? []).map(Number);
    assert.ok(writer.length === 1 && writer[0] > DEFAULT_BUMP, `w2's first flip of the writer lease starts above the floor: ${writer.join(', ')}`);
    const unfloored = await runElectionSchedule(seed, 'restore-no-floor', EARLY_BACKUP);
    assert.ok(
      unfloored.violations.some((v) => v.includes('an epoch repeated')),
      `without the floor the same schedule repeats an epoch: ${unfloored.violations.join('; ')}`,
    );
  }
});

// Found by the explorer once it drew late answers (seeds 1599 and 1963 from 1001): w1's first append loses its
// answer, and w1 is paused 3.8 s at its first renewal, past its stop time (4 s). The ledger writer's retry of the
// append came a backoff after its check and was sent unchecked, at 4.8 s; now every resend is checked first.
// The renewal answered at 4.8 s is answered past the stop time, so it does not move it (the check before counted it).
const RETRY_PAST_STOP: ElectionPlaced = {
  faults: [
    { actor: 'w1', method: 'renew', nth: 1, kind: 'pause', ms: 3_800 },
    { actor: 'w1', method: 'append', nth: 1, kind: 'lost' },
  ],
};

test("an append whose answer was lost is not sent again past the writer's stop time", async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, RETRY_PAST_STOP);
    assert.ok(r.trace.some((l) => / w1 append LOST /.test(l)) && r.trace.some((l) => / w1 renew PAUSE 3800 ms /.test(l)));
    assert.ok(
      r.trace.some((l) => / w1 stops writing: StopTimePassedError$/.test(l)),
      'w1 stops at its stop time',
    );
    assert.deepEqual(r.violations, []);
  }
});

// append-split: the ledger append as two requests, the fence item's update, then the entry's put. w1's second append
// crashes between them (at the put): the update has moved the head to version 2, the entry is never put, and w2 goes
// on from the head after its handover: a gap. A lost answer to the update does it with no crash: the retry meets its
// own update, reads a version conflict, and w1 moves on past the entry it never put. Only the ledger check sees it.
// The real append is one transaction: the same crash, at w1's second append, leaves no trace.
test('an append split in two requests leaves a gap at a crash or a lost answer between them, and only the ledger check sees it', async () => {
  for (const seed of SEEDS) {
    const real = await runElectionSchedule(seed, undefined, { faults: [{ actor: 'w1', method: 'append', nth: 2, kind: 'crash' }] });
    assert.deepEqual(
      real.crashPoints.map((p) => p.split(' ')[0]),
      ['crash'],
    );
    assert.deepEqual(real.violations, [], `seed ${seed}`);
    for (const fault of [
      { method: 'putEntry', kind: 'crash' },
      { method: 'updateFence', kind: 'lost' },
    ] as const) {
      const broken = await runElectionSchedule(seed, 'append-split', { faults: [{ actor: 'w1', nth: 2, ...fault }] });
      assert.deepEqual(
        broken.crashPoints.map((p) => p.split(' ')[0]),
        [fault.kind],
      );
      assert.ok(broken.violations.includes('ledger/writer/journal: entry 2 carries version 3: a gap or a duplicate'), broken.violations.join('; '));
      assert.ok(
        broken.violations.every((v) => v.startsWith('ledger/writer/journal: ')),
        `seed ${seed}, ${fault.kind} at ${fault.method}: only the ledger check: ${broken.violations.join('; ')}`,
      );
    }
  }
});

// No fault. bump-past-epoch: each writer bumps the fence one past its epoch, so its first append is refused and it
// stops writing; no write lands and no other check sees anything, but the append of epoch 1 sent after the bump to 2
// is an act of a lower epoch after a higher one. fence-gets-version: the fence item's fence holds the last version,
// and every append whose epoch is below it is accepted all the same (w2's bump, below it, is refused: w2 never
// writes); the ledgers stay whole, and only the fence check sees it. The real code passes the same schedules.
test('a bump past the epoch and a fence set to the version are each seen by one check only, with no fault', async () => {
  for (const seed of SEEDS) {
    assert.deepEqual((await runElectionSchedule(seed, undefined, { faults: [] })).violations, [], `seed ${seed}`);
    const past = await runElectionSchedule(seed, 'bump-past-epoch', { faults: [] });
    assert.ok(past.trace.includes('1000 w1 stops writing: FencedOutError'), `seed ${seed}: w1's first append is refused`);
    assert.deepEqual(past.violations, [
      'two terms at once on ledger/writer/journal: w1 sent append with epoch 1 at 1000 ms, after w1 acted with epoch 2 at 0 ms',
      'two terms at once on ledger/writer/journal: w2 sent append with epoch 2 at 6000 ms, after w2 acted with epoch 3 at 5000 ms',
    ]);
    const version = await runElectionSchedule(seed, 'fence-gets-version', { faults: [] });
    assert.ok(version.violations.includes("w1's append v3 at epoch 1 accepted below the fence 2 (ledger/writer/journal)"));
    assert.deepEqual(
      version.violations.filter((v) => !/ accepted below the fence \d+ \(ledger\//.test(v)),
      [],
      `seed ${seed}: only the fence check`,
    );
  }
});

// w2 asks for the handover at 5.1 s, 100 ms after w1's renewal at 5 s; no fault. The real handover waits the lease and
// the wait margin from its flip (5.1 s + 4 s + 1 s) and bumps at 10.1 s; handover-no-margin waits only the lease and
// bumps at 9.1 s. w1 stops at its stop time (its last renewal's send, 5 s, + the lease: 9 s) and never writes past
// it, so no two writers act at once and no other check sees anything: only the handover's wait, computed from the lock
// table's writes (w1's last renewal applied at 5 s) and w2's sends, finds the bump 637 ms short of 5 s + 5 s / 1.0556.
const NO_MARGIN: ElectionPlaced = { faults: [], handoverAtMs: 5_100 };

test("a handover that waits the old writer's lease without the wait margin is caught by the handover's wait check alone", async () => {
  for (const seed of SEEDS) {
    const r = await runElectionSchedule(seed, undefined, NO_MARGIN);
    assert.ok(
      r.trace.includes('5000 w1 renew') && r.trace.includes('5100 w2 claim') && r.trace.includes('10100 w2 raise'),
      `seed ${seed}: w2 does not flip 100 ms after w1's renewal and bump a lease and a margin later:\n${r.trace.join('\n')}`,
    );
    assert.deepEqual(r.violations, []);
    const broken = await runElectionSchedule(seed, 'handover-no-margin', NO_MARGIN);
    assert.ok(broken.trace.includes('9100 w2 raise'), `seed ${seed}: without the margin w2 bumps at 9.1 s`);
    assert.equal(broken.violations.length, 1, broken.violations.join('; '));
    assert.match(
      broken.violations[0],
      /^w2 started writing with epoch 2 \(raise sent at 9100 ms\) before w1's last renewal at 5000 ms \+ its lease 4000 ms \+ the wait margin 1000 ms /,
    );
  }
});

test("the handover's wait, from the write history: the old writer's last renewal + lease + margin, a fast clock allowed", () => {
  const wait = { key: 'writer/j', ledger: 'ledger/writer/j', waitMarginMs: 1_000, maxRateError: 0.05 };
  const write = (method: LockWrite['method'], holder: string, at: number, epoch?: number): LockWrite => ({
    method,
    key: 'writer/j',
    holder,
    at,
    ...(method === 'claim' ? { leaseMs: 4_000, epoch } : {}),
  });
  const raise = (actor: string, epoch: number, trueSentAt: number): SentCall => ({
    actor,
    method: 'raise',
    args: ['ledger/writer/j', epoch],
    sentAt: trueSentAt,
    trueSentAt,
  });
  const writes = [write('claim', 'w1', 0, 1), write('renew', 'w1', 1_000), write('renew', 'w1', 2_000), write('claim', 'w2', 2_500, 2)];
  // The earliest start: 2 s + 5 s / 1.05 = 6761.9 ms.
  assert.deepEqual(handoverWaited(writes, [raise('w1', 1, 0), raise('w2', 2, 6_762)], wait), []);
  const early = handoverWaited(writes, [raise('w1', 1, 0), raise('w2', 2, 6_761)], wait);
  assert.equal(early.length, 1);
  assert.match(early[0], /^w2 started writing with epoch 2 \(raise sent at 6761 ms\) before w1's last renewal at 2000 ms /);
  // Counted from the last renewal the table applied, not the claim; an append is a start too, a lower epoch's is not.
  const append: SentCall = { actor: 'w2', method: 'append', args: ['ledger/writer/j', { epoch: 2 }, 't'], sentAt: 6_000, trueSentAt: 6_000 };
  assert.equal(handoverWaited(writes, [append], wait).length, 1);
  assert.deepEqual(handoverWaited(writes, [{ ...append, args: ['ledger/writer/j', { epoch: 1 }, 't'] }], wait), []);
  // A released lease is no one's: the next claim waits for nothing. A flip after a restore is not checked.
  assert.deepEqual(
    handoverWaited([...writes.slice(0, 3), write('release', 'w1', 2_200), write('claim', 'w2', 2_500, 2)], [raise('w2', 2, 2_500)], wait),
    [],
  );
  assert.deepEqual(handoverWaited(writes, [raise('w2', 2, 3_000)], wait, 2_400), []);
});

// Each broken rule, applied by the harness only, must be caught from seed FROM within this many schedules.
const WITHIN = 100;
for (const mutation of ELECTION_MUTATIONS) {
  test(`the broken variant ${mutation} is caught from seed ${FROM} within ${WITHIN} schedules, and that schedule passes on the real code`, async () => {
    let caught: number | undefined;
    for (let seed = FROM; seed < FROM + WITHIN && caught === undefined; seed++)
      if ((await runElectionSchedule(seed, mutation)).violations.length > 0) caught = seed;
    assert.notEqual(caught, undefined, `${mutation} not caught in ${WITHIN} schedules from seed ${FROM}`);
    const honest = await runElectionSchedule(caught!);
    assert.deepEqual(honest.violations, [], `the same schedule (seed ${caught}) on the real code must pass`);
  });
}

test("no-stop-check is caught from outside: a ledger write sent past its writer's stop time, computed from the sends of its own joins, claims and renewals", async () => {
  let found: string | undefined;
  for (let seed = FROM; seed < FROM + 20 && found === undefined; seed++)
    found = (await runElectionSchedule(seed, 'no-stop-check')).violations.find((v) => / sent (append|raise) at .* past its stop time /.test(v));
  assert.ok(found, 'no ledger write past its stop time in 20 schedules with the check off');
});

test('never two terms at once: an act of an older epoch sent after a newer epoch acted is caught, per ledger', () => {
  const act = (actor: string, method: string, key: string, epoch: number, trueSentAt: number): SentCall => ({
    actor,
    method,
    args: method === 'append' ? [key, { epoch }, 'token'] : [key, epoch],
    sentAt: trueSentAt,
    trueSentAt,
  });
  const inOrder = [act('c1', 'serve', 'ledger/r', 1, 10), act('c1', 'append', 'ledger/r', 1, 20), act('c2', 'append', 'ledger/r', 2, 30)];
  assert.deepEqual(oneTermAtATime(inOrder), []);
  // Another ledger's epochs are its own: a writer's epoch 1 after the leaders' epoch 2 is no overlap.
  assert.deepEqual(oneTermAtATime([...inOrder, act('w1', 'append', 'writers/j', 1, 40)]), []);
  const late = oneTermAtATime([...inOrder, act('c1', 'serve', 'ledger/r', 1, 35)]);
  assert.equal(late.length, 1);
  assert.match(late[0], /^two terms at once on ledger\/r: c1 sent serve with epoch 1 at 35 ms, after c2 acted with epoch 2 at 30 ms$/);
});

test('a join learnt late (its answer lost, found by a read after the candidate joined again) does not move the stop time back', () => {
  const lease = { leaseMs: 4_000, marginMs: 1_000 };
  const join = (seq: number, rvn: string, sentAt: number, answer?: { at: number; ok: boolean }): SentCall => ({
    actor: 'c2',
    method: 'join',
    args: [{ roleKey: 'election/r', seq, candidateKey: `election/r/${seq}`, candidate: { holder: 'c2', rvn } }],
    sentAt,
    trueSentAt: sentAt,
    ...(answer ? { answeredAt: answer.at, result: { ok: answer.ok } } : {}),
  });
  const call = (method: string, args: unknown[], sentAt: number, answeredAt?: number, result?: unknown): SentCall => ({
    actor: 'c2',
    method,
    args,
    sentAt,
    trueSentAt: sentAt,
    ...(answeredAt === undefined ? {} : { answeredAt, result }),
  });
  const calls: SentCall[] = [
    join(5, 'r5', 0), // applied, its answer lost
    join(5, 'r5', 40, { at: 40, ok: false }), // the resend finds its own item: refused
    join(6, 'r6', 60, { at: 60, ok: true }), // the candidate joins again
    call('renew', ['election/r/6', { holder: 'c2', epoch: 6 }], 2_000, 2_000, { ok: true }),
    call('read', ['election/r/5'], 100, 4_500, { rvn: 'r5' }), // the lost join found, late
    call('serve', ['ledger/r', 6], 4_800),
  ];
  assert.deepEqual(stopTimeChecks(calls, lease, new Set(['serve'])), [], 'served within the seq-6 lease, renewed at 2 s');
  const unrenewed = calls.filter((c) => c.method !== 'renew');
  assert.equal(stopTimeChecks(unrenewed, lease, new Set(['serve'])).length, 1, 'without the renewal, 4.8 s is past 60 ms + 3 s');
});

test('an unknown mutation is refused before anything runs', async () => {
  await assert.rejects(runElectionSchedule(1, 'no-such-rule'), /unknown election mutation no-such-rule/);
});

// Election.run explored: the candidates stand through `run` (ElectionPlaced.run), and c1's run is stopped (its
// signal aborted, as a shutdown would) at 1.5 s. On seed 2 c1 leads by then; on seed 1 c3 does and c1 waits in the
// queue. Either way c1 leaves the queue at the stop's instant and never acts after it; stopped while leading, its
// successor leads before c1's last renewal + lease (the takeover a crash would cost), so the stop resigned.
const lineAt = (line: string) => Number(line.split(' ')[0]);
const STOPPED_AT = 1_500;

for (const [seed, was] of [
  [2, 'leading'],
  [1, 'waiting'],
] as const)
  test(`a run stopped while ${was} leaves the queue at once and acts no more (seed ${seed})`, async () => {
    const r = await runElectionSchedule(seed, undefined, { faults: [], run: { c1: { stopAtMs: STOPPED_AT }, c2: {}, c3: {} } });
    assert.deepEqual(r.violations, []);
    const c1Led = r.trace.find((l) => / c1 leads with epoch /.test(l));
    assert.equal(c1Led !== undefined && lineAt(c1Led) < STOPPED_AT, was === 'leading', r.trace.join('\n'));
    assert.ok(r.trace.includes(`${STOPPED_AT} c1 removeCandidate`), 'c1 leaves the queue at the stop');
    assert.ok(r.trace.some((l) => / c1 term ends stopped$/.test(l)) && r.trace.some((l) => / c1 ends stopped$/.test(l)));
    const acts = r.trace.filter((l) => / c1 (append|put|putIfMatch|join)$/.test(l));
    assert.ok(
      acts.every((l) => lineAt(l) < STOPPED_AT),
      `c1 acted after its stop: ${acts.join('; ')}`,
    );
    if (was === 'leading') {
      const lastRenewal = Math.max(0, ...r.trace.filter((l) => / c1 renew$/.test(l) && lineAt(l) < STOPPED_AT).map(lineAt));
      const next = r.trace.find((l) => / c[23] leads with epoch /.test(l) && lineAt(l) >= STOPPED_AT);
      assert.ok(next !== undefined && lineAt(next) < lastRenewal + ELECTION_SETTINGS.lease.leaseMs, `the successor: ${next}`);
    }
  });

// A run's leader paused past its stop time: its term ends `lost`, and it serves nothing past its stop time (the
// world's stop-time check, computed from its sends). Seed 2: c1 leads at 20 ms; its second renewal is paused 6 s.
test("a run's leader paused past its stop time is told by its signal, and its term ends lost", async () => {
  const r = await runElectionSchedule(2, undefined, {
    faults: [{ actor: 'c1', method: 'renew', nth: 2, kind: 'pause', ms: 6_000 }],
    run: { c1: {}, c2: {}, c3: {} },
  });
  assert.deepEqual(r.violations, []);
  assert.ok(r.trace.some((l) => / c1 renew PAUSE 6000 ms /.test(l)));
  assert.ok(
    r.trace.some((l) => / c1 told it lost the lead: /.test(l)),
    r.trace.join('\n'),
  );
  assert.ok(r.trace.some((l) => / c1 term ends lost \(/.test(l)));
});

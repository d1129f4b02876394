/**
 * Leader election and single-writer handover with real processes on the embedded stack (reference Part 7): every
 * candidate and writer is a `fencepost elect` / `fencepost handover` process; a pause is a real SIGSTOP (at a point
 * right after a passed check, from the fault preload, or from outside), a death is a real SIGKILL, a clock fault is
 * libfaketime. The ledger is read back from DynamoDB Local and checked by the ledger checker.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { systemClock } from '../../lib/core/clock';
import { ledgerKey } from '../../lib/election/election';
import { EpochFence, ledgerViolations } from '../../lib/election/epoch-fence';
import { writerLedgerKey } from '../../lib/election/handover';
import { fakeClock } from '../../verify/chaos/chaos';
import { startProcess, type SeenEvent, type WorkerOptions, type WorkerProcess } from '../../verify/chaos/worker-process';
import { namespace, type Namespace } from '../support/stack';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';

/**
 * Every candidate's and writer's lease. Short, so a takeover takes seconds; but a renewal has 1.7 s to be answered
 * before the holder's stop time, so a loaded machine (candidates starting at once on two busy cores, other test files
 * beside) does not depose a leader on its own before the fault a test injects. A 1 s lease left 0.5 s, and did.
 */
const LEASE = { leaseMs: 2500, renewMs: 500, marginMs: 300 };
const POLL_MS = Math.max(100, LEASE.leaseMs / 20);
const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

const stores = (ns: Namespace) => [
  '--dynamodb-endpoint',
  ns.endpoints.dynamodb,
  '--s3-endpoint',
  ns.endpoints.s3,
  '--table-prefix',
  ns.prefix,
  '--bucket',
  ns.bucket,
];
const leaseArgs = (l: typeof LEASE) => ['--lease-ms', String(l.leaseMs), '--renew-ms', String(l.renewMs), '--margin-ms', String(l.marginMs)];

/** Every process a test started: whatever happens, none outlives the file. */
const started: WorkerProcess[] = [];
after(() => {
  for (const w of started)
    if (w.child.exitCode === null && w.child.signalCode === null) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
    }
});
function track(w: WorkerProcess): WorkerProcess {
  started.push(w);
  return w;
}

function candidate(ns: Namespace, role: string, name: string, options: WorkerOptions = {}, every = '100ms', lease = LEASE): WorkerProcess {
  return track(
    startProcess(['elect', ...stores(ns), '--role', role, '--candidate', name, ...leaseArgs(lease), '--every', every, '--events', '--json'], options),
  );
}

/**
 * For the test whose successor stops itself while the old leader is continued and refused: the successor's lease
 * runs meanwhile, and 4.5 s between its renewals' sends and its stop time leave a loaded machine time for that.
 */
const LONG_LEASE = { leaseMs: 6000, renewMs: 1000, marginMs: 500 };

/** The summary line `--json` prints last: the candidate's outcome and what it read, by item. */
function summaryOf(w: WorkerProcess): {
  outcome: string;
  epoch?: number;
  reads?: { join: number; role: number; predecessors: Record<string, number> };
} {
  const line = w.other.map((o) => o.line).find((l) => l.startsWith('{'));
  assert.ok(line, `a summary line; stderr: ${w.stderr.join(' | ')}`);
  return JSON.parse(line) as ReturnType<typeof summaryOf>;
}

const leading = (w: WorkerProcess) => w.events.filter((e) => e.event === 'leading');
const stopAll = async (ws: WorkerProcess[]) => {
  for (const w of ws) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGCONT');
  for (const w of [...ws].reverse()) {
    if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
    await w.exited;
  }
};

async function ledger(ns: Namespace, key: string) {
  const fence = new EpochFence({ ledger: new DynamoLedgerStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock }, key);
  const [entries, head] = await Promise.all([fence.entries(), fence.head()]);
  return { entries, head, violations: ledgerViolations(entries, head) };
}

test(
  '5 candidates: the leader stopped between a check and an append until its successor has written; exactly one successor leads with a higher epoch; the old leader is refused; no read herd',
  { timeout: 180_000 },
  async () => {
    const ns = await namespace();
    // A stops itself right after the check of its 50th append (about 5 s after it leads): by then B-E have queued,
    // even with four processes starting at once on two busy cores.
    const a = candidate(ns, 'pacer', 'A', { faults: { sigstop: 'append:50' } }, '100ms', LONG_LEASE);
    await a.waitFor((e) => e.event === 'leading', 60_000);
    // Whichever of them leads stops itself after the check of its second append (below).
    const joined = ['B', 'C', 'D', 'E'].map((n) => candidate(ns, 'pacer', n, { faults: { sigstop: 'append:2' } }, '100ms', LONG_LEASE));
    for (const w of joined) await w.waitFor((e) => e.event === 'campaign', 60_000);
    // They joined at once, so the queue's order is the order their joins landed: name them by sequence.
    const seqOf = (w: WorkerProcess) => Number(w.events.find((e) => e.event === 'campaign')!.seq);
    const others = [...joined].sort((x, y) => seqOf(x) - seqOf(y));
    assert.deepEqual(others.map(seqOf), [2, 3, 4, 5]);
    const fault = await a.waitFor((e) => e.event === 'fault', 60_000);
    assert.ok(
      others.every((w) => w.events.find((e) => e.event === 'campaign')!.seenAtMs < fault.seenAtMs),
      'all four queued while A was still leading',
    );
    // A stays stopped until B, its successor, has written: B leads a lease after A's last renewal at the soonest, its
    // first write raises the fence, and it stops itself after the check of its second, so nothing of B's is in flight
    // when A sends. (B running on, A's send could meet B's next transaction on the fence item, be cancelled with
    // TransactionConflict, and A stop by its stop time before resending: safe, but not the fence's answer.)
    const [b, c, d, e] = others;
    const bLeads = await b.waitFor((x) => x.event === 'leading', 30_000);
    await b.waitFor((x) => x.event === 'appended', 30_000);
    await b.waitFor((x) => x.event === 'fault', 30_000);
    const lastRenew = a.events.filter((x) => x.event === 'renew').at(-1)!;
    assert.ok(performance.now() - lastRenew.seenAtMs > LONG_LEASE.leaseMs, 'A was stopped past its lease');
    a.child.kill('SIGCONT');
    await a.waitFor((x) => x.event === 'append-refused', 30_000);
    b.child.kill('SIGCONT'); // at once: B's lease runs while it is stopped
    const bStopped = b.events.find((x) => x.event === 'fault')!;
    const bRenewed = b.events.filter((x) => x.event === 'renew' && x.seenAtMs < bStopped.seenAtMs).at(-1);
    const budget = LONG_LEASE.leaseMs - LONG_LEASE.marginMs - (bStopped.seenAtMs - (bRenewed?.seenAtMs ?? bStopped.seenAtMs));
    assert.ok(performance.now() - bStopped.seenAtMs < budget, `B was stopped within its lease's budget (${budget.toFixed(0)} ms)`);
    const aCode = await a.exited;

    // Exactly one successor leads, with a higher epoch; the rest still queue behind it.
    assert.equal(bLeads.event === 'leading' && bLeads.epoch, 2);
    assert.deepEqual(
      [c, d, e].map((w) => leading(w).length),
      [0, 0, 0],
    );
    // A's held append (epoch 1) met B's fence (2): refused, nothing written, exit 3.
    const refused = a.events.find((x) => x.event === 'append-refused');
    assert.ok(refused && refused.event === 'append-refused', `A's held append was refused; A saw ${a.events.map((x) => x.event).join(', ')}`);
    assert.equal(refused.epoch, 1);
    assert.equal(refused.fence, 2);
    assert.equal(aCode, 3, 'a deposed leader exits 3');
    // Herd-free: stop the queue from its tail, so nobody's predecessor leaves before it reports.
    await stopAll([b, c, d, e]);
    const reads = [b, c, d, e].map((w) => summaryOf(w).reads!);
    assert.ok(reads[0].predecessors['1'] > 0, "the successor read the leader's item while it watched it");
    assert.equal(reads[0].role, 1, 'the successor read the role item once after the leader left');
    for (const [i, r] of reads.entries()) {
      if (i === 0) continue;
      assert.deepEqual(Object.keys(r.predecessors), [String(i + 1)], `sequence ${i + 2} read only its own predecessor's item`);
      assert.equal(r.role, 0, `sequence ${i + 2} never read the role item after joining: the leader's departure cost it nothing`);
    }
    const gone = [b, c, d, e].flatMap((w) => w.events.filter((x) => x.event === 'predecessor-gone' && x.predecessor === 1));
    assert.deepEqual(
      gone.map((x) => x.worker),
      [b.events[0].worker],
      "only the direct successor's reads detected the leader's departure",
    );
    // The ledger: epochs only grow, no version twice, no gap; epoch 1 never after epoch 2.
    const l = await ledger(ns, ledgerKey('pacer'));
    assert.deepEqual(l.violations, []);
    assert.deepEqual([...new Set(l.entries.map((x) => x.epoch))], [1, 2]);
    assert.equal(l.entries.filter((x) => x.epoch === 1).length, 49, "A's 49 acknowledged appends, and not its 50th");
  },
);

test(
  'SIGKILL of a middle candidate, then of the leader, then of two at once: each successor watches the next lower one; the takeover against last renewal + lease',
  { timeout: 180_000 },
  async () => {
    const ns = await namespace();
    const names = ['A', 'B', 'C', 'D', 'E'];
    const ws: Record<string, WorkerProcess> = {};
    for (const n of names) {
      ws[n] = candidate(ns, 'relay', n, {}, '200ms');
      await ws[n].waitFor((e) => e.event === 'campaign' || e.event === 'leading', 60_000);
    }
    await ws.A.waitFor((e) => e.event === 'leading');
    // A middle candidate dies: D (seq 4) finds C (3) silent, removes it, and watches B (2) next.
    ws.C.child.kill('SIGKILL');
    const dGone = await ws.D.waitFor((e) => e.event === 'predecessor-gone' && e.predecessor === 3, 30_000);
    assert.equal(dGone.event === 'predecessor-gone' && dGone.how, 'found-gone');
    assert.equal(leading(ws.D).length, 0, 'D does not lead: B and A are still ahead of it');
    // The leader dies. B leads no sooner than a lease after A's last renewal, on B's own clock.
    const lastRenew = () => ws.A.events.filter((e) => e.event === 'renew').at(-1)!;
    ws.A.child.kill('SIGKILL');
    const killedAt = performance.now();
    await ws.A.exited;
    const renewedAt = lastRenew().seenAtMs;
    const bLeads = await ws.B.waitFor((e) => e.event === 'leading', 30_000);
    const takeoverMs = bLeads.seenAtMs - renewedAt;
    process.stderr.write(
      `takeover after the leader's death: ${takeoverMs.toFixed(0)} ms after its last renewal (formula: lease ${LEASE.leaseMs} ms; poll ${POLL_MS} ms); ${(bLeads.seenAtMs - killedAt).toFixed(0)} ms after the kill\n`,
    );
    assert.ok(takeoverMs >= LEASE.leaseMs - 50, `never before last renewal + lease (${takeoverMs.toFixed(0)} ms)`);
    assert.equal(bLeads.event === 'leading' && bLeads.epoch, 2);
    await ws.B.waitFor((e) => e.event === 'appended', 30_000);
    // Two die at once: E finds D gone, then B gone, and leads.
    ws.B.child.kill('SIGKILL');
    ws.D.child.kill('SIGKILL');
    const eLeads = await ws.E.waitFor((e) => e.event === 'leading', 30_000);
    assert.equal(eLeads.event === 'leading' && eLeads.epoch, 5);
    assert.deepEqual(
      ws.E.events.filter((e) => e.event === 'predecessor-gone').map((e) => e.event === 'predecessor-gone' && [e.predecessor, e.how]),
      [
        [4, 'found-gone'],
        [2, 'found-gone'],
      ],
    );
    await ws.E.waitFor((e) => e.event === 'appended', 30_000);
    await stopAll(Object.values(ws));
    const l = await ledger(ns, ledgerKey('relay'));
    assert.deepEqual(l.violations, []);
    assert.deepEqual([...new Set(l.entries.map((x) => x.epoch))], [1, 2, 5]);
  },
);

test(
  'clock faults on candidates change nothing: a wall clock 3 s fast and one stepped back 3 s mid-lease',
  { timeout: 180_000, skip: existsSync(LIBFAKETIME) ? false : `needs libfaketime (${LIBFAKETIME})` },
  async () => {
    const ns = await namespace();
    const fastClock = fakeClock('+3s');
    const steppedClock = fakeClock('+0');
    const a = candidate(ns, 'clocked', 'A', { env: fastClock.env });
    await a.waitFor((e) => e.event === 'leading', 60_000);
    const b = candidate(ns, 'clocked', 'B', { env: steppedClock.env });
    await b.waitFor((e) => e.event === 'campaign', 60_000);
    steppedClock.set('-3s'); // B's wall clock steps back 3 s while it watches A
    await new Promise((r) => setTimeout(r, 1.5 * LEASE.leaseMs));
    assert.equal(leading(b).length, 0, 'B does not lead while A renews, whatever either wall clock says');
    a.child.kill('SIGKILL');
    const lastRenew = a.events.filter((e) => e.event === 'renew').at(-1)!;
    const bLeads = await b.waitFor((e) => e.event === 'leading', 30_000);
    assert.ok(bLeads.seenAtMs - lastRenew.seenAtMs >= LEASE.leaseMs - 50, 'B waited a full lease on its own monotonic clock');
    await b.waitFor((e) => e.event === 'appended', 30_000);
    await stopAll([a, b]);
    const l = await ledger(ns, ledgerKey('clocked'));
    assert.deepEqual(l.violations, []);
    // The written_at stamps are the writers' wall clocks: A's run 3 s ahead of B's, and nothing decided on them.
    const aLast = l.entries.filter((x) => x.writer === 'A').at(-1)!;
    const bFirst = l.entries.find((x) => x.writer === 'B')!;
    assert.ok(Date.parse(aLast.written_at) > Date.parse(bFirst.written_at), "A's fast wall clock stamps later than B's later write");
  },
);

function handoverWriter(ns: Namespace, name: string, options: WorkerOptions = {}): WorkerProcess {
  return track(
    startProcess(
      [
        'handover',
        ...stores(ns),
        '--role',
        'payments',
        '--writer',
        name,
        '--lease-ms',
        String(LEASE.leaseMs),
        '--renew-ms',
        String(LEASE.renewMs),
        '--margin-ms',
        '0',
        '--wait-margin-ms',
        String(WAIT_MARGIN_MS),
        '--every',
        '50ms',
        '--events',
        '--json',
      ],
      options,
    ),
  );
}
const WAIT_MARGIN_MS = 500;

test(
  'handover from a live writer: the old writer stops by its stop time, the new one waits lease + margin, bumps, then writes; the gap is at least the margin',
  { timeout: 120_000 },
  async () => {
    const ns = await namespace();
    const w1 = handoverWriter(ns, 'W1');
    await w1.waitFor((e) => e.event === 'appended' && e.version >= 5, 60_000);
    const w2 = handoverWriter(ns, 'W2');
    const bumped = await w2.waitFor((e) => e.event === 'epoch-bumped', 60_000);
    const claimed = w2.events.find((e) => e.event === 'claim')!;
    await w2.waitFor((e) => e.event === 'appended', 30_000);
    const w1Code = await w1.exited;
    assert.equal(w1Code, 3, 'the old writer is deposed (its renewal met the flip)');
    assert.ok(
      bumped.seenAtMs - claimed.seenAtMs >= LEASE.leaseMs + WAIT_MARGIN_MS - 20,
      `W2 waited lease + margin on its own clock (${(bumped.seenAtMs - claimed.seenAtMs).toFixed(0)} ms)`,
    );
    await stopAll([w2]);
    const l = await ledger(ns, writerLedgerKey('payments'));
    assert.deepEqual(l.violations, []);
    const old = l.entries.filter((x) => x.writer === 'W1');
    const fresh = l.entries.filter((x) => x.writer === 'W2');
    const gapMs = Date.parse(fresh[0].written_at) - Date.parse(old.at(-1)!.written_at);
    process.stderr.write(`handover gap: ${gapMs} ms between W1's last accepted write and W2's first (margin ${WAIT_MARGIN_MS} ms)\n`);
    assert.ok(gapMs >= WAIT_MARGIN_MS, `the gap (${gapMs} ms) is at least the margin`);
    assert.ok(
      old.every((x) => x.version <= (bumped.event === 'epoch-bumped' ? bumped.version : -1)),
      'no write of the old epoch lands after the bump',
    );
    assert.deepEqual([...new Set(l.entries.map((x) => x.epoch))], [1, 2]);
  },
);

test('handover from a writer stopped between a check and a write: its held write is refused after the bump', { timeout: 120_000 }, async () => {
  const ns = await namespace();
  const w1 = handoverWriter(ns, 'W1', { faults: { sigstop: 'append:10' } });
  await w1.waitFor((e) => e.event === 'fault', 60_000);
  // W2 bumps, then stops itself after the check of its first write: W1's held write meets the bumped fence alone (W2's
  // write in flight beside it could cancel W1's with TransactionConflict, and W1 stop by its stop time before resending).
  const w2 = handoverWriter(ns, 'W2', { faults: { sigstop: 'append:1' } });
  const bumped = await w2.waitFor((e) => e.event === 'epoch-bumped', 60_000);
  await w2.waitFor((e) => e.event === 'fault', 30_000);
  w1.child.kill('SIGCONT');
  const refused = await w1.waitFor((e) => e.event === 'append-refused', 30_000);
  w2.child.kill('SIGCONT');
  assert.equal(refused.event === 'append-refused' && refused.fence, 2);
  assert.equal(await w1.exited, 3);
  await w2.waitFor((e: SeenEvent) => e.event === 'appended', 30_000);
  await stopAll([w2]);
  const l = await ledger(ns, writerLedgerKey('payments'));
  assert.deepEqual(l.violations, []);
  assert.equal(l.entries.filter((x) => x.epoch === 1).length, 9, "W1's nine writes before the pause, not its held tenth");
  assert.ok(bumped.event === 'epoch-bumped' && bumped.version === 9);
});

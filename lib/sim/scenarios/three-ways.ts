/**
 * The same chunk three ways: three workers start chunk 2 (5,000 invoices, 51 transactions of
 * at most 99 puts) at the same moment, compared on equal terms:
 *
 *   lock-service  each asks the lock service first; one gets the key (and a token), the others see it held and
 *                 leave the chunk alone;
 *   database      no lock: each transaction's puts are conditional (attribute_not_exists), so a transaction whose
 *                 invoices exist already fails whole; a worker that meets a failure stops;
 *   no-lock       plain puts: every worker writes every invoice.
 * Work done = invoices built; wasted = built but not the ones that count (refused, or written again); written
 * twice = invoices the table holds more than one write of (customers billed twice).
 */
import { Sim } from '../engine';
import { ConsensusLockService } from '../lock-service';
import { Checks, type Scenario } from '../scenario';
import { Network, Worker } from '../worker';
import { STORY_TIMING } from './story';

const INVOICES = 5_000;
const PER_TX = 99;
const TX_MS = 100;

type Way = 'lock-service' | 'database' | 'no-lock';

interface WayResult {
  readonly way: Way;
  readonly built: number;
  readonly written: number;
  readonly wasted: number;
  readonly writtenTwice: number;
  readonly doneAt: number;
}

function playWay(way: Way, sim = new Sim(9)): WayResult & { sim: Sim } {
  const svc = new ConsensusLockService(sim, { revision: 14 });
  const net = new Network(sim, { delayMs: 5, jitterMs: 10 });
  const writes = new Map<number, number>();
  let built = 0;
  let doneAt = 0;
  let leaseId: number | undefined;
  const txs = Math.ceil(INVOICES / PER_TX);
  const invoicesOf = (tx: number) => Array.from({ length: Math.min(PER_TX, INVOICES - tx * PER_TX) }, (_, i) => tx * PER_TX + i);
  for (const name of ['W1', 'W2', 'W3']) {
    const w = new Worker(sim, `${name} [${way}]`);
    const work = (tx: number) => {
      if (tx >= txs) return;
      const inv = invoicesOf(tx);
      built += inv.length;
      net.send(w.name, 'table', () => {
        // database: the transaction fails whole if any of its invoices exists; no-lock and the holder: plain puts.
        if (way === 'database' && inv.some((i) => writes.has(i))) {
          sim.log(w.name, `transaction ${tx + 1} fails: its invoices exist; stops`, { note: `${inv.length} invoices built for nothing` });
          return;
        }
        for (const i of inv) writes.set(i, (writes.get(i) ?? 0) + 1);
        doneAt = Math.max(doneAt, sim.now);
        if (tx === txs - 1) {
          sim.log(w.name, `writes its last transaction (${txs})`);
          if (leaseId !== undefined) svc.revoke(leaseId); // the holder releases: the next chunk's worker need not wait
        }
        w.act(sim.now + TX_MS * (0.8 + 0.4 * sim.rng.next()), () => work(tx + 1));
      });
    };
    w.act(sim.rng.between(0, 10), () => {
      if (way !== 'lock-service') return work(0);
      const r = svc.acquire('billing:2026-09-28#chunk2', w.name, STORY_TIMING.leaseMs);
      sim.log(w.name, r.ok ? 'gets the lock' : 'sees the lock held: leaves the chunk', { token: r.ok ? r.revision : undefined });
      if (!r.ok) return;
      leaseId = r.leaseId;
      work(0);
    });
  }
  sim.run();
  const written = writes.size;
  const twice = [...writes.values()].filter((n) => n > 1).length;
  sim.rows.push({
    t: doneAt,
    actor: way,
    event: 'chunk 2 done',
    note: `built ${built}, written ${written}, wasted ${built - written}, written twice ${twice}`,
  });
  return { sim, way, built, written, wasted: built - written, writtenTwice: twice, doneAt };
}

export const threeWaysScenario: Scenario = {
  name: 'three-ways',
  title: "The same chunk three ways: a lock service, the database's conditional writes alone, no lock",
  claim:
    "the resource's check keeps the data safe (it sees every write, a lock sees none); a lock only saves work, and no lock bills customers twice",
  run() {
    const results = (['lock-service', 'database', 'no-lock'] as const).map((way) => playWay(way));
    const [lock, db, none] = results;
    const checks = new Checks()
      .eq('transactions in a chunk of 5,000 (99 puts each)', 51, Math.ceil(INVOICES / PER_TX))
      .eq('lock service: invoices written', 5_000, lock.written)
      .eq('lock service: work wasted', 0, lock.wasted)
      .eq('lock service: written twice', 0, lock.writtenTwice)
      .eq('database alone: invoices written', 5_000, db.written)
      .that('database alone: work wasted (one refused transaction per loser)', db.wasted, (v) => v > 0 && v <= 2 * PER_TX, `1..${2 * PER_TX}`)
      .eq('database alone: written twice', 0, db.writtenTwice)
      .eq('no lock: written twice (every invoice)', 5_000, none.writtenTwice)
      .eq('no lock: work wasted', 10_000, none.wasted);
    const rows = results.flatMap((r) => r.sim.rows).sort((a, b) => a.t - b.t);
    return { name: this.name, title: this.title, claim: this.claim, rows, marks: results.flatMap((r) => r.sim.marks), checks: checks.list };
  },
};

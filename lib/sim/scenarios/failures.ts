/**
 * When the lock service itself fails.
 *
 *   redis-failover  events 19–21 replayed on a Redis primary with an asynchronous replica: the primary dies before
 *                   C's SET and INCR reach the replica; after the promotion D gets the lock AND the same token 15.
 *                   The store's fence accepts equal tokens, so it cannot tell them apart.
 *   redlock         five masters; client 1 holds 3 of them; master 3's wall clock jumps forward, its key expires;
 *                   client 2 gets 3, 4, 5: two majorities, sharing node 3, and two clients holding the lock.
 *   restore-lock-service  the lock service restored at 45.0 from a snapshot at revision 14 hands out 15 again; with
 *                   --bump-revision 1,000,000 the next key gets 1,000,015 and the fence stops C.
 * The lag (100 ms), the promotion time and the clock jump are assumptions the reference makes too.
 */
import { WorkerClock } from '../clocks';
import { Sim } from '../engine';
import { ConsensusLockService } from '../lock-service';
import { RedisPrimaryReplica, RedlockMaster, redlockAcquire } from '../redis';
import { Checks, s, type Scenario } from '../scenario';
import { FencedStore } from '../store';
import { STORY_TIMING } from './story';

const T = STORY_TIMING;
const JOB = 'billing:2026-09-28';

export const redisFailoverScenario: Scenario = {
  name: 'redis-failover',
  title: 'The lock on an asynchronously replicated Redis: after the failover D gets the same token as C',
  claim: "an async failover can lose the lock and the counter's last increment; the store cannot tell C from D",
  run() {
    const sim = new Sim(1);
    const redis = new RedisPrimaryReplica(sim, 100);
    const store = new FencedStore(sim);
    redis.seed('token', 14); // the counter before C: 14 tokens handed out so far
    const tokens: Record<string, number> = {};
    const take = (who: string, at: number) =>
      sim.at(at, () => {
        if (!redis.setNx(JOB, who, T.leaseMs)) return sim.log(who, 'SET NX PX: the lock is held');
        tokens[who] = redis.incr('token');
        sim.log(who, 'SET lock NX PX 10000: OK; INCR token', { token: tokens[who] });
        sim.after(100, () => store.raise(who, tokens[who]));
        sim.after(600, () => store.write(who, tokens[who], 'chunk 3', 5_000));
      });
    take('C', 40_200);
    redis.failover(40_250, 41_500);
    take('D', 42_000);
    sim.run(60_000);
    const checks = new Checks()
      .eq("C's token", 15, tokens.C)
      .eq("D's token after the failover", 15, tokens.D)
      .eq('both raises accepted (equal passes the fence)', 0, store.refused)
      .eq('batches written twice', 1, store.writtenTwice().length);
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

export const redlockScenario: Scenario = {
  name: 'redlock',
  title: 'Redlock over five masters: a clock jump on node 3 lets two majorities form',
  claim: "Redis expires keys by the wall clock: a clock that jumps ends a lock early, so the safety argument depended on node 3's clock",
  run() {
    const sim = new Sim(1);
    const masters = [1, 2, 3, 4, 5].map(
      (i) => new RedlockMaster(sim, `m${i}`, new WorkerClock(i === 3 ? { steps: [{ at: 2_000, byMs: 10_000 }] } : {})),
    );
    const store = new FencedStore(sim, false);
    const held: Record<string, { from: number; to: number; granted: string[] }> = {};
    const acquire = (client: string, at: number, reaches: string[]) =>
      sim.at(at, () => {
        const r = redlockAcquire(masters, (m) => reaches.includes(m.name), JOB, client, T.leaseMs, 10);
        sim.log(client, r.held ? `holds the lock on ${r.granted.join(', ')}` : `fails (got ${r.granted.join(', ') || 'none'})`, {
          note: r.held ? `validity ${s(r.validityMs)} s` : undefined,
        });
        if (!r.held) return;
        held[client] = { from: sim.now, to: sim.now + r.validityMs, granted: r.granted };
        sim.mark({ lane: client, kind: 'held', from: sim.now, to: sim.now + r.validityMs, label: r.granted.join(' ') });
        sim.after(500, () => store.write(client, undefined, 'chunk 2', 5_000)); // Redlock gives no token to write with
      });
    acquire('client 1', 0, ['m1', 'm2', 'm3']); // m4 and m5 are cut off from client 1
    sim.at(2_000, () => sim.log('m3', "wall clock jumps forward 10 s: client 1's key expires early"));
    acquire('client 2', 3_000, ['m1', 'm2', 'm3', 'm4', 'm5']);
    sim.run(20_000);
    const [c1, c2] = [held['client 1'], held['client 2']];
    const shared = c1 && c2 ? c1.granted.filter((m) => c2.granted.includes(m)) : [];
    const checks = new Checks()
      .eq('client 1 holds a majority', true, c1 !== undefined)
      .eq('client 2 holds a majority too', true, c2 !== undefined)
      .eq('the node both majorities share', 'm3', shared.join(','))
      .that('both hold the lock for (s)', c1 && c2 ? s(Math.min(c1.to, c2.to) - Math.max(c1.from, c2.from)) : undefined, (v) => v > 0, '> 0')
      .eq('without a fence, batches written twice', 1, store.writtenTwice().length);
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};

/** C acquires at 40.2; the service is restored at 45.0 from a snapshot at revision 14; D acquires at 45.5. */
function playRestore(bump: number) {
  const sim = new Sim(1);
  const svc = new ConsensusLockService(sim, { revision: 14 });
  const store = new FencedStore(sim);
  let snap: ReturnType<ConsensusLockService['snapshot']> | undefined;
  const tokens: Record<string, number> = {};
  sim.at(40_000, () => {
    snap = svc.snapshot();
    sim.log('lock service', 'snapshot taken', { note: `revision ${snap.revision}` });
  });
  const take = (who: string, at: number) =>
    sim.at(at, () => {
      const r = svc.acquire(JOB, who, T.leaseMs);
      if (!r.ok) return;
      tokens[who] = r.revision;
      sim.log(who, 'acquires the lock', { token: r.revision, note: `revision ${r.revision}` });
      sim.after(100, () => store.raise(who, r.revision));
    });
  take('C', 40_200);
  sim.at(45_000, () => {
    svc.restore(snap!, bump);
    sim.log('lock service', `restored from the snapshot${bump ? `, revision bumped by ${bump.toLocaleString('en-US')}` : ''}`, {
      note: `revision now ${svc.revision}`,
    });
  });
  take('D', 45_500);
  sim.at(46_000, () => store.write('C', tokens.C, 'chunk 4', 5_000));
  sim.at(46_000, () => store.write('D', tokens.D, 'chunk 4', 5_000));
  sim.run(60_000);
  return { sim, tokens, store };
}

export const restoreLockServiceScenario: Scenario = {
  name: 'restore-lock-service',
  title: 'A restore from a snapshot at revision 14 hands out 15 twice; the bump gives 1,000,015',
  claim: 'every restore must jump the counter (etcd --bump-revision), or tokens repeat and the fence cannot tell two holders apart',
  run() {
    const plain = playRestore(0);
    const bumped = playRestore(1_000_000);
    const rows = [
      ...plain.sim.rows.map((r) => ({ ...r, actor: `${r.actor} [no bump]` })),
      ...bumped.sim.rows.map((r) => ({ ...r, actor: `${r.actor} [bump]` })),
    ].sort((a, b) => a.t - b.t);
    const checks = new Checks()
      .eq("C's revision at 40.2", 15, plain.tokens.C)
      .eq("D's revision after the restore, no bump", 15, plain.tokens.D)
      .eq('no bump: batches written twice by C and D', 1, plain.store.writtenTwice().length)
      .eq("D's revision after the restore with a bump of 1,000,000", 1_000_015, bumped.tokens.D)
      .eq("with the bump the fence refuses C's write", 1, bumped.store.refused);
    return { name: this.name, title: this.title, claim: this.claim, rows, marks: bumped.sim.marks, checks: checks.list };
  },
};

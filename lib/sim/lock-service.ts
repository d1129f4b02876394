/**
 * A consensus lock service in the etcd style: three nodes, one leader.
 *
 * What lives where:
 *   - grants, key creations and deletes, and the revision counter are entries in the replicated log: they commit
 *     only while a majority of nodes is up, and they survive the loss of any minority;
 *   - a lease's deadline lives ONLY in the leader's memory: a keep-alive resets it there, with no log entry;
 *   - a new leader rebuilds every deadline at full length from its own now (it cannot know the old ones), so a
 *     failover only ever makes a lease longer. With the checkpoint on (etcd's LeaseCheckpoint) it rebuilds from the
 *     remaining TTL the old leader last persisted instead.
 * A key's token is the revision at which it was created. Expiry deletes the key and moves the revision on.
 * Left out: terms and votes (an election is a fixed delay), log replication timing (a commit is instant while a
 * majority is up), compaction, and the nodes' own clock rates (their deadlines run on true time).
 */
import type { Sim } from './engine';
import type { Network, Worker } from './worker';

interface Lease {
  readonly ttlMs: number;
  readonly holder: string;
  readonly keys: Set<string>;
  /** The remaining TTL last persisted by a checkpoint (in the log: it survives a failover). */
  checkpointMs?: number;
}

/** What an acquire answers: the lease and the token (the key's create revision), or why not. */
export type Acquired = { ok: true; leaseId: number; revision: number } | { ok: false; reason: 'key exists' | 'no quorum' };

export interface LockServiceSpec {
  /** The revision counter before the scenario starts (other keys were written before). @default 0 */
  readonly revision?: number;
  /** How long a new leader takes to be elected after the old one dies, ms. @default 2000 */
  readonly electionMs?: number;
  /** Persist each lease's remaining TTL every this many ms (etcd's LeaseCheckpoint). @default off */
  readonly checkpointMs?: number;
  /** Nodes. @default 3 */
  readonly nodes?: number;
}

export class ConsensusLockService {
  readonly name = 'lock service';
  revision: number;
  readonly up: boolean[];
  leader: number | undefined = 0;
  private readonly keys = new Map<string, { leaseId?: number; createRevision: number }>();
  private readonly leases = new Map<number, Lease>();
  /** The leader's lease tracker: deadline per lease, true time, in the leader's memory only. */
  private deadlines = new Map<number, number>();
  private readonly watches = new Map<string, (() => void)[]>();
  private nextLease = 1;
  private readonly electionMs: number;

  constructor(
    private readonly sim: Sim,
    spec: LockServiceSpec = {},
  ) {
    this.revision = spec.revision ?? 0;
    this.electionMs = spec.electionMs ?? 2000;
    this.up = Array.from({ length: spec.nodes ?? 3 }, () => true);
    if (spec.checkpointMs !== undefined) this.checkpointEvery(spec.checkpointMs);
  }

  nodeName(i: number): string {
    return `n${i + 1}`;
  }

  /** A commit needs a leader and a majority of nodes up (2 of 3, 3 of 5). */
  private quorum(): boolean {
    return this.leader !== undefined && this.up.filter(Boolean).length > this.up.length / 2;
  }

  /** The leader's name, or undefined during an election: keep-alives can reach only the leader. */
  leaderName(): string | undefined {
    return this.leader === undefined ? undefined : this.nodeName(this.leader);
  }

  /**
   * ACQUIRE: grant a lease with TTL ttlMs and, in one transaction, create `key` bound to it only if the key
   * does not exist; both commit through the log. The token is the revision at which the key was created; the
   * leader's tracker starts timing the TTL from when it applied the grant.
   */
  acquire(key: string, holder: string, ttlMs: number): Acquired {
    if (!this.quorum()) return { ok: false, reason: 'no quorum' };
    if (this.keys.has(key)) return { ok: false, reason: 'key exists' };
    const leaseId = this.nextLease++;
    this.leases.set(leaseId, { ttlMs, holder, keys: new Set([key]) });
    this.revision++;
    this.keys.set(key, { leaseId, createRevision: this.revision });
    this.setDeadline(leaseId, this.sim.now + ttlMs);
    return { ok: true, leaseId, revision: this.revision };
  }

  /** A key written by someone else (another job on the same service): it only moves the revision counter on. */
  put(key: string): boolean {
    if (!this.quorum()) return false;
    this.revision++;
    this.keys.set(key, { createRevision: this.revision });
    return true;
  }

  /** KEEP-ALIVE: the leader resets the deadline in memory only; no log entry. */
  keepAlive(leaseId: number): { ok: true; deadline: number } | { ok: false; reason: 'no leader' | 'lease not found' } {
    if (this.leader === undefined) return { ok: false, reason: 'no leader' };
    const lease = this.leases.get(leaseId);
    if (!lease) return { ok: false, reason: 'lease not found' };
    const deadline = this.sim.now + lease.ttlMs;
    this.setDeadline(leaseId, deadline);
    return { ok: true, deadline };
  }

  /** RELEASE: revoke the lease; only keys bound to it are deleted; the delete commits and the revision goes up. */
  revoke(leaseId: number): number | undefined {
    if (!this.quorum() || !this.leases.has(leaseId)) return undefined;
    return this.endLease(leaseId, 'revoked');
  }

  /** Is there a live key? A linearizable read through the leader (what the sweeper asks). */
  isLive(key: string): boolean | undefined {
    return this.quorum() ? this.keys.has(key) : undefined;
  }

  /** Call fn once when `key` is deleted (etcd watch; an election candidate watches only its predecessor). */
  watchDelete(key: string, fn: () => void): void {
    this.watches.set(key, [...(this.watches.get(key) ?? []), fn]);
  }

  /** The deadline the current leader holds for a lease (undefined: none, or no leader). */
  deadlineOf(leaseId: number): number | undefined {
    return this.leader === undefined ? undefined : this.deadlines.get(leaseId);
  }

  /**
   * A node dies at true time `at`. If it was the leader, its memory (every deadline) dies with it; after the
   * election delay, if a majority is still up, the next node leads and rebuilds every deadline at full length
   * from its own now, or from the last checkpointed remaining TTL.
   */
  crashNode(i: number, at: number): void {
    this.sim.mark({ lane: this.name, kind: 'crash', from: at, label: `${this.nodeName(i)}${i === this.leader ? ' (leader)' : ''} dies` });
    this.sim.at(at, () => {
      this.up[i] = false;
      this.sim.log(this.nodeName(i), this.leader === i ? 'leader dies; every deadline in its memory is gone' : 'dies');
      if (this.leader !== i) return;
      this.leader = undefined;
      this.deadlines = new Map();
      this.sim.after(this.electionMs, () => this.elect());
    });
  }

  private elect(): void {
    const next = this.up.findIndex(Boolean);
    if (next < 0 || this.up.filter(Boolean).length <= this.up.length / 2) return;
    this.leader = next;
    const rebuilt: string[] = [];
    for (const [id, lease] of this.leases) {
      const length = lease.checkpointMs ?? lease.ttlMs;
      this.setDeadline(id, this.sim.now + length);
      this.sim.mark({ lane: this.name, kind: 'deadline', from: this.sim.now + length, label: `rebuilt: ${lease.holder}` });
      rebuilt.push(`${lease.holder}'s lease until ${(this.sim.now + length) / 1000}`);
    }
    this.sim.log(this.nodeName(next), 'elected leader; rebuilds every deadline', {
      note: rebuilt.length ? rebuilt.join(', ') : 'no leases',
    });
  }

  private checkpointEvery(ms: number): void {
    this.sim.after(ms, () => {
      if (this.quorum()) for (const [id, d] of this.deadlines) this.leases.get(id)!.checkpointMs = d - this.sim.now;
      this.checkpointEvery(ms);
    });
  }

  /** A snapshot of what the log holds: the revision and the keys (the deadlines are never in it). */
  snapshot(): { revision: number; keys: string[] } {
    return { revision: this.revision, keys: [...this.keys.keys()].filter((k) => this.keys.get(k)!.leaseId === undefined) };
  }

  /**
   * Restore from a snapshot: every key and lease made after it is forgotten, and the revision
   * goes back to the snapshot's, plus `bumpRevision` (etcd's --bump-revision) so no token is handed out twice.
   */
  restore(snap: { revision: number; keys: string[] }, bumpRevision = 0): void {
    this.keys.clear();
    this.leases.clear();
    this.deadlines = new Map();
    for (const k of snap.keys) this.keys.set(k, { createRevision: 0 });
    this.revision = snap.revision + bumpRevision;
  }

  private setDeadline(leaseId: number, deadline: number): void {
    this.deadlines.set(leaseId, deadline);
    const tracker = this.deadlines;
    this.sim.at(deadline, () => {
      // Expire only if this is still the leader's latest deadline for the lease, and the leader can commit.
      if (tracker !== this.deadlines || this.deadlines.get(leaseId) !== deadline || !this.quorum()) return;
      this.endLease(leaseId, 'expired');
    });
  }

  private endLease(leaseId: number, why: 'expired' | 'revoked'): number {
    const lease = this.leases.get(leaseId)!;
    this.leases.delete(leaseId);
    this.deadlines.delete(leaseId);
    if (why === 'expired') this.sim.mark({ lane: this.name, kind: 'deadline', from: this.sim.now, label: `${lease.holder}'s deadline` });
    for (const key of lease.keys) {
      this.keys.delete(key);
      this.revision++;
      this.sim.log(this.name, `${lease.holder}'s lease ${why}: key deleted`, { note: `${key} at revision ${this.revision}` });
      for (const fn of this.watches.get(key) ?? []) fn();
      this.watches.delete(key);
    }
    return this.revision;
  }
}

/**
 * A worker's client for the lock service: requests go to the node it believes leads; a node that does not answer
 * (dead) times out, and the client tries the next node, which finds the new leader once one is elected (the
 * story's "the retry found the new leader").
 */
export class LockClient {
  private knownLeader = 0;

  constructor(
    private readonly service: ConsensusLockService,
    private readonly net: Network,
    private readonly worker: Worker,
    private readonly timeoutMs = 100,
  ) {}

  private ask<R>(op: () => R, done: (r: R | undefined) => void): void {
    type Answer = { leader: number | undefined; r: R | undefined };
    const i = this.knownLeader;
    const node = this.service.nodeName(i);
    this.net.call(
      this.worker,
      node,
      (): Answer | undefined => (this.service.up[i] ? { leader: this.service.leader, r: this.service.leader === i ? op() : undefined } : undefined),
      (answer) => {
        if (answer === undefined) {
          this.knownLeader = (i + 1) % this.service.up.length; // no answer: try the next node next time
          return done(undefined);
        }
        if (answer.leader !== undefined && answer.leader !== i) this.knownLeader = answer.leader; // a follower names the leader
        done(answer.r);
      },
      this.timeoutMs,
    );
  }

  acquire(key: string, ttlMs: number, done: (r: Acquired | undefined) => void): void {
    this.ask(() => this.service.acquire(key, this.worker.name, ttlMs), done);
  }

  /** A RenewOp for Holder: true renewed, false the lease is gone, undefined no answer (or no leader yet). */
  keepAlive(leaseId: number): (done: (ok: boolean | undefined) => void) => void {
    return (done) =>
      this.ask(
        () => this.service.keepAlive(leaseId),
        (r) => done(r === undefined ? undefined : r.ok ? true : r.reason === 'no leader' ? undefined : false),
      );
  }

  revoke(leaseId: number, done: (revision: number | undefined) => void): void {
    this.ask<number | undefined>(() => this.service.revoke(leaseId), done);
  }
}

/**
 * Redis as a lock service ("What if the lock service is Redis?" and "Redlock").
 *
 *   RedisPrimaryReplica  SET key value NX PX ttl on a primary, replicated to one replica ASYNCHRONOUSLY: each write
 *                        reaches the replica `lagMs` later, and is lost if the primary dies first. The token is
 *                        INCR on a counter key, so a failover can lose the lock AND the counter's last increment.
 *   RedlockMaster        one of N independent masters (no replication). Key expiry is judged by the master's WALL
 *                        clock (Redis does not use a monotonic clock for it), so a clock jump expires a key early.
 *   redlockAcquire       the client's algorithm: SET NX PX on every master it reaches; held only with a majority
 *                        and elapsed < TTL; validity = TTL - elapsed.
 * Left out: Sentinel's detection and voting (promotion is a scheduled step), persistence and delayed restarts.
 */
import type { WorkerClock } from './clocks';
import type { Sim } from './engine';

interface Entry {
  readonly value: string | number;
  readonly expiresAt?: number;
}

type Keyspace = Map<string, Entry>;

export class RedisPrimaryReplica {
  private primary: Keyspace = new Map();
  private replica: Keyspace = new Map();
  private primaryUpUntil = Number.POSITIVE_INFINITY;

  constructor(
    private readonly sim: Sim,
    private readonly lagMs = 100,
    readonly name = 'redis',
  ) {}

  private live(space: Keyspace, key: string): Entry | undefined {
    const e = space.get(key);
    return e && (e.expiresAt === undefined || e.expiresAt > this.sim.now) ? e : undefined;
  }

  /** Ship one write to the replica `lagMs` later, unless the primary is dead by then (asynchronous replication). */
  private replicate(key: string, e: Entry): void {
    const sentBy = this.sim.now + this.lagMs;
    this.sim.at(sentBy, () => {
      if (sentBy <= this.primaryUpUntil) this.replica.set(key, e);
    });
  }

  /** SET key value NX PX ttl: true if set. */
  setNx(key: string, value: string, ttlMs: number): boolean {
    if (this.live(this.primary, key)) return false;
    const e = { value, expiresAt: this.sim.now + ttlMs };
    this.primary.set(key, e);
    this.replicate(key, e);
    return true;
  }

  /** INCR key: the new value (the token). */
  incr(key: string): number {
    const v = Number(this.live(this.primary, key)?.value ?? 0) + 1;
    const e = { value: v };
    this.primary.set(key, e);
    this.replicate(key, e);
    return v;
  }

  /** Set a counter directly (its value before the scenario). */
  seed(key: string, value: number): void {
    this.primary.set(key, { value });
    this.replica.set(key, { value });
  }

  /** The primary dies at `at`; the replica is promoted at `promoteAt` with whatever had reached it. */
  failover(at: number, promoteAt: number): void {
    this.primaryUpUntil = at;
    this.sim.at(at, () => this.sim.log(this.name, 'primary dies (writes not yet replicated are lost)'));
    this.sim.at(promoteAt, () => {
      this.primary = this.replica;
      this.replica = new Map();
      this.primaryUpUntil = Number.POSITIVE_INFINITY;
      this.sim.log(this.name, 'replica promoted to primary', { note: `counter ${String(this.primary.get('token')?.value ?? '-')}` });
    });
  }
}

export class RedlockMaster {
  private readonly keys: Keyspace = new Map();

  constructor(
    private readonly sim: Sim,
    readonly name: string,
    /** The master's clocks: Redis judges key expiry by the wall clock. */
    readonly clock: WorkerClock,
  ) {}

  /** SET key value NX PX ttl, expiry judged on this master's wall clock. */
  setNx(key: string, value: string, ttlMs: number): boolean {
    const wall = this.clock.wall(this.sim.now);
    const e = this.keys.get(key);
    if (e && e.expiresAt! > wall) return false;
    this.keys.set(key, { value, expiresAt: wall + ttlMs });
    return true;
  }

  holderOf(key: string): string | undefined {
    const e = this.keys.get(key);
    return e && e.expiresAt! > this.clock.wall(this.sim.now) ? String(e.value) : undefined;
  }
}

/**
 * REDLOCK ACQUIRE: SET NX PX on every reachable master; held only if a majority succeeded AND the elapsed
 * time is below the TTL; validity = TTL - elapsed.
 */
export function redlockAcquire(
  masters: readonly RedlockMaster[],
  reachable: (m: RedlockMaster) => boolean,
  key: string,
  value: string,
  ttlMs: number,
  elapsedMs: number,
): { held: boolean; granted: string[]; validityMs: number } {
  const granted = masters.filter((m) => reachable(m) && m.setNx(key, value, ttlMs)).map((m) => m.name);
  const held = granted.length > masters.length / 2 && elapsedMs < ttlMs;
  return { held, granted, validityMs: held ? ttlMs - elapsedMs : 0 };
}

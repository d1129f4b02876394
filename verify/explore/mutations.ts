/**
 * Deliberately broken variants of the rules, applied by the harness only (never the product code), to prove the
 * exploration's checks catch them (issue 19 item 4, "Prove it finds bugs"):
 *   fence-below      the store accepts a batch whose token is BELOW the fence (the fence comparison broken);
 *   no-stop-check    the lease's stop-time check does nothing (Lease.prototype.check patched for the schedule);
 *   epoch-deleted    releasing the lease deletes the lock item, so its epoch starts again from 1;
 *   raise-after      a holder raises each chunk fence only after its first write into the chunk;
 *   requeue-before-start  the sweeper's old order (issue 18 defect 1): record the re-queue by taking the row OUT of
 *                    the sparse index (state QUEUED, claim_shard removed), and only THEN start the new run;
 *   claim-on-wall-clock   the naive lease, timed by wall clocks: `lease_until` written from the writer's wall clock,
 *                    the claim conditional on `attribute_not_exists(holder) OR lease_until < :claimant_now_minus_margin`,
 *                    instead of a full lease's wait on an unchanged rvn;
 *   fence-lt         THE fence comparison (lib/core/aws/job-store.ts FENCE_CLAUSE, `fence <= :t`) written `fence < :t`:
 *                    the batch's check and the raises refuse a token equal to the fence;
 *   stop-time-from-answer  the lease counts its stop time from when a claim's or renewal's answer arrived, not from
 *                    when it was sent: an answer that comes late moves the stop time past the lease the store granted.
 * The night world's own (NIGHT_MUTATIONS; the workflow world takes them too):
 *   lease-in-seconds the claim writes its lease into lease_ms in seconds (`leaseMs / 1000`, as a TTL attribute
 *                    would be): a claimant waits out the lease the item declares, 10 ms, and takes a live lease over;
 *   done-mark-first  a chunk recorded done as its work starts, not after its last batch (the mark sent with the
 *                    chunk's first batch): a holder stopped inside the chunk leaves it marked done and half written;
 *   puts-unconditional  the fenced batch's puts sent without `attribute_not_exists`: the fence's check still guards
 *                    the batch, but an item already recorded (by an earlier holder, or a retry under a new request
 *                    token) is overwritten instead of refused, so it is recorded twice.
 */
import type { Clock } from '../../lib/core/clock';
import type { LeaseConfig } from '../../lib/core/config';
import { Lease, nextClaimStep, pollMsOf, type Watch } from '../../lib/core/lease';
import { candidateKey, Election, Leadership } from '../../lib/election/election';
import { sleepUnlessAborted } from '../../lib/core/clock';
import { EpochFence } from '../../lib/election/epoch-fence';
import { type HandoverConfig, Writer } from '../../lib/election/handover';
import { DEFAULT_BACKOFF } from '../../lib/core/conditions';
import type { ManifestStore } from '../../lib/core/store/manifest';
import { copyOf, transactionCanceled } from '../../lib/testing/dynamo-rules';
import type { LedgerEntry, LedgerHead, LedgerStore } from '../../lib/core/store/ledger';
import type { MemoryLockStore } from '../../lib/testing/lock-store';
import { fenceAccepts, type MemoryJobStore } from '../../lib/testing/job-store';
import { Attr } from '../../lib/core/schema';
import type { BatchPut, Conditional, FenceItem, JobRow, JobStore, RequeueSighting } from '../../lib/core/store/jobs';
import type { ClaimOn, LockItem, LockStore } from '../../lib/core/store/lock';
import { type Broken, plainStores } from '../../lib/testing/broken';

export type { Broken } from '../../lib/testing/broken';

export const MUTATIONS = [
  'fence-below',
  'no-stop-check',
  'epoch-deleted',
  'raise-after',
  'requeue-before-start',
  'claim-on-wall-clock',
  'fence-lt',
  'stop-time-from-answer',
] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** The night world's own broken variants (see the header); the workflow world takes them too. */
export const NIGHT_MUTATIONS = ['lease-in-seconds', 'done-mark-first', 'puts-unconditional'] as const;
export type NightMutation = (typeof NIGHT_MUTATIONS)[number];

/** A put's key value as the store keeps it: a wire item's string or number, or the document's value. */
function keyOfPut(p: BatchPut): unknown {
  if (!p.item) return p.document[p.keyAttribute];
  const v = p.item[p.keyAttribute] as { S?: string; N?: string };
  return v.S ?? Number(v.N);
}

/** epoch-deleted's lock store: a release that lands deletes the lock item, so the key's epoch starts again at 1. */
export function releaseDeletes(locks: LockStore): LockStore {
  return override(locks, {
    release: async (key, holding, rvn, wallIso) => {
      const out = await locks.release(key, holding, rvn, wallIso);
      // The in-memory store keeps its items in a private map: the variant reaches behind it.
      if (out.ok) (locks as unknown as { items: Map<string, unknown> }).items.delete(key);
      return out;
    },
  } satisfies Partial<MemoryLockStore>);
}

/** `target` with some of its methods replaced: how a broken variant changes a store. */
export const override = <T extends object>(target: T, methods: Partial<T>): T =>
  new Proxy(target, { get: (t, prop, receiver) => (prop in methods ? methods[prop as keyof T] : Reflect.get(t, prop, receiver)) as unknown });

export function applyMutation(
  mutation: Mutation | NightMutation | undefined,
  stores: { readonly locks: LockStore; readonly jobs: JobStore },
): Broken {
  const { locks, jobs } = stores;
  const plain = plainStores(stores);
  switch (mutation) {
    case undefined:
      return plain;
    case 'fence-below':
      return {
        ...plain,
        jobsFor: () =>
          override(jobs, {
            // Checks the fence against the fence's own value: a token below it passes.
            recordBatch: async (fence, token, puts, requestToken) => {
              const current = Number((await jobs.readFence(fence))?.fence ?? token);
              return jobs.recordBatch(fence, Math.max(token, current), puts, requestToken);
            },
          }),
      };
    case 'no-stop-check': {
      const check = Object.getOwnPropertyDescriptor(Lease.prototype, 'check')!;
      Lease.prototype.check = () => undefined;
      return { ...plain, restore: () => Object.defineProperty(Lease.prototype, 'check', check) };
    }
    case 'epoch-deleted': {
      const deleting = releaseDeletes(locks);
      return { ...plain, locks: deleting, locksFor: () => deleting };
    }
    case 'raise-after':
      return {
        ...plain,
        jobsFor: (_actor, steps) => {
          const stepped = steps(jobs);
          const deferred = new Map<string, { item: FenceItem; token: number }>();
          return override(jobs, {
            // A chunk fence's raise is answered as done but deferred to after the holder's first write there.
            raiseFence: async (item, token, set) => {
              if (!String(item.key.pk).includes('#chunk#')) return jobs.raiseFence(item, token, set);
              deferred.set(String(item.key.pk), { item, token });
              return { ok: true, old: await jobs.readFence(item) };
            },
            recordBatch: async (fence, token, puts, requestToken) => {
              const out = await jobs.recordBatch(fence, token, puts, requestToken);
              const late = deferred.get(String(fence.key.pk));
              if (late) {
                deferred.delete(String(fence.key.pk));
                await stepped.raiseFence(late.item, late.token);
              }
              return out;
            },
          });
        },
      };
    case 'requeue-before-start':
      return {
        ...plain,
        sweeperFor: (_actor, steps, inner, startExecution) => {
          // The old write: QUEUED and out of the sparse index, on the row as sighted. The in-memory store keeps its
          // conditional update private: the variant reaches behind it (the index follows the write there).
          const update = (inner as unknown as { update: Update }).update.bind(inner);
          const old = steps({
            requeueOut: async (jobId: string, seen: RequeueSighting) =>
              update(
                'jobs',
                { [Attr.pk]: jobId },
                (row) =>
                  row?.state === 'RUNNING' &&
                  row.owner_token === seen.ownerToken &&
                  row.fence === seen.fence &&
                  (row.requeues ?? 0) === seen.requeues,
                { [Attr.state]: 'QUEUED', [Attr.requeues]: seen.requeues + 1 },
                [Attr.claimShard, Attr.claimedSince],
              ),
          });
          return {
            // `sweep` calls start first: the broken order defers it to after the write.
            start: async () => undefined,
            jobs: override(steps(inner), {
              requeue: async (jobId, seen) => {
                const out = await old.requeueOut(jobId, seen);
                if (out.ok) await startExecution(jobId, seen);
                return out;
              },
            }),
          };
        },
      };
    case 'claim-on-wall-clock': {
      // The in-memory store keeps its items private: the variant keeps lease_until on them, behind its back.
      const items = (locks as unknown as { items: Map<string, Record<string, unknown>> }).items;
      const until = (key: string) => Number(items.get(key)?.lease_until ?? 0);
      const write = (key: string, ms: number) => void (items.get(key) && (items.get(key)!.lease_until = ms));
      return {
        ...plain,
        locksFor: (clock, lease) => {
          // The claimant's now, minus the margin, against the writer's lease_until: two clocks compared.
          const over = (key: string, claimantWallMs: number) => until(key) < claimantWallMs - lease.marginMs;
          return override(locks, {
            // A lease over on our wall clock reads as free: the naive claimant claims at once.
            read: async (key) => {
              const item = await locks.read(key);
              if (item?.holder === undefined || !over(key, clock.wallMs())) return item;
              const free: Record<string, unknown> = { ...item };
              delete free.holder;
              return free as unknown as LockItem;
            },
            claim: async (key, _on, w) => {
              const item = items.get(key);
              if (item?.holder !== undefined && !over(key, Date.parse(w.wallIso))) {
                // Refused: the naive claimant polls again a poll period later (the real loop would retry at once).
                await clock.sleep(pollMsOf(lease));
                return { ok: false, current: await locks.read(key) };
              }
              const on: ClaimOn = item?.holder === undefined ? { free: true } : { rvn: String(item.rvn) };
              const out = await locks.claim(key, on, w);
              if (out.ok) write(key, Date.parse(w.wallIso) + lease.leaseMs);
              return out;
            },
            renew: async (key, holding, rvn, wallIso) => {
              const out = await locks.renew(key, holding, rvn, wallIso);
              if (out.ok) write(key, Date.parse(wallIso) + lease.leaseMs);
              return out;
            },
            release: async (key, holding, rvn, wallIso) => {
              const out = await locks.release(key, holding, rvn, wallIso);
              if (out.ok) write(key, 0);
              return out;
            },
          } satisfies Partial<LockStore>);
        },
      };
    }
    case 'stop-time-from-answer':
      return { ...plain, restore: stopTimeFromAnswer() };
    case 'lease-in-seconds':
      return {
        ...plain,
        // The claim declares its lease in seconds where the item's lease_ms is read as milliseconds.
        locksFor: () => override(locks, { claim: (key, on, w) => locks.claim(key, on, { ...w, leaseMs: Math.round(w.leaseMs / 1000) }) }),
      };
    case 'done-mark-first':
      return {
        ...plain,
        jobsFor: (_actor, steps) => {
          const stepped = steps(jobs);
          const marked = new Set<string>();
          return override(jobs, {
            // The chunk's first batch: its done mark goes out just before it (its own step), then the batch.
            recordBatch: async (fence, token, puts, requestToken) => {
              const chunk = String(fence.key.pk);
              if (!marked.has(chunk)) {
                marked.add(chunk);
                await stepped.markChunkDone(chunk, token);
              }
              return jobs.recordBatch(fence, token, puts, requestToken);
            },
          });
        },
      };
    case 'puts-unconditional': {
      // DynamoDB would overwrite; the in-memory store refuses an item already there, so the variant reaches behind
      // it: where the fence's check will pass, the items go first and the batch then writes every one of them. Not
      // for a resend of a request already applied (its replay writes nothing: the items would be lost).
      const memory = jobs as unknown as MemoryJobStore;
      const sent = new Set<string>();
      return {
        ...plain,
        jobsFor: () =>
          override(jobs, {
            recordBatch: async (fence, token, puts, requestToken) => {
              if (!sent.has(requestToken) && fenceAccepts(await jobs.readFence(fence), token))
                for (const p of puts) await memory.deleteItem(p.table, { [p.keyAttribute]: keyOfPut(p) });
              sent.add(requestToken);
              return jobs.recordBatch(fence, token, puts, requestToken);
            },
          }),
      };
    }
    case 'fence-lt': {
      // `fence < :t` differs from `fence <= :t` only at equality: refuse exactly that, as the store would refuse it.
      const equal = (item: { readonly [Attr.fence]?: unknown } | undefined, token: number) =>
        item?.[Attr.fence] !== undefined && Number(item[Attr.fence]) === token;
      return {
        ...plain,
        jobsFor: () =>
          override(jobs, {
            recordBatch: async (fence, token, puts, requestToken) => {
              const current = await jobs.readFence(fence);
              if (!equal(current, token)) return jobs.recordBatch(fence, token, puts, requestToken);
              const reasons = [{ Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: current }];
              return { kind: 'fenced-out', current, cause: transactionCanceled([...reasons, ...puts.map(() => ({ Code: 'None' }))]) };
            },
            raiseFence: async (item, token, set) => {
              const current = await jobs.readFence(item);
              return equal(current, token) ? { ok: false, current } : jobs.raiseFence(item, token, set);
            },
            raiseJob: async (jobId, r) => {
              const current = await jobs.readJob(jobId);
              return equal(current, r.token) ? { ok: false, current } : jobs.raiseJob(jobId, r);
            },
          }),
      };
    }
  }
}

type Update = (
  table: string,
  key: Record<string, unknown>,
  condition: (old: Partial<JobRow> | undefined) => boolean,
  set: Record<string, unknown>,
  remove: readonly string[],
) => Conditional<JobRow>;

// ─── The election world's broken variants ───────────────────────────────────────────────────────────────────────

/**
 * The election world's broken variants (verify/explore/election-world.ts), each applied where that world builds the
 * part it breaks:
 *   epoch-deleted       the role item is deleted when its queue empties, a released lock item is deleted;
 *   restore-no-bump     the restored lock table is used without bumpEpochs;
 *   restore-no-floor    the bump raises the items the restored table holds, not the epoch floor (the old bump);
 *   handover-no-bump    EpochFence.raise does nothing: the flip without the bump;
 *   handover-no-margin  the new writer waits out the old writer's lease from the flip, without the wait margin (the
 *                       old writer has no stop margin, so its lease alone looks enough);
 *   manifest-blind-put  the manifest commit is an unconditional put, not If-Match on the version read;
 *   watchdog-off        the leadership watchdog is never armed, so onLost never comes;
 *   sidecar-heartbeat   a crashed candidate's item is renewed on by a sidecar that outlived it;
 *   no-stop-check       the lease's stop-time check does nothing, as in the night world: caught from outside, by the
 *                       ledger writes sent past their writer's stop time (history.ts);
 *   watch-for-resign    a successor waits for its predecessor to resign, and takes a silent one out only once its
 *                       claim budget is spent (30 leases): a crashed leader leaves the role without one for minutes;
 *   handover-polite     the new writer waits for the old one to release, and flips only once its claim budget is spent:
 *                       a crashed or paused old writer holds the handover up for minutes;
 *   manifest-off-by-one a leader commits each act to the manifest under the ledger's head as read before its append
 *                       (the version before the act's own);
 *   release-retried     the writer's release sends again while it is refused, its failed condition taken for a
 *                       transient error: a writer handed over never ends;
 *   append-split        the ledger append is two requests, the fence item's update then the entry's put, not one
 *                       transaction: a crash or a lost answer between them leaves the head past an entry never put;
 *   bump-past-epoch     the handover bumps the fence one past the new writer's epoch ("so the old writer's is
 *                       below it"): the new writer's own appends are below it too, and refused;
 *   fence-gets-version  the append binds the fence's placeholder to the entry's version (a copy of the line that
 *                       binds the version's): the fence clause compares the fence with the version and sets it to it.
 */
export const ELECTION_MUTATIONS = [
  'epoch-deleted',
  'restore-no-bump',
  'restore-no-floor',
  'handover-no-bump',
  'handover-no-margin',
  'manifest-blind-put',
  'watchdog-off',
  'sidecar-heartbeat',
  'no-stop-check',
  'stop-time-from-answer',
  'watch-for-resign',
  'handover-polite',
  'manifest-off-by-one',
  'release-retried',
  'append-split',
  'bump-past-epoch',
  'fence-gets-version',
] as const;
export type ElectionMutation = (typeof ELECTION_MUTATIONS)[number];

/** The election world's parts as one schedule sees them, with its broken variant (if any) applied. */
export interface ElectionBroken {
  /** The lock table the candidates see, given the table and the map of items behind the table in use now. */
  locks(table: LockStore, items: () => Map<string, unknown>): LockStore;
  /** The manifest bucket a leader commits to. */
  bucket(store: ManifestStore): ManifestStore;
  /** The ledger store one actor appends to, given the store and how an object's calls become that actor's steps. */
  ledgers(store: LedgerStore, steps: <T extends object>(inner: T) => T): LedgerStore;
  /** The restored lock table the restore bumps. */
  restored(store: LockStore): LockStore;
  /** The restore bumps the epochs (false: it only puts the backup back). */
  readonly bumps: boolean;
  /** A crashed candidate's item is renewed on by a sidecar (the world starts it at the crash). */
  readonly sidecar: boolean;
  /** The handover's settings a writer takes over with. */
  handover(config: HandoverConfig): HandoverConfig;
  /** A leader commits each act to the manifest under the ledger's head read before its append. */
  readonly manifestOffByOne: boolean;
  /** The new writer waits for the old one to release before its handover (politeWait). */
  readonly politeHandover: boolean;
  /** Undo the patches of the core's classes, after the schedule. */
  restore(): void;
}

/**
 * The variant stop-time-from-answer, in every world: the lease's stop time counted from when the answer came, not
 * from the send. stopTimeFrom is private: the variant reaches behind it, and ignores the send time it is given.
 * @returns the undo
 */
function stopTimeFromAnswer(): () => void {
  type Counting = { stopTimeFrom(sentAt: number): number; deps: { clock: Clock }; config: LeaseConfig };
  const proto = Lease.prototype as unknown as Counting;
  const from = Object.getOwnPropertyDescriptor(proto, 'stopTimeFrom')!;
  proto.stopTimeFrom = function (this: Counting) {
    return this.deps.clock.monotonicMs() + this.config.leaseMs - this.config.marginMs;
  };
  return () => Object.defineProperty(proto, 'stopTimeFrom', from);
}

/**
 * The watch of watch-waited and watch-for-resign: Election's private watchPredecessor, as the product writes it (read
 * the predecessor's item every poll; gone: it resigned), with the broken rule for when a silent one is taken out.
 * @returns the undo
 */
function brokenWatch(takeOut: (watch: Watch, waitMs: number, config: LeaseConfig) => boolean): () => void {
  type Watching = {
    watchPredecessor(predecessor: number, own: Lease, reads: unknown, signal?: AbortSignal): Promise<'resigned' | 'found-gone'>;
    removeIfUnchanged(seq: number, rvn: string): Promise<boolean>;
    store: LockStore;
    role: string;
    config: LeaseConfig;
    deps: { clock: Clock };
  };
  const proto = Election.prototype as unknown as Watching;
  const watch = Object.getOwnPropertyDescriptor(proto, 'watchPredecessor')!;
  proto.watchPredecessor = async function (this: Watching, predecessor, own, _reads, signal) {
    let seen: Watch | undefined;
    let lastSeenAt = 0;
    for (;;) {
      signal?.throwIfAborted();
      own.check();
      const item = await this.store.read(candidateKey(this.role, predecessor));
      const seenAt = this.deps.clock.monotonicMs();
      if (item?.holder === undefined) return 'resigned';
      const sighting = { holder: item.holder, epoch: item.epoch, seenRvn: item.rvn, waitMs: item.lease_ms ?? this.config.leaseMs };
      const step = nextClaimStep(seen, sighting, seenAt - lastSeenAt, { leaseMs: this.config.leaseMs, claimBudget: Infinity });
      [seen, lastSeenAt] = [step.watch, seenAt];
      if (takeOut(step.watch, sighting.waitMs, this.config)) {
        if (await this.removeIfUnchanged(predecessor, item.rvn!)) return 'found-gone';
        continue;
      }
      await sleepUnlessAborted(this.deps.clock, pollMsOf(this.config), signal);
    }
  };
  return () => Object.defineProperty(proto, 'watchPredecessor', watch);
}

/** The in-memory ledger store keeps its fence items and entries private: the ledger variants reach behind it. */
interface LedgerInside {
  readonly fences: Map<string, { fence?: number; version?: number }>;
  readonly items: Map<string, LedgerEntry>;
}

/**
 * fence-gets-version: the append's transaction binds `:e` to the entry's version (a copy of the line that binds
 * `:v`): its condition is `fence <= :version` and it sets the fence to the version. The store's own append, given the
 * entry with its version as its epoch, is that transaction; the entry is then put back as written, with its epoch.
 */
function fenceGetsVersion(store: LedgerStore): LedgerStore {
  const { items } = store as unknown as LedgerInside;
  return override(store, {
    append: async (key, entry, token) => {
      const out = await store.append(key, { ...entry, epoch: entry.version }, token);
      const put = items.get(entry.pk);
      if (out.ok && put !== undefined) items.set(entry.pk, { ...put, epoch: entry.epoch });
      return out;
    },
  });
}

/**
 * append-split: the append as two requests, each its own step (a fault can fall between them): an UpdateItem of the
 * fence item (the fence clause and the version clause, setting both), then a PutItem of the entry (only if absent).
 * Neither carries the transaction's token: a retry after a lost answer meets its own update and is refused.
 */
function splitAppend(store: LedgerStore, steps: <T extends object>(inner: T) => T): LedgerStore {
  const { fences, items } = store as unknown as LedgerInside;
  const writes = steps({
    /** The fence item's update; refused, the head as it was (ALL_OLD). */
    updateFence: async (key: string, entry: LedgerEntry): Promise<LedgerHead | undefined> => {
      const item = fences.get(key);
      const fenceOk = item?.fence === undefined || item.fence <= entry.epoch;
      const follows = entry.version === 1 ? item?.version === undefined : item?.version === entry.version - 1;
      if (!fenceOk || !follows) return { epoch: item?.fence ?? 0, version: item?.version ?? 0 };
      fences.set(key, { ...item, fence: entry.epoch, version: entry.version });
      return undefined;
    },
    /** The entry's put, only if absent. */
    putEntry: async (entry: LedgerEntry): Promise<boolean> => {
      if (items.has(entry.pk)) return false;
      items.set(entry.pk, copyOf(entry));
      return true;
    },
  });
  return override(store, {
    append: async (key, entry) => {
      const refusedBy = await writes.updateFence(key, entry);
      if (refusedBy !== undefined) return { ok: false, reasons: ['ConditionalCheckFailed', 'None'], current: refusedBy };
      if (!(await writes.putEntry(entry))) return { ok: false, reasons: ['None', 'ConditionalCheckFailed'], current: undefined };
      return { ok: true };
    },
  });
}

/**
 * handover-polite, applied before the real handover: wait (polling every poll period) for the writer lease to be
 * free, at most the claim budget in leases on the writer's own clock; then the handover runs as it is.
 */
export async function politeWait(locks: Pick<LockStore, 'read'>, clock: Clock, key: string, config: LeaseConfig): Promise<void> {
  const started = clock.monotonicMs();
  while ((await locks.read(key))?.holder !== undefined && clock.monotonicMs() - started < config.claimBudget * config.leaseMs)
    await clock.sleep(pollMsOf(config));
}

export function applyElectionMutation(mutation: ElectionMutation | undefined): ElectionBroken {
  const undo: (() => void)[] = [];
  if (mutation === 'handover-no-bump') {
    const raise = Object.getOwnPropertyDescriptor(EpochFence.prototype, 'raise')!;
    // The flip without the bump: the new writer goes on from the head as it is, the fence left where it was.
    EpochFence.prototype.raise = function (this: EpochFence) {
      return this.head();
    };
    undo.push(() => Object.defineProperty(EpochFence.prototype, 'raise', raise));
  }
  if (mutation === 'no-stop-check') {
    const check = Object.getOwnPropertyDescriptor(Lease.prototype, 'check')!;
    Lease.prototype.check = () => undefined;
    undo.push(() => Object.defineProperty(Lease.prototype, 'check', check));
  }
  if (mutation === 'bump-past-epoch') {
    const raise = Object.getOwnPropertyDescriptor(EpochFence.prototype, 'raise')!;
    // The bump one past the writer's epoch, "so the old writer's is below it": the writer's own epoch is too.
    EpochFence.prototype.raise = function (this: EpochFence, epoch: number) {
      return (raise.value as EpochFence['raise']).call(this, epoch + 1);
    };
    undo.push(() => Object.defineProperty(EpochFence.prototype, 'raise', raise));
  }
  if (mutation === 'stop-time-from-answer') undo.push(stopTimeFromAnswer());
  if (mutation === 'watch-for-resign') undo.push(brokenWatch((watch, waitMs, config) => watch.waitedMs >= config.claimBudget * waitMs));
  if (mutation === 'release-retried') {
    const release = Object.getOwnPropertyDescriptor(Writer.prototype, 'release')!;
    // Refused (no longer ours) is sent again after the longest backoff, for ever. The lease keeps its clock private.
    Writer.prototype.release = async function (this: Writer) {
      const clock = (this.lease as unknown as { deps: { clock: Clock } }).deps.clock;
      while (!(await this.lease.release())) await clock.sleep(DEFAULT_BACKOFF.capMs);
      return true;
    };
    undo.push(() => Object.defineProperty(Writer.prototype, 'release', release));
  }
  if (mutation === 'watchdog-off') {
    const proto = Leadership.prototype as unknown as { armWatchdog: () => void };
    const arm = Object.getOwnPropertyDescriptor(proto, 'armWatchdog')!;
    proto.armWatchdog = () => undefined;
    undo.push(() => Object.defineProperty(proto, 'armWatchdog', arm));
  }
  return {
    locks: (table, items) =>
      mutation !== 'epoch-deleted'
        ? table
        : override(table, {
            removeCandidate: async (rk, ck, seq, on) => {
              const out = await table.removeCandidate(rk, ck, seq, on);
              if (out.ok && (await table.readRole(rk))?.members.length === 0) items().delete(rk);
              return out;
            },
            release: async (key, holding, rvn, wallIso) => {
              const out = await table.release(key, holding, rvn, wallIso);
              if (out.ok) items().delete(key);
              return out;
            },
          }),
    bucket: (store) =>
      mutation !== 'manifest-blind-put'
        ? store
        : override(store, {
            // The commit without If-Match: whatever version is there, overwrite it.
            putIfMatch: async (key, body, type) => ({ ok: true as const, etag: (await store.put(key, body, type)).etag }),
          }),
    ledgers: (store, steps) =>
      mutation === 'append-split' ? splitAppend(store, steps) : mutation === 'fence-gets-version' ? fenceGetsVersion(store) : store,
    restored: (store) => (mutation !== 'restore-no-floor' ? store : override(store, { raiseFloor: async () => ({ ok: true, from: 0 }) })),
    bumps: mutation !== 'restore-no-bump',
    sidecar: mutation === 'sidecar-heartbeat',
    handover: (config) => (mutation !== 'handover-no-margin' ? config : { ...config, waitMarginMs: 0 }),
    manifestOffByOne: mutation === 'manifest-off-by-one',
    politeHandover: mutation === 'handover-polite',
    restore: () => {
      for (const u of undo) u();
    },
  };
}

// ─── The workflow world's own broken variants ───────────────────────────────────────────────────────────────────

/**
 * The workflow world's own (verify/explore/workflow-world.ts applies them to the synthesized definition or to its
 * interpreter); it also takes the night world's above, but the sweeper's order and the claim on the wall clock.
 */
export const WORKFLOW_MUTATIONS = {
  /** Wait states pass on at once, as an interpreter that ignores SecondsPath would: the claim rule's timer is gone. */
  'wait-skipped': 'Wait states do not wait',
  /** The definition's tasks lose TimeoutSeconds: a task whose Lambda never answers waits for ever. */
  'no-task-timeout': 'Task states have no TimeoutSeconds',
} as const;
export type WorkflowMutation = keyof typeof WORKFLOW_MUTATIONS;

/**
 * The resources the holders write to, each with the one check that stops an old holder.
 *
 *   FencedStore  the job row and its invoices in one database: the fence is a number on the job row, and every
 *                write is one atomic conditional write with `fence <= :t` (lib/core/fence.ts FENCE_CLAUSE: reject lower,
 *                accept equal, so the current holder writes many times with its token). A raise sets the fence
 *                and marks the row RUNNING and claimed (in the sparse index) in the same write. Built with
 *                `fenced: false` it is the same store with no check at all: the "without the fence" answer.
 *   Manifest     the S3 form: no "greater than", only If-Match on the ETag last seen; the token rides in
 *                the body. ETags are labelled E0, E1, … in order.
 * Left out: transactions' 100-action limit (a batch is one write), throttling, and the invoices' contents.
 */
import type { Sim } from './engine';

type JobState = 'QUEUED' | 'RUNNING' | 'DONE';

export interface JobRow {
  state: JobState;
  fence?: number;
  ownerToken?: number;
  owner?: string;
  /** Present only while claimed: the attribute that puts the row in the sparse index. */
  claimedSince?: number;
}

/** The fence comparison, once: a token not lower than the highest accepted. Never raised: anything passes. */
export const fenceAccepts = (fence: number | undefined, token: number): boolean => fence === undefined || fence <= token;

export class FencedStore {
  readonly row: JobRow = { state: 'QUEUED' };
  /** Every accepted write of every batch: batch id → the tokens (or writers) that wrote it. */
  readonly written = new Map<string, string[]>();
  refused = 0;
  accepted = 0;
  /** Invoices in every accepted write (a batch written twice counts twice). */
  invoices = 0;

  constructor(
    private readonly sim: Sim,
    readonly fenced = true,
    readonly name = 'store',
  ) {}

  /**
   * RAISE THE FENCE FIRST: SET fence = :t, state = RUNNING, owner_token = :t, claimed_since = now, only if
   * fence <= :t; returns the old row (ALL_OLD) or undefined if refused.
   */
  raise(who: string, token: number): JobRow | undefined {
    const old = { ...this.row };
    if (this.fenced && !fenceAccepts(this.row.fence, token)) return this.refuse(who, token, 'raise');
    Object.assign(this.row, { fence: token, state: 'RUNNING', ownerToken: token, owner: who, claimedSince: this.sim.now });
    this.sim.log(who, 'raises the fence first', { token, fence: token, note: `was ${old.fence ?? 'unset'}; row RUNNING, in the sparse index` });
    this.sim.mark({ lane: this.name, kind: 'fence', from: this.sim.now, label: `fence ${token}` });
    return old;
  }

  /**
   * FENCED WRITE: one conditional write, `fence <= :t`, then the batch. False: refused, nothing written.
   * `token` is undefined for a writer that has none (Redlock hands out no token): only a store without a fence takes it.
   */
  write(who: string, token: number | undefined, batch: string, invoices = 0): boolean {
    if (this.fenced && (token === undefined || !fenceAccepts(this.row.fence, token))) return this.refuse(who, token ?? 0, batch) !== undefined;
    this.written.set(batch, [...(this.written.get(batch) ?? []), `${who}:${token ?? '-'}`]);
    this.accepted++;
    this.invoices += invoices;
    const twice = (this.written.get(batch)?.length ?? 0) > 1;
    this.sim.log(who, `writes ${batch}`, {
      token,
      fence: this.row.fence,
      note: `${invoices ? `${invoices} invoices` : ''}${twice ? ' WRITTEN TWICE' : ''}${this.fenced ? '' : ' (no fence)'}`.trim() || undefined,
    });
    this.sim.mark({ lane: who, kind: 'write', from: this.sim.now, label: batch });
    return true;
  }

  /** SWEEPER RE-QUEUE: state = QUEUED, remove claimed_since, only if RUNNING AND owner_token = :seen AND fence = :seen. */
  requeue(who: string, seenOwner: number, seenFence: number): boolean {
    const r = this.row;
    if (r.state !== 'RUNNING' || r.ownerToken !== seenOwner || r.fence !== seenFence) {
      this.sim.log(who, 're-queue refused: the row changed since it was seen', { fence: r.fence });
      return false;
    }
    r.state = 'QUEUED';
    delete r.claimedSince;
    this.sim.log(who, 're-queues the orphan (conditional write)', {
      fence: r.fence,
      note: `only if RUNNING, owner ${seenOwner}, fence ${seenFence}`,
    });
    return true;
  }

  /** DONE, leaving the sparse index, only if we still own the row. */
  complete(who: string, token: number): boolean {
    if (this.row.ownerToken !== token || this.row.state !== 'RUNNING') return this.refuse(who, token, 'complete') !== undefined;
    this.row.state = 'DONE';
    delete this.row.claimedSince;
    this.sim.log(who, 'sets DONE, leaves the sparse index', { token, fence: this.row.fence });
    return true;
  }

  /** Batches written by more than one writer: with real invoices, customers billed twice. */
  writtenTwice(): string[] {
    return [...this.written].filter(([, w]) => w.length > 1).map(([b]) => b);
  }

  private refuse(who: string, token: number, what: string): undefined {
    this.refused++;
    this.sim.log(who, `${what} REFUSED by the fence`, { token, fence: this.row.fence, note: `${token} < ${this.row.fence}; nothing written` });
    this.sim.mark({ lane: this.name, kind: 'refused', from: this.sim.now, label: `${who} ${token} refused` });
    return undefined;
  }
}

/** The manifest object on S3: compare-and-set on the ETag, the token in the body. */
export class Manifest {
  private version = 0;
  body: { token?: number; chunks: Record<string, number> } = { chunks: {} };

  constructor(private readonly sim: Sim) {}

  get etag(): string {
    return `E${this.version}`;
  }

  /** GET: the body and its ETag (what a writer later names in If-Match). */
  read(): { etag: string; token?: number } {
    return { etag: this.etag, token: this.body.token };
  }

  /** PUT with If-Match: replaces the manifest only if its ETag is still `ifMatch`; else 412 Precondition Failed. */
  putIfMatch(who: string, ifMatch: string, token: number, chunk?: string): string | undefined {
    if (ifMatch !== this.etag) {
      this.sim.log(who, `manifest PUT If-Match "${ifMatch}": 412 Precondition Failed`, { token, note: `current ETag ${this.etag}` });
      this.sim.mark({ lane: 'manifest', kind: 'refused', from: this.sim.now, label: `${who} 412` });
      return undefined;
    }
    this.version++;
    this.body = { token, chunks: chunk === undefined ? this.body.chunks : { ...this.body.chunks, [chunk]: token } };
    this.sim.log(who, chunk === undefined ? 'rewrites the manifest with its token (the raise)' : `commits ${chunk} in the manifest`, {
      token,
      note: `If-Match "${ifMatch}" → ${this.etag}`,
    });
    return this.etag;
  }
}

/**
 * The auditor: reads the stores after the fact and checks the design's invariants 1–4 (docs/DESIGN.md, opening):
 *   1. each record once, as generated, and none missing once the job is DONE;
 *   2. no token above the fence it met: records, chunk fences and done marks, and the S3 manifest;
 *   3. the sparse index holds exactly the RUNNING job rows;
 *   4. the lock's epoch is never behind a token seen anywhere (else a claim would hand a used token out again).
 * It only reads. Unlike the holders and the sweeper it may scan: it runs rarely and must see everything.
 *
 * One function per check, each returning its AuditCheck, for any fenced job (its fence items, its manifest, the
 * sparse index, its lock): readFencedJob (the one read they share), checkChunksDone, checkChunkFences,
 * checkManifest, checkSparseIndex, checkEpoch. A job adds the checks of its own data beside them (each reference
 * app's audit.ts under apps/), built with `verdict` and `scanAll`.
 */
import { claimedRows, jobTableItems, type ChunkFence, type JobRow } from './fence';
import { chunkFenceKey, claimShard, jobNameOf } from './job-keys';
import { readLock, type LockItem } from './lease';
import { chunkObjectKey, readManifest, type ManifestBody, type ManifestPlace } from './manifest';
import { Attr } from './schema';
import type { JobStore } from './store/jobs';
import type { LeaseStore } from './store/lock';
import type { ManifestStore } from './store/manifest';

export { scanAll } from './aws/scan';

/** One invariant checked: what was checked, whether it holds, and the evidence (or the first problems). */
export interface AuditCheck {
  readonly invariant: 1 | 2 | 3 | 4;
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

/**
 * A check's verdict: ok with the evidence, or the first five problems.
 * @param invariant - which of the design's invariants it checks (docs/DESIGN.md, opening)
 * @param name - what was checked, in a few words
 * @param problems - one sentence per problem found; empty when the invariant holds
 * @param okDetail - the evidence shown when it holds
 */
export function verdict(invariant: AuditCheck['invariant'], name: string, problems: readonly string[], okDetail: string): AuditCheck {
  const shown = problems.slice(0, 5).join('; ') + (problems.length > 5 ? `; … ${problems.length - 5} more` : '');
  return { invariant, name, ok: problems.length === 0, detail: problems.length === 0 ? okDetail : shown };
}

// ─── Generic: any fenced job ─────────────────────────────────────────────────────────────────────────────────────

/** Where a fenced job's state lives: its job table (job row, chunk fence items) and lock table, its manifest bucket. */
export interface FencedJobDeps {
  /** The job table's store: job rows, chunk fence items, the sparse index. */
  readonly jobs: JobStore;
  /** The lock table's store. */
  readonly locks: LeaseStore;
  /** The manifest bucket's store. */
  readonly manifests: ManifestStore;
}

/** Which job: its job row's key, its lock item's key, and where its manifest and chunk objects live. */
export interface FencedJobRef {
  readonly jobId: string;
  readonly lockKey: string;
  readonly manifest: ManifestPlace;
}

/** What the generic checks read, once, strongly consistent where the store allows. */
export interface FencedJobState {
  readonly ref: FencedJobRef;
  /** The job row; undefined: never raised. */
  readonly job: JobRow | undefined;
  readonly lock: LockItem | undefined;
  readonly manifest: ManifestBody | undefined;
  /** This job's chunk fence items, by chunk. */
  readonly chunkFences: ReadonlyMap<number, ChunkFence>;
  /** Every job row of the job table (chunk fence items left out): invariant 3 is table-wide. */
  readonly jobRows: readonly JobRow[];
}

/** Read a fenced job's state for the generic checks: its rows, its lock, its manifest, and the job table once. */
export async function readFencedJob(deps: FencedJobDeps, ref: FencedJobRef): Promise<FencedJobState> {
  const store = deps.jobs;
  const job = await store.readJob(ref.jobId);
  const lock = await readLock(deps, ref.lockKey);
  const manifest = (await readManifest(deps, ref.manifest.key))?.body;
  const jobRows: JobRow[] = [];
  const chunkFences = new Map<number, ChunkFence>();
  for await (const row of jobTableItems(store)) {
    const chunk = row[Attr.chunk];
    if (chunk === undefined) jobRows.push(row as unknown as JobRow);
    else if (row[Attr.pk] === chunkFenceKey(ref.jobId, Number(chunk))) chunkFences.set(Number(chunk), row as unknown as ChunkFence);
  }
  return { ref, job, lock, manifest, chunkFences, jobRows };
}

/**
 * Invariant 1, generic part: once the job row says DONE, every one of its `chunk_count` chunk fence items says done.
 * Why: completion is conditional on every chunk recorded done on its own fence item (docs/DESIGN.md § Chunk fences);
 * a DONE row with a chunk not done means a run was closed with work missing.
 */
export function checkChunksDone(s: FencedJobState): AuditCheck {
  const done = s.job?.state === 'DONE';
  const count = s.job?.chunk_count ?? 0;
  const notDone = done ? Array.from({ length: count }, (_, c) => c).filter((c) => s.chunkFences.get(c)?.done_by === undefined) : [];
  return verdict(
    1,
    'every chunk fence item says done once DONE',
    notDone.map((c) => `chunk ${c}'s fence item does not say done although the job is DONE`),
    done ? `all ${count} chunk fence items say done` : `job is ${s.job?.state ?? 'absent'}: not required yet`,
  );
}

/**
 * Invariant 2 on the chunk fences: no chunk fence above the job fence, and no done mark above its chunk's fence.
 * Why: a holder raises the job row first and then every chunk fence to the same token, so a chunk fence above the
 * job row's means a raise skipped the job row; a done mark is written only while the chunk's fence still equals the
 * marker's token, so one above it means a fenced-out holder's write landed.
 */
export function checkChunkFences(s: FencedJobState): AuditCheck {
  const fence = s.job?.fence;
  const problems: string[] = [];
  for (const [c, item] of [...s.chunkFences].sort(([a], [b]) => a - b)) {
    if (fence === undefined || item.fence > fence) problems.push(`chunk ${c}'s fence ${item.fence} is above the job fence ${fence}`);
    if (item.done_by !== undefined && item.done_by > item.fence)
      problems.push(`chunk ${c} recorded done by token ${item.done_by}, above its fence ${item.fence}`);
  }
  const fences = [...s.chunkFences.values()].map((i) => i.fence);
  return verdict(
    2,
    'no chunk fence above the job fence',
    problems,
    `${s.chunkFences.size} chunk fences ${JSON.stringify(fences)} ≤ fence ${fence ?? '-'}`,
  );
}

/**
 * Invariant 2 on S3: the manifest's token is at most the job fence, it names only objects that exist unchanged
 * under their writer's token key, none written by a token above its own; once the job is DONE it says DONE and names
 * every chunk. Why: the manifest is S3's copy of the fence (docs/DESIGN.md, "Where each rule lives"); a reader trusts
 * only what it names, so a name a fenced-out holder committed, or a missing object, would be read as the run's data.
 */
export async function checkManifest(deps: Pick<FencedJobDeps, 'manifests'>, s: FencedJobState): Promise<AuditCheck> {
  const store = deps.manifests;
  const fence = s.job?.fence;
  const done = s.job?.state === 'DONE';
  const m = s.manifest;
  const problems: string[] = [];
  if (m) {
    if (fence === undefined || m.token > fence) problems.push(`manifest token ${m.token} above the job fence ${fence}`);
    for (const [name, entry] of Object.entries(m.chunks)) {
      if (entry.token > m.token) problems.push(`chunk ${name} written with token ${entry.token} above the manifest's ${m.token}`);
      if (entry.key !== chunkObjectKey(s.ref.manifest.chunkPrefix, Number(name), entry.token))
        problems.push(`chunk ${name} names ${entry.key}, not its token's key`);
      const head = await store.head(entry.key).catch(() => undefined); // unreadable counts as missing, as before
      if (!head) problems.push(`chunk ${name}: object ${entry.key} named by the manifest does not exist`);
      else if (head.etag !== entry.etag) problems.push(`chunk ${name}: object ${entry.key} changed since it was committed`);
    }
    if (done && m.state !== 'DONE') problems.push(`job is DONE but the manifest says ${m.state}`);
    const count = s.job?.chunk_count;
    if (done && count !== undefined && Object.keys(m.chunks).length !== count)
      problems.push(`job is DONE but the manifest names ${Object.keys(m.chunks).length} of ${count} chunks`);
  } else if (done) {
    problems.push('job is DONE but there is no manifest');
  }
  return verdict(
    2,
    'manifest names only committed objects of its token or earlier',
    problems,
    m ? `manifest token ${m.token}, ${Object.keys(m.chunks).length} chunks, all present` : 'no manifest yet',
  );
}

/**
 * Invariant 3, over the whole job table: the sparse index holds exactly the RUNNING job rows, each in its own job's
 * shard, and never a chunk fence item. Why: each job's sweeper reads only its shard of the index (docs/DESIGN.md
 * "The sweeper"); a RUNNING row missing from it is an orphan nobody would ever re-queue, and a finished row left in it
 * would be re-queued and re-run. Every job's shard the table's rows name is read.
 */
export async function checkSparseIndex(deps: Pick<FencedJobDeps, 'jobs'>, s: FencedJobState): Promise<AuditCheck> {
  const problems: string[] = [];
  const indexed = new Set<string>();
  const requeued: string[] = [];
  const shards = new Set([s.ref.jobId, ...s.jobRows.map((r) => r.pk)].map((pk) => claimShard(jobNameOf(pk))));
  for (const shard of shards)
    for await (const row of claimedRows(deps.jobs, shard)) {
      indexed.add(String(row[Attr.pk]));
      const pk = String(row[Attr.pk]);
      // Re-queued runs, named for a person: one the sweeper gave up on (its bound reached) waits here for them.
      if (Number(row[Attr.requeues] ?? 0) > 0) requeued.push(`${pk} (${Number(row[Attr.requeues])} times)`);
      if (row[Attr.chunk] !== undefined) problems.push(`${pk} is a chunk fence item in the sparse index`);
      else if (row[Attr.state] !== 'RUNNING') problems.push(`${pk} is in the sparse index but ${row[Attr.state]}`);
      // Under another job's shard, its own job's sweeper would never find it.
      if (shard !== claimShard(jobNameOf(pk))) problems.push(`${pk} is indexed under shard ${shard}, not its job's ${claimShard(jobNameOf(pk))}`);
    }
  for (const row of s.jobRows) {
    if (row.state === 'RUNNING' && !indexed.has(row.pk)) problems.push(`${row.pk} is RUNNING but not in the sparse index`);
  }
  return verdict(
    3,
    'sparse index holds exactly the RUNNING rows',
    problems,
    `${indexed.size} of ${s.jobRows.length} job rows indexed, all RUNNING; no chunk fence item${requeued.length ? `; re-queued: ${requeued.join(', ')}` : ''}`,
  );
}

/**
 * Invariant 4: the lock item exists and its epoch is at least every token seen: the job fence, the manifest's token,
 * every chunk fence, and `tokensElsewhere`, the tokens the job's own data carries (the caller's). Why: the next claim
 * hands out epoch + 1; an epoch behind a used token (a deleted lock item, a restore without the bump: docs/DESIGN.md
 * "The restore bump") would hand that token out again, and the fences would let its holder write.
 */
export function checkEpoch(s: FencedJobState, tokensElsewhere: Iterable<number> = []): AuditCheck {
  const epoch = s.lock?.epoch;
  let highest = Math.max(0, s.job?.fence ?? 0, s.manifest?.token ?? 0);
  for (const t of [...s.chunkFences.values()].map((i) => i.fence)) highest = Math.max(highest, t);
  for (const t of tokensElsewhere) highest = Math.max(highest, t); // a loop: a run's tokens may be too many to spread
  const problems: string[] = [];
  if (highest > 0 && epoch === undefined) problems.push(`tokens up to ${highest} were used but the lock item has no epoch (deleted?)`);
  else if (epoch !== undefined && epoch < highest)
    problems.push(`lock epoch ${epoch} is behind token ${highest}: the next claim would repeat a token`);
  return verdict(4, 'lock epoch ≥ every token seen', problems, `epoch ${epoch ?? '-'} ≥ highest token ${highest}`);
}

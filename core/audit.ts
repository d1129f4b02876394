/**
 * The auditor: reads the stores after the fact and checks the design's invariants 1–4 (design §7). It only reads.
 * Unlike the holders and the sweeper, it may scan: it runs rarely and must see everything.
 *
 *   1. each invoice once, with the data the generator gives it; none missing once the job is DONE, and every chunk
 *      fence item then says done;
 *   2. no token above the fence it met: invoice tokens ≤ job fence; chunk fences ≤ job fence (the job row is raised
 *      first) and each done mark ≤ its chunk's fence; the manifest names only existing objects written under its
 *      own token or an earlier one, and its token is ≤ the job fence;
 *   3. sparse index ⇔ RUNNING: every row in the index is a RUNNING job row (never a chunk fence item), every
 *      RUNNING row is in the index;
 *   4. epochs never behind: the lock item exists and its epoch ≥ every token seen anywhere.
 */
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { QueryCommand, ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { readJob, type ChunkFence } from './fence';
import { idWidth, invoiceAt } from './invoices';
import { observe } from './lease';
import { readManifest } from './manifest';
import { Attr, CLAIM_SHARD, JOB_TABLE, Keys, type TableNames } from './schema';

export interface AuditDeps {
  readonly ddb: DynamoDBDocumentClient;
  readonly s3: S3Client;
  readonly tables: TableNames;
  readonly bucket: string;
}

export interface AuditCheck {
  readonly invariant: 1 | 2 | 3 | 4;
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface AuditReport {
  readonly ok: boolean;
  readonly jobId: string;
  readonly state: string | undefined;
  readonly fence: number | undefined;
  readonly epoch: number | undefined;
  readonly invoicesFound: number;
  readonly invoicesExpected: number;
  readonly tokensSeen: Record<string, number>;
  readonly checks: readonly AuditCheck[];
}

async function* scanAll(ddb: DynamoDBDocumentClient, input: ConstructorParameters<typeof ScanCommand>[0]) {
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ddb.send(new ScanCommand({ ...input, ExclusiveStartKey: start, ConsistentRead: true }));
    yield* out.Items ?? [];
    start = out.LastEvaluatedKey;
  } while (start);
}

export async function audit(deps: AuditDeps, date: string, invoices: number): Promise<AuditReport> {
  const checks: AuditCheck[] = [];
  const check = (invariant: AuditCheck['invariant'], name: string, problems: string[], okDetail: string) =>
    checks.push({
      invariant,
      name,
      ok: problems.length === 0,
      detail: problems.length === 0 ? okDetail : problems.slice(0, 5).join('; ') + (problems.length > 5 ? `; … ${problems.length - 5} more` : ''),
    });

  const jobId = Keys.job(date);
  const job = await readJob({ ddb: deps.ddb, jobs: deps.tables.jobs }, jobId);
  const lock = await observe({ ddb: deps.ddb, table: deps.tables.locks }, Keys.lock(date));
  const manifest = await readManifest(deps, date);
  const fence = job?.fence;
  const done = job?.state === 'DONE';
  // The job table, once: job rows (invariant 3, table-wide) and this night's chunk fence items (the ones with `chunk`).
  const jobRows: Record<string, unknown>[] = [];
  const chunkFences = new Map<number, ChunkFence>();
  for await (const row of scanAll(deps.ddb, { TableName: deps.tables.jobs })) {
    if (row[Attr.chunk] === undefined) jobRows.push(row);
    else if (row[Attr.pk] === Keys.chunkFence(jobId, Number(row[Attr.chunk]))) chunkFences.set(Number(row[Attr.chunk]), row as unknown as ChunkFence);
  }

  // 1. each invoice once, as generated; none missing when DONE
  const width = idWidth(invoices);
  const prefix = Keys.invoicePrefix(date);
  const seen = new Uint8Array(invoices);
  const tokensSeen: Record<string, number> = {};
  const wrong: string[] = [];
  const aboveFence: string[] = [];
  let found = 0;
  for await (const item of scanAll(deps.ddb, {
    TableName: deps.tables.invoices,
    FilterExpression: 'begins_with(pk, :p)',
    ExpressionAttributeValues: { ':p': prefix },
  })) {
    found++;
    const pk = String(item[Attr.pk]);
    const index = Number(pk.slice(prefix.length));
    const token = Number(item[Attr.token]);
    tokensSeen[token] = (tokensSeen[token] ?? 0) + 1;
    if (!Number.isInteger(index) || index < 0 || index >= invoices) {
      wrong.push(`${pk} is not one of the night's ${invoices} invoices`);
      continue;
    }
    if (seen[index]++) wrong.push(`${pk} recorded twice`);
    const expected = invoiceAt(date, index, width);
    if (expected.pk !== pk || item[Attr.amount] !== expected.amount || item[Attr.customer] !== expected.customer)
      wrong.push(`${pk} differs from the generated invoice`);
    if (fence === undefined || token > fence) aboveFence.push(`${pk} carries token ${token} above the fence ${fence}`);
  }
  const missing = done ? seen.reduce((n, v) => n + (v === 0 ? 1 : 0), 0) : 0;
  check(1, 'each invoice recorded once, as generated', wrong, `${found} invoices, each once, each as generated`);
  const chunksNotDone = done
    ? Array.from({ length: job?.chunk_count ?? 0 }, (_, c) => c).filter((c) => chunkFences.get(c)?.done_by === undefined)
    : [];
  const missingProblems = [
    ...(missing ? [`${missing} of ${invoices} invoices missing although the job is DONE`] : []),
    ...chunksNotDone.map((c) => `chunk ${c}'s fence item does not say done although the job is DONE`),
  ];
  check(
    1,
    'none missing once DONE',
    missingProblems,
    done ? `all ${invoices} present, all ${job?.chunk_count ?? 0} chunk fence items say done` : `job is ${job?.state ?? 'absent'}: not required yet`,
  );

  // 2. tokens vs fences, DynamoDB and S3
  const s3Problems: string[] = [];
  if (manifest) {
    const m = manifest.body;
    if (fence === undefined || m.token > fence) s3Problems.push(`manifest token ${m.token} above the job fence ${fence}`);
    for (const [name, entry] of Object.entries(m.chunks)) {
      if (entry.token > m.token) s3Problems.push(`chunk ${name} written with token ${entry.token} above the manifest's ${m.token}`);
      if (entry.key !== Keys.chunkObject(date, Number(name), entry.token)) s3Problems.push(`chunk ${name} names ${entry.key}, not its token's key`);
      try {
        const head = await deps.s3.send(new HeadObjectCommand({ Bucket: deps.bucket, Key: entry.key }));
        if (head.ETag !== entry.etag) s3Problems.push(`chunk ${name}: object ${entry.key} changed since it was committed`);
      } catch {
        s3Problems.push(`chunk ${name}: object ${entry.key} named by the manifest does not exist`);
      }
    }
    if (done && m.state !== 'DONE') s3Problems.push(`job is DONE but the manifest says ${m.state}`);
    if (done && job?.chunk_count !== undefined && Object.keys(m.chunks).length !== job.chunk_count) {
      s3Problems.push(`job is DONE but the manifest names ${Object.keys(m.chunks).length} of ${job.chunk_count} chunks`);
    }
  } else if (done) {
    s3Problems.push('job is DONE but there is no manifest');
  }
  for (const [c, item] of [...chunkFences].sort(([a], [b]) => a - b)) {
    if (fence === undefined || item.fence > fence) aboveFence.push(`chunk ${c}'s fence ${item.fence} is above the job fence ${fence}`);
    if (item.done_by !== undefined && item.done_by > item.fence)
      aboveFence.push(`chunk ${c} recorded done by token ${item.done_by}, above its fence ${item.fence}`);
  }
  check(
    2,
    'no invoice token or chunk fence above the job fence',
    aboveFence,
    `invoice tokens ${JSON.stringify(tokensSeen)} and ${chunkFences.size} chunk fences ${JSON.stringify([...chunkFences.values()].map((i) => i.fence))} ≤ fence ${fence ?? '-'}`,
  );
  check(
    2,
    'manifest names only committed objects of its token or earlier',
    s3Problems,
    manifest ? `manifest token ${manifest.body.token}, ${Object.keys(manifest.body.chunks).length} chunks, all present` : 'no manifest yet',
  );

  // 3. sparse index ⇔ RUNNING (over the whole job table: the invariant is table-wide)
  const indexProblems: string[] = [];
  const indexed = new Set<string>();
  let start: Record<string, unknown> | undefined;
  do {
    const out = await deps.ddb.send(
      new QueryCommand({
        TableName: deps.tables.jobs,
        IndexName: JOB_TABLE.sparseIndex!.name,
        KeyConditionExpression: `${Attr.claimShard} = :s`,
        ExpressionAttributeValues: { ':s': CLAIM_SHARD },
        ExclusiveStartKey: start,
      }),
    );
    for (const row of out.Items ?? []) {
      indexed.add(String(row[Attr.pk]));
      if (row[Attr.chunk] !== undefined) indexProblems.push(`${row[Attr.pk]} is a chunk fence item in the sparse index`);
      else if (row[Attr.state] !== 'RUNNING') indexProblems.push(`${row[Attr.pk]} is in the sparse index but ${row[Attr.state]}`);
    }
    start = out.LastEvaluatedKey;
  } while (start);
  for (const row of jobRows) {
    if (row[Attr.state] === 'RUNNING' && !indexed.has(String(row[Attr.pk])))
      indexProblems.push(`${row[Attr.pk]} is RUNNING but not in the sparse index`);
  }
  check(
    3,
    'sparse index holds exactly the RUNNING rows',
    indexProblems,
    `${indexed.size} of ${jobRows.length} job rows indexed, all RUNNING; no chunk fence item`,
  );

  // 4. epochs never behind any token
  const epoch = lock?.epoch;
  const maxToken = Math.max(
    0,
    fence ?? 0,
    manifest?.body.token ?? 0,
    ...Object.keys(tokensSeen).map(Number),
    ...[...chunkFences.values()].map((i) => i.fence),
  );
  const epochProblems: string[] = [];
  if (maxToken > 0 && epoch === undefined) epochProblems.push(`tokens up to ${maxToken} were used but the lock item has no epoch (deleted?)`);
  else if (epoch !== undefined && epoch < maxToken)
    epochProblems.push(`lock epoch ${epoch} is behind token ${maxToken}: the next claim would repeat a token`);
  check(4, 'lock epoch ≥ every token seen', epochProblems, `epoch ${epoch ?? '-'} ≥ highest token ${maxToken}`);

  return {
    ok: checks.every((c) => c.ok),
    jobId,
    state: job?.state,
    fence,
    epoch,
    invoicesFound: found,
    invoicesExpected: invoices,
    tokensSeen,
    checks,
  };
}

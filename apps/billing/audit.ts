/**
 * The billing night's audit: core's generic checks of a fenced job (its fence items, its manifest, the sparse
 * index, its lock: lib/core/audit.ts) and billing's own, on the night's invoices:
 *   1. each invoice recorded once, as generated, and none missing once the job is DONE;
 *   2. no invoice token above the fence it met.
 * It only reads; it may scan (it runs rarely and must see everything).
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  awsStores,
  Attr,
  checkChunkFences,
  checkChunksDone,
  checkEpoch,
  checkManifest,
  checkSparseIndex,
  readFencedJob,
  scanAll,
  verdict,
  type AuditCheck,
  type Clients,
  type FencedJobDeps,
  type FencedJobState,
} from '../../lib/core/internal';
import { InvoiceAttr, type BillingTables } from './schema';
import { idWidth, invoiceAt } from './invoices';
import { Keys } from './keys';

/** One invoice item found for the night. */
interface FoundInvoice {
  readonly pk: string;
  /** The writer's token, recorded on every invoice for the audit. */
  readonly token: number;
  /** Its index in the night, or undefined when its key is not one of the night's invoices. */
  readonly index: number | undefined;
  /** Whether its customer and amount are exactly what the generator gives its index. */
  readonly asGenerated: boolean;
}

/** Every invoice item of one night, read once for the billing checks. */
interface InvoiceScan {
  readonly date: string;
  /** How many invoices the night has. */
  readonly invoices: number;
  readonly found: readonly FoundInvoice[];
}

/** Scan the invoice table for one night's invoices (by key prefix). */
async function scanInvoices(
  deps: { readonly ddb: DynamoDBDocumentClient; readonly invoices: string },
  date: string,
  invoices: number,
): Promise<InvoiceScan> {
  const width = idWidth(invoices);
  const prefix = Keys.invoicePrefix(date);
  const found: FoundInvoice[] = [];
  const items = scanAll(deps.ddb, { TableName: deps.invoices, FilterExpression: 'begins_with(pk, :p)', ExpressionAttributeValues: { ':p': prefix } });
  for await (const item of items) {
    const pk = String(item[Attr.pk]);
    const n = Number(pk.slice(prefix.length));
    const index = Number.isInteger(n) && n >= 0 && n < invoices ? n : undefined;
    const expected = index === undefined ? undefined : invoiceAt(date, index, width);
    const asGenerated =
      expected !== undefined &&
      expected.pk === pk &&
      item[InvoiceAttr.amount] === expected.amount &&
      item[InvoiceAttr.customer] === expected.customer;
    found.push({ pk, token: Number(item[InvoiceAttr.token]), index, asGenerated });
  }
  return { date, invoices, found };
}

/** How many invoices carry each token (for the report: who wrote the night). */
function tokensOf(scan: InvoiceScan): Record<string, number> {
  const tokens: Record<string, number> = {};
  for (const i of scan.found) tokens[i.token] = (tokens[i.token] ?? 0) + 1;
  return tokens;
}

/**
 * Invariant 1: each invoice is recorded once, with exactly the data the generator gives it, and nothing else is
 * recorded under the night's prefix. Why: exactly-once in effect is the night's promise; a put is conditional
 * on the key being absent, so a second copy or different data means a write bypassed the fenced transaction.
 */
function checkInvoicesOnce(scan: InvoiceScan): AuditCheck {
  const seen = new Uint8Array(scan.invoices);
  const problems: string[] = [];
  for (const i of scan.found) {
    if (i.index === undefined) {
      problems.push(`${i.pk} is not one of the night's ${scan.invoices} invoices`);
      continue;
    }
    if (seen[i.index]++) problems.push(`${i.pk} recorded twice`);
    if (!i.asGenerated) problems.push(`${i.pk} differs from the generated invoice`);
  }
  return verdict(1, 'each invoice recorded once, as generated', problems, `${scan.found.length} invoices, each once, each as generated`);
}

/**
 * Invariant 1: once the job row says DONE, every invoice of the night is present. Why: DONE is final (a DONE row
 * refuses every raise), so an invoice missing then is never written by anyone.
 */
function checkNoneMissing(scan: InvoiceScan, s: Pick<FencedJobState, 'job'>): AuditCheck {
  const done = s.job?.state === 'DONE';
  const present = new Set(scan.found.flatMap((i) => (i.index === undefined ? [] : [i.index]))).size;
  const missing = done ? scan.invoices - present : 0;
  return verdict(
    1,
    'no invoice missing once DONE',
    missing ? [`${missing} of ${scan.invoices} invoices missing although the job is DONE`] : [],
    done ? `all ${scan.invoices} present` : `job is ${s.job?.state ?? 'absent'}: not required yet`,
  );
}

/**
 * Invariant 2 on the invoices: no invoice carries a token above the job fence. Why: every invoice put travels in a
 * transaction with a ConditionCheck that its chunk's fence is not above the writer's token, and chunk fences are
 * never above the job fence; a higher token on an invoice means a write landed without the fence.
 */
function checkInvoiceTokens(scan: InvoiceScan, s: Pick<FencedJobState, 'job'>): AuditCheck {
  const fence = s.job?.fence;
  const above = scan.found
    .filter((i) => fence === undefined || i.token > fence)
    .map((i) => `${i.pk} carries token ${i.token} above the fence ${fence}`);
  return verdict(2, 'no invoice token above the job fence', above, `invoice tokens ${JSON.stringify(tokensOf(scan))} ≤ fence ${fence ?? '-'}`);
}

// ─── The billing night's audit ───────────────────────────────────────────────────────────────────────────────────

/** What the audit reads: the night's stores, and the invoice table with its client (billing's own table has no store). */
export interface AuditDeps extends FencedJobDeps {
  readonly invoices: { readonly ddb: DynamoDBDocumentClient; readonly invoices: string };
}

/** The audit's deps on DynamoDB and S3: the stores built from the clients and the tables' and bucket's names. */
export function auditDeps(clients: Pick<Clients, 'ddb' | 's3'>, tables: BillingTables, bucket: string): AuditDeps {
  return { ...awsStores(clients, { locks: tables.locks, jobs: tables.jobs, bucket }), invoices: { ddb: clients.ddb, invoices: tables.invoices } };
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

/** Audit one billing night: every check above, generic and billing's, in invariant order. */
export async function audit(deps: AuditDeps, date: string, invoices: number): Promise<AuditReport> {
  const s = await readFencedJob(deps, { jobId: Keys.job(date), lockKey: Keys.lock(date), manifest: Keys.manifestPlace(date) });
  const scan = await scanInvoices(deps.invoices, date, invoices);
  const checks = [
    checkInvoicesOnce(scan),
    checkNoneMissing(scan, s),
    checkChunksDone(s),
    checkInvoiceTokens(scan, s),
    checkChunkFences(s),
    await checkManifest(deps, s),
    await checkSparseIndex(deps, s),
    checkEpoch(s, Object.keys(tokensOf(scan)).map(Number)),
  ];
  return {
    ok: checks.every((c) => c.ok),
    jobId: s.ref.jobId,
    state: s.job?.state,
    fence: s.job?.fence,
    epoch: s.lock?.epoch,
    invoicesFound: scan.found.length,
    invoicesExpected: invoices,
    tokensSeen: tokensOf(scan),
    checks,
  };
}

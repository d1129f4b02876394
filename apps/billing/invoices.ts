/**
 * The night's invoices: a deterministic generator (same date → same ids, customers and amounts, on every machine,
 * so a holder that redoes a chunk writes exactly what an earlier holder wrote) and the chunking arithmetic
 * (5,000 ÷ 99 = 50.5 → 51 transactions per chunk; 10 × 51 = 510 a night).
 *
 * Invoices are produced one chunk at a time and one batch at a time, so memory stays flat however big the night.
 */
import { Attr, type FencedPut } from '../../lib/core/internal';
import { InvoiceAttr } from './schema';
import { Keys } from './keys';

export interface Invoice {
  readonly pk: string;
  readonly index: number;
  readonly customer: string;
  /** Amount in cents. */
  readonly amount: number;
}

export interface NightPlan {
  readonly date: string;
  readonly invoices: number;
  readonly chunkSize: number;
  readonly putsPerTransaction: number;
}

export function chunkCount(plan: Pick<NightPlan, 'invoices' | 'chunkSize'>): number {
  return Math.ceil(plan.invoices / plan.chunkSize);
}

/** [first, end) invoice indexes of a chunk. */
export function chunkRange(plan: NightPlan, chunk: number): { first: number; end: number } {
  const first = chunk * plan.chunkSize;
  return { first, end: Math.min(plan.invoices, first + plan.chunkSize) };
}

export function transactionsPerChunk(plan: NightPlan, chunk: number): number {
  const { first, end } = chunkRange(plan, chunk);
  return Math.ceil((end - first) / plan.putsPerTransaction);
}

export function transactionsPerNight(plan: NightPlan): number {
  let total = 0;
  for (let c = 0; c < chunkCount(plan); c++) total += transactionsPerChunk(plan, c);
  return total;
}

/** Width of the zero-padded index in an invoice id: 5 digits for 50,000, more for bigger nights. */
export function idWidth(invoices: number): number {
  return Math.max(5, String(invoices - 1).length);
}

/** FNV-1a, 32-bit: a stable hash so amounts don't depend on Math.random or the platform. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function invoiceAt(date: string, index: number, width: number): Invoice {
  const h = fnv1a(`${date}#${index}`);
  return {
    pk: Keys.invoice(date, index, width),
    index,
    customer: `cust#${String(h % 20_000).padStart(5, '0')}`,
    amount: 100 + (h % 99_900), // 1.00 .. 999.99
  };
}

/** The batches (≤ putsPerTransaction invoices each) of one chunk, generated lazily. */
export function* chunkBatches(plan: NightPlan, chunk: number): Generator<Invoice[]> {
  const { first, end } = chunkRange(plan, chunk);
  const width = idWidth(plan.invoices);
  for (let start = first; start < end; start += plan.putsPerTransaction) {
    const stop = Math.min(end, start + plan.putsPerTransaction);
    const batch: Invoice[] = new Array(stop - start);
    for (let i = start; i < stop; i++) batch[i - start] = invoiceAt(plan.date, i, width);
    yield batch;
  }
}

/** The chunk object's body: one JSON line per invoice, rendered from the same generator (streams, no buffering of a night). */
export function* renderChunkLines(plan: NightPlan, chunk: number, token: number): Generator<string> {
  for (const batch of chunkBatches(plan, chunk)) {
    for (const inv of batch) yield JSON.stringify({ id: inv.pk, customer: inv.customer, amount: inv.amount, token }) + '\n';
  }
}

/** An invoice as a fenced put: its item in AttributeValue form (built directly: the night's hot path), with the writer's token for audit. */
export function invoicePut(table: string, inv: Invoice, token: number): FencedPut {
  return {
    table,
    item: {
      [Attr.pk]: { S: inv.pk },
      [InvoiceAttr.customer]: { S: inv.customer },
      [InvoiceAttr.amount]: { N: String(inv.amount) },
      [InvoiceAttr.token]: { N: String(token) },
    },
  };
}

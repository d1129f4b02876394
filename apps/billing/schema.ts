/**
 * What the billing app adds to the library's stores, its environment and its metrics: the invoice table, the invoice
 * item's attributes, the chunk function's variables and the invoice counts it publishes. The library knows none of it.
 */
import { Attr, DEFAULT_TABLE_PREFIX, JOB_TABLE, LOCK_TABLE, tableNames, type TableDescription, type TableNames } from '../../lib/core/internal';

/** An invoice item's attributes beside its key: the writer's token (audit), the customer and the amount. */
export const InvoiceAttr = { token: Attr.token, customer: 'customer', amount: 'amount' } as const;

/** One item per invoice, put only if absent, carrying the writer's token for audit. */
export const INVOICE_TABLE: TableDescription = {
  suffix: 'invoices',
  partitionKey: { name: Attr.pk, type: 'S' },
  purpose: 'one item per invoice, recorded once (attribute_not_exists(pk)), with the writer token for audit.',
};

/** The billing deployment's tables: the library's two and the invoices, what the local stack creates for it. */
export const BILLING_TABLES = [LOCK_TABLE, JOB_TABLE, INVOICE_TABLE] as const;

/** The names of the billing deployment's three tables. */
export type BillingTables = TableNames & {
  /** The invoices. */
  readonly invoices: string;
};

/** The table names for a prefix: the library's `<prefix>locks`, `<prefix>jobs`, and `<prefix>invoices`. */
export function billingTables(prefix: string = DEFAULT_TABLE_PREFIX): BillingTables {
  return { ...tableNames(prefix), invoices: prefix + INVOICE_TABLE.suffix };
}

/** The billing chunk function's own variables, beside FencedJob's (apps/billing/stack.ts sets them). */
export const BillingEnv = {
  invoiceTable: 'FENCEPOST_INVOICE_TABLE',
  invoices: 'FENCEPOST_INVOICES',
  chunkSize: 'FENCEPOST_CHUNK_SIZE',
} as const;

/** The billing chunk function's metrics, beside the library's (core Metric). */
export const BillingMetric = {
  /** Invoices a billing chunk recorded. */
  invoicesRecorded: 'InvoicesRecorded',
  /** Invoices a billing chunk found already recorded by an earlier holder. */
  invoicesAlreadyRecorded: 'InvoicesAlreadyRecorded',
} as const;

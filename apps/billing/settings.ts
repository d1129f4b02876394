/**
 * The billing job's settings: the lease's, and the size of the night, validated once, collecting every problem
 * into one ConfigError before anything is written. No CDK here: the chunk function's bundle imports it.
 */
import { ConfigError, LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION, leaseProblems, type LeaseConfig } from '../../lib/core/internal';

/** The billing job's settings: the lease's, and the size of the night. */
export interface BillingConfig extends LeaseConfig {
  /** Invoices in the night. @default 50000 (the billing night the design is sized for) */
  readonly invoices: number;
  /** Invoices per chunk. @default 5000 (10 chunks of 5,000) */
  readonly chunkSize: number;
  /** Puts per transaction, next to the one ConditionCheck on the fence. @default 99 (a DynamoDB transaction holds 100 actions at most) */
  readonly putsPerTransaction: number;
}

/** The billing job's defaults: the lease's, and a night of 50,000 invoices in 10 chunks. */
export const DEFAULTS: BillingConfig = {
  ...LEASE_DEFAULTS,
  invoices: 50_000,
  chunkSize: 5_000,
  putsPerTransaction: 99,
};

function positiveInteger(problems: string[], name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) problems.push(`${name} must be a positive integer, got ${value}`);
}

/** The billing job's settings, defaults filled in, checked once. @throws ConfigError listing every problem at once */
export function validateBillingConfig(input: Partial<BillingConfig>): BillingConfig {
  const given = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as Partial<BillingConfig>;
  const c: BillingConfig = { ...DEFAULTS, ...given };
  const problems = leaseProblems(c);
  positiveInteger(problems, 'invoices', c.invoices);
  positiveInteger(problems, 'chunkSize', c.chunkSize);
  positiveInteger(problems, 'putsPerTransaction', c.putsPerTransaction);
  if (c.putsPerTransaction > MAX_PUTS_PER_TRANSACTION) {
    problems.push(
      `putsPerTransaction (${c.putsPerTransaction}) must be at most ${MAX_PUTS_PER_TRANSACTION}: a transaction holds 100 actions and one is the fence check`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return c;
}

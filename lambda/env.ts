/** Environment variable names, in a module with no side effects (the stack and the local runner import it). */
/** The environment a billing function is deployed with (lib/billing-workflow.ts sets exactly these). */
export const Env = {
  handler: 'FENCEPOST_HANDLER',
  lockTable: 'FENCEPOST_LOCK_TABLE',
  jobTable: 'FENCEPOST_JOB_TABLE',
  invoiceTable: 'FENCEPOST_INVOICE_TABLE',
  bucket: 'FENCEPOST_BUCKET',
  leaseMs: 'FENCEPOST_LEASE_MS',
  renewMs: 'FENCEPOST_RENEW_MS',
  marginMs: 'FENCEPOST_MARGIN_MS',
  invoices: 'FENCEPOST_INVOICES',
  chunkSize: 'FENCEPOST_CHUNK_SIZE',
  claimBudget: 'FENCEPOST_CLAIM_BUDGET',
  scheduleTimeZone: 'FENCEPOST_SCHEDULE_TIME_ZONE',
  /** The sweeper's functions: its storm rule, and the billing state machine it starts runs of. */
  stormShare: 'FENCEPOST_STORM_SHARE',
  stormMinimum: 'FENCEPOST_STORM_MINIMUM',
  maxRequeues: 'FENCEPOST_MAX_REQUEUES',
  billingStateMachineArn: 'FENCEPOST_BILLING_STATE_MACHINE_ARN',
  /** Local runs only: the name events carry (the execution's name). */
  worker: 'FENCEPOST_WORKER',
} as const;

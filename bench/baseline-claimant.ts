/**
 * BASELINE (bench only, not the library): the clock-free claim as it was before the polling rule, kept so that
 * bench/takeover.ts measures before and after side by side in one run. It observes ONCE, sleeps a full lease on its
 * monotonic clock, and claims if the rvn is unchanged; a changed rvn means observe again and wait another full lease.
 * Safe, but when the holder dies during a wait the claimant only notices at the end of it and then waits a whole
 * new lease: up to two leases after the last renewal. lib/core/lease.ts nextClaimStep re-reads every poll period
 * and times the lease from the first sighting of the last rvn instead.
 *
 * Run by bench/takeover.ts like `fencepost run --events` (same events, one JSON line each):
 *   node --import tsx bench/baseline-claimant.ts --dynamodb-endpoint U --s3-endpoint U --table-prefix P --bucket B
 *        --date D --worker W --invoices N
 */
import { parseArgs } from 'node:util';
import { billChunk, type BillingDeps, billingDeps, completeNight, raiseNight } from '../apps/billing/night';
import { systemClock } from '../lib/core/clock';
import { type LeaseConfig } from '../lib/core/config';
import { validateBillingConfig } from '../apps/billing/settings';
import { Events } from '../lib/core/events';
import { Lease, sight, tryClaim, type LeaseDeps } from '../lib/core/lease';
import { billingTables as tableNames } from '../apps/billing/schema';
import { Keys } from '../apps/billing/keys';
import { localClients } from '../lib/core/aws/clients';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** Observe, wait a full lease, claim if unchanged; otherwise start again. */
export async function claimOncePerLease(deps: LeaseDeps, key: string, holder: string, config: LeaseConfig): Promise<Lease> {
  for (let attempt = 1; ; attempt++) {
    const s = await sight(deps, key, config);
    deps.events?.emit('sighted', { key, holder: s.holder, epoch: s.epoch, rvn: s.seenRvn, waitMs: s.waitMs, attempt });
    if (s.waitMs > 0) await deps.clock.sleep(s.waitMs);
    const sentAt = deps.clock.monotonicMs();
    const epoch = await tryClaim(deps, key, holder, config, s);
    if (epoch === undefined) continue;
    const lease = Lease.held(deps, key, holder, epoch, config, sentAt);
    deps.events?.emit('claim', { key, token: epoch, attempt, waitedMs: s.waitMs, stopAtMs: Math.round(lease.stopAtMs) });
    return lease;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'dynamodb-endpoint': { type: 'string' },
      's3-endpoint': { type: 'string' },
      'table-prefix': { type: 'string' },
      bucket: { type: 'string' },
      date: { type: 'string' },
      worker: { type: 'string' },
      invoices: { type: 'string' },
    },
  });
  const clients = localClients({ dynamodb: values['dynamodb-endpoint']!, s3: values['s3-endpoint']! });
  const worker = values.worker ?? `baseline-${process.pid}`;
  const events = new Events(worker, systemClock).on((e) => process.stdout.write(JSON.stringify(e) + '\n'));
  const config = validateBillingConfig({ invoices: Number(values.invoices ?? 50_000) });
  const deps: BillingDeps = billingDeps(clients, tableNames(values['table-prefix']), values.bucket!, systemClock, events);
  const date = values.date!;
  try {
    const lease = await claimOncePerLease({ locks: deps.locks, clock: deps.clock, events }, Keys.lock(date), worker, config);
    lease.startHeartbeat();
    const night = await raiseNight(deps, lease, date, config);
    for (const chunk of night.chunksToDo) await billChunk(deps, lease, night.manifest, date, config, chunk);
    await completeNight(deps, lease, night.manifest, date);
    await lease.release();
  } finally {
    clients.destroy();
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exitCode = 1;
  });
}

/**
 * PROTOTYPE (bench only, not the library): a direct-engine worker whose clock-free claim re-observes the lock every
 * `--poll-ms` instead of once per lease, and claims once the SAME rvn has been seen unchanged for a full lease on
 * this process's monotonic clock, measured from the first response that showed it (the AWS Lock Client's rule:
 * it polls every refresh period and acquires once the record version has not changed for the lease duration).
 *
 * Why it is still safe: the first response that showed rvn X arrived after DynamoDB applied X, so "first seen"
 * ≥ "X applied", and the claim (conditional on rvn = X) is sent ≥ X applied + lease: never below the formula.
 * What it buys: the claim no longer waits for the next once-a-lease observation after the holder died; the excess
 * over the formula is at most one poll period plus the claim, the raise and the first transaction.
 *
 * Run by bench/takeover.ts like `fencepost run --events` (same events, one JSON line each):
 *   node --import tsx bench/prototype-claimant.ts --dynamodb-endpoint U --s3-endpoint U --table-prefix P --bucket B
 *        --date D --worker W --invoices N --poll-ms 500
 */
import { parseArgs } from 'node:util';
import { billChunk, completeNight, raiseNight, type BillingDeps } from '../lib/core/billing';
import { systemClock } from '../lib/core/clock';
import { validateBillingConfig, type LeaseConfig } from '../lib/core/config';
import { Events } from '../lib/core/events';
import { Lease, sight, tryClaim, type LeaseDeps } from '../lib/core/lease';
import { Keys, tableNames } from '../lib/core/schema';
import { localClients } from '../lib/core/stores';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** The sliding-window clock-free claim (see the module comment). */
export async function claimPolling(deps: LeaseDeps, key: string, holder: string, config: LeaseConfig, pollMs: number): Promise<Lease> {
  let first: { rvn: string | undefined; atMs: number } | undefined;
  for (let attempt = 1; ; attempt++) {
    const s = await sight(deps, key, config);
    const seenAt = deps.clock.monotonicMs(); // after the response: not earlier than the write that produced this rvn
    deps.events.emit('observe', { key, holder: s.holder, epoch: s.epoch, rvn: s.seenRvn, waitMs: s.waitMs, attempt });
    if (s.waitMs > 0 && (first === undefined || first.rvn !== s.seenRvn)) first = { rvn: s.seenRvn, atMs: seenAt };
    const due = s.waitMs === 0 ? seenAt : first!.atMs + s.waitMs;
    if (deps.clock.monotonicMs() >= due) {
      const sentAt = deps.clock.monotonicMs();
      const epoch = await tryClaim(deps, key, holder, config, s);
      if (epoch !== undefined) {
        const lease = new Lease(deps, key, holder, epoch, config, sentAt);
        deps.events.emit('claim', { key, token: epoch, attempt, waitedMs: Math.round(sentAt - (first?.atMs ?? sentAt)), stopAtMs: Math.round(lease.stopAtMs) });
        return lease;
      }
      first = undefined; // changed under us: start the window again from the next sighting
      continue;
    }
    await deps.clock.sleep(Math.min(pollMs, due - deps.clock.monotonicMs()));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'dynamodb-endpoint': { type: 'string' }, 's3-endpoint': { type: 'string' }, 'table-prefix': { type: 'string' }, bucket: { type: 'string' },
      date: { type: 'string' }, worker: { type: 'string' }, invoices: { type: 'string' }, 'poll-ms': { type: 'string' },
    },
  });
  const clients = localClients({ dynamodb: values['dynamodb-endpoint']!, s3: values['s3-endpoint']! });
  const worker = values.worker ?? `prototype-${process.pid}`;
  const events = new Events(worker, systemClock).on((e) => process.stdout.write(JSON.stringify(e) + '\n'));
  const config = validateBillingConfig({ invoices: Number(values.invoices ?? 50_000) });
  const deps: BillingDeps = { ddb: clients.ddb, s3: clients.s3, tables: tableNames(values['table-prefix']), bucket: values.bucket!, clock: systemClock, events };
  const date = values.date!;
  try {
    const lease = await claimPolling({ ddb: deps.ddb, table: deps.tables.locks, clock: deps.clock, events }, Keys.lock(date), worker, config, Number(values['poll-ms'] ?? 500));
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
  main().catch((err) => { process.stderr.write(`${(err as Error).stack}\n`); process.exitCode = 1; });
}

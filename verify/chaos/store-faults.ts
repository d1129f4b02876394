/**
 * Store faults for the fault suite, injected in the AWS SDK's middleware of a run's own clients by the fault preload
 * (verify/chaos/fault-preload.ts; docs/DESIGN.md, "Fault injection"):
 *
 *   throttle  before the request is sent: a throttling error (DynamoDB ThrottlingException, S3 SlowDown), retryable;
 *   lost      AFTER the request was applied: its response is "lost" as a TimeoutError, retryable. The retry
 *             re-sends a request the store already applied, which is exactly what idempotency has to survive
 *             (ClientRequestToken on the fenced transaction, the claim recognising its own rvn, If-Match re-reads).
 *
 *   FENCEPOST_STORE_FAULTS="seed=42,throttle=0.05,lost=0.02"
 *
 * Seeded, so a failing schedule can be replayed. Counts go to stderr as one line at exit:
 * `store-faults {"throttle":3,"lost":1}`. Tests and the chaos command only.
 */
import type { Clients } from '../../lib/core/aws/clients';
import { prng } from '../../lib/core/prng';

export interface StoreFaultSpec {
  readonly seed: number;
  readonly throttle: number;
  readonly lost: number;
}

export function parseStoreFaults(spec: string): StoreFaultSpec {
  const fields = Object.fromEntries(spec.split(',').map((kv) => kv.split('=')));
  const out = { seed: Number(fields.seed ?? 1), throttle: Number(fields.throttle ?? 0), lost: Number(fields.lost ?? 0) };
  for (const [k, v] of Object.entries(out))
    if (!Number.isFinite(v)) throw new Error(`FENCEPOST_STORE_FAULTS: ${k} is not a number in ${JSON.stringify(spec)}`);
  return out;
}

function fault(name: string, status: number, retryable: { throttling?: boolean }): Error {
  return Object.assign(new Error(`injected ${name}`), { name, $retryable: retryable, $fault: 'server', $metadata: { httpStatusCode: status } });
}

export function injectStoreFaults(clients: Clients, spec: StoreFaultSpec): void {
  const random = prng(spec.seed);
  const counts = { throttle: 0, lost: 0 };
  process.on('exit', () => process.stderr.write(`store-faults ${JSON.stringify(counts)}\n`));
  const add = (client: { middlewareStack: Clients['raw']['middlewareStack'] }, throttleName: string, throttleStatus: number) => {
    client.middlewareStack.add(
      (next) => async (args) => {
        if (random() < spec.throttle) {
          counts.throttle++;
          throw fault(throttleName, throttleStatus, { throttling: true });
        }
        const result = await next(args);
        if (random() < spec.lost) {
          counts.lost++;
          throw fault('TimeoutError', 504, {}); // applied, but the caller never hears back
        }
        return result;
      },
      { step: 'deserialize', name: 'fencepostStoreFaults', priority: 'high' },
    );
  };
  add(clients.raw, 'ThrottlingException', 400);
  add(clients.s3 as unknown as { middlewareStack: Clients['raw']['middlewareStack'] }, 'SlowDown', 503);
}

/**
 * Fault injection for the process-level tests: a REAL pause at an exact point. When FENCEPOST_FAULT names a
 * check point, the process sends itself SIGSTOP right after passing its stop-time check and before acting, which
 * is the gap in which a pause defeats any holder-side check (reference Part 4). The process really stops: its
 * renewals stop too, and only SIGCONT from outside resumes it.
 *
 *   FENCEPOST_FAULT=sigstop:batch:<chunk>:<batch>   before sending that batch's transaction
 *   FENCEPOST_FAULT=sigstop:chunk-commit:<chunk>    before rewriting the manifest for that chunk
 *   FENCEPOST_FAULT=sigstop:complete                before completing the job
 * Tests only; documented in docs/TESTING.md.
 */
import type { BillingHooks, CheckPoint } from '../core/billing';

export function faultHooks(spec: string | undefined, announce: (point: CheckPoint) => void): BillingHooks | undefined {
  if (!spec) return undefined;
  const [kind, step, chunk, batch] = spec.split(':');
  if (kind !== 'sigstop' || !['batch', 'chunk-commit', 'complete'].includes(step)) {
    throw new Error(`FENCEPOST_FAULT=${spec} is not understood (see docs/TESTING.md)`);
  }
  let fired = false;
  return {
    afterCheck(point) {
      if (fired || point.step !== step) return;
      if (chunk !== undefined && point.chunk !== Number(chunk)) return;
      if (batch !== undefined && point.batch !== Number(batch)) return;
      fired = true;
      announce(point);
      process.kill(process.pid, 'SIGSTOP');
    },
  };
}

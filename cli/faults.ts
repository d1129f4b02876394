/**
 * Fault injection for the process-level tests: a REAL pause at an exact point. When FENCEPOST_FAULT names a
 * point, the process sends itself SIGSTOP there; only SIGCONT from outside resumes it. Its renewals stop too,
 * because the whole process is stopped: nothing is skipped or simulated.
 *
 *   FENCEPOST_FAULT=sigstop:batch:<chunk>:<batch>   after the stop-time check, before sending that batch
 *   FENCEPOST_FAULT=sigstop:chunk-commit:<chunk>    after the check, before rewriting the manifest for that chunk
 *   FENCEPOST_FAULT=sigstop:complete                after the check, before completing the job
 *   FENCEPOST_FAULT=sigstop:after-chunk:<chunk>     (workflow engine) between that chunk's task and the next task
 * The first three are the gap in which a pause defeats any holder-side check (reference Part 4).
 * Tests only; documented in docs/DESIGN.md ("Fault injection").
 */
import type { BillingHooks, CheckPoint } from '../core/billing';
import { ConfigError } from '../core/errors';

export type FaultHooks = BillingHooks & { afterTask?(state: string, output: unknown): void };

const STEPS = ['batch', 'chunk-commit', 'complete', 'after-chunk'];

export function faultHooks(
  spec: string | undefined,
  announce: (point: CheckPoint | { step: 'after-chunk'; chunk: number }) => void,
): FaultHooks | undefined {
  if (!spec) return undefined;
  const [kind, step, chunk, batch] = spec.split(':');
  if (kind !== 'sigstop' || !STEPS.includes(step))
    throw new ConfigError([`FENCEPOST_FAULT=${spec} is not understood (see docs/DESIGN.md, "Fault injection")`]);
  let fired = false;
  const stop = (point: CheckPoint | { step: 'after-chunk'; chunk: number }) => {
    fired = true;
    announce(point);
    process.kill(process.pid, 'SIGSTOP');
  };
  // Only the hook the spec needs: a workflow running its bundles can honour afterTask but not afterCheck.
  if (step === 'after-chunk') {
    return {
      afterTask(state, output) {
        const done = (output as { chunk?: number } | undefined)?.chunk;
        if (fired || state !== 'BillChunk' || done !== Number(chunk)) return;
        stop({ step: 'after-chunk', chunk: done });
      },
    };
  }
  return {
    afterCheck(point) {
      if (fired || point.step !== step) return;
      if (chunk !== undefined && point.chunk !== Number(chunk)) return;
      if (batch !== undefined && point.batch !== Number(batch)) return;
      stop(point);
    },
  };
}

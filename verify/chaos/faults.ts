/**
 * The faults the harness injects into a worker process from outside the product (docs/DESIGN.md, "Fault injection").
 *
 * A worker started with faults runs `node --import tsx --import verify/chaos/fault-preload.ts bin/fencepost.ts run …`;
 * the preload reads the faults from the variables below and installs them through the CLI's one injection point,
 * the diagnostics channel `fencepost:run` (cli/instrumentation.ts). The CLI itself reads none of these variables.
 *
 *   FENCEPOST_FAULT=sigstop:batch:<chunk>:<batch>   right after the stop-time check, before sending that batch
 *   FENCEPOST_FAULT=sigstop:chunk-commit:<chunk>    after the check, before rewriting the manifest for that chunk
 *   FENCEPOST_FAULT=sigstop:complete                after the check, before completing the job
 *   FENCEPOST_FAULT=sigstop:after-chunk:<chunk>     (workflow engine) between that chunk's task and the next task
 *   FENCEPOST_FAULT=sigstop:append:<n>              (elect, handover) after the check, before the n-th ledger append
 *   FENCEPOST_STORE_FAULTS=seed=S,throttle=P,lost=P throttling and lost-after-applied responses (verify/chaos/store-faults.ts)
 *   FENCEPOST_LAMBDA_CODE=source                    no fault: the workflow's handlers from their sources (the bench)
 *
 * A stop is a real SIGSTOP the process sends itself at that exact point; only SIGCONT from outside resumes it, and its
 * renewals stop with it because the whole process is stopped: nothing is skipped or simulated. The first three points
 * lie between a check and the act it guards, the gap no holder-side check can close (docs/DESIGN.md "Fault
 * injection"); they are inside the core, and so are the run's clients the store faults wrap, where no bundle can be
 * reached: a workflow worker with either runs the handlers' sources in its own process.
 */
import path from 'node:path';
import type { CheckPoint } from '../../lib/core/job';
import { ConfigError } from '../../lib/core/errors';
import type { LambdaCode, LocalExecution } from '../../lib/local/workflow';

/** The faults of one worker process, as the harness's tests and schedules ask for them. */
export interface Faults {
  /** Stop the process at this point: `batch:<chunk>:<batch>`, `chunk-commit:<chunk>`, `complete`, `after-chunk:<chunk>`, `append:<n>`. */
  readonly sigstop?: string;
  /** Store faults in the run's SDK clients: `seed=S,throttle=P,lost=P` (verify/chaos/store-faults.ts). */
  readonly store?: string;
  /** No fault: run the workflow's handlers from their sources in the worker's process (to measure them). */
  readonly lambdaCode?: LambdaCode;
}

/** The variables that carry the faults from the harness to its preload in the worker. */
export const FAULT_ENV = { sigstop: 'FENCEPOST_FAULT', store: 'FENCEPOST_STORE_FAULTS', lambdaCode: 'FENCEPOST_LAMBDA_CODE' } as const;

/** The preload module, loaded after tsx (it is TypeScript). */
const FAULT_PRELOAD = path.join(__dirname, 'fault-preload.ts');

/** What to add to a worker's Node arguments (after `--import tsx`) and environment to inject these faults. */
export function faultArgs(faults: Faults | undefined): { nodeArgs: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  if (faults?.sigstop !== undefined) env[FAULT_ENV.sigstop] = `sigstop:${faults.sigstop}`;
  if (faults?.store !== undefined) env[FAULT_ENV.store] = faults.store;
  if (faults?.lambdaCode !== undefined) env[FAULT_ENV.lambdaCode] = faults.lambdaCode;
  return Object.keys(env).length === 0 ? { nodeArgs: [], env } : { nodeArgs: ['--import', FAULT_PRELOAD], env };
}

/** Where a stop lands: a point after a passed check (lib/core/job.ts CheckPoint; billing's points are apps/billing/night.ts's), or between two workflow tasks. */
export type StopPoint =
  (CheckPoint & { readonly step: 'batch' | 'chunk-commit' | 'complete' | 'append' }) | { readonly step: 'after-chunk'; readonly chunk: number };

const STEPS = ['batch', 'chunk-commit', 'complete', 'after-chunk', 'append'] as const;

/** `sigstop:<step>[:<chunk>[:<batch>]]` → the point; a ConfigError naming the variable otherwise. */
export function parseStop(spec: string): StopPoint {
  const [kind, step, ...numbers] = spec.split(':');
  const n = numbers.map(Number);
  const arity = { batch: 2, 'chunk-commit': 1, complete: 0, 'after-chunk': 1, append: 1 }[step as (typeof STEPS)[number]];
  const exact = step === 'after-chunk' || step === 'append';
  if (kind !== 'sigstop' || arity === undefined || n.length > arity || (exact && n.length !== 1) || !n.every(Number.isSafeInteger)) {
    throw new ConfigError([
      `${FAULT_ENV.sigstop}=${spec} is not understood: sigstop:${STEPS.join('|')}[:<chunk>[:<batch>]] (docs/DESIGN.md, "Fault injection")`,
    ]);
  }
  if (step === 'after-chunk') return { step, chunk: n[0] };
  if (step === 'append') return { step, batch: n[0] }; // the n-th append: its point carries the ordinal as `batch`
  return { step: step as 'batch' | 'chunk-commit' | 'complete', ...(n.length > 0 ? { chunk: n[0] } : {}), ...(n.length > 1 ? { batch: n[1] } : {}) };
}

type RunHooks = NonNullable<LocalExecution['hooks']>;

/**
 * The hook that stops the process once, at `point`: `announce` first (an event on the run's stream, so the harness
 * knows where it stopped), then SIGSTOP to itself. Only the hook the point needs: a workflow running its bundles can
 * honour afterTask, but not afterCheck, which only the handlers' sources reach.
 */
export function stopHooks(point: StopPoint, announce: (point: StopPoint) => void): RunHooks {
  let fired = false;
  const stop = (at: StopPoint) => {
    fired = true;
    announce(at);
    process.kill(process.pid, 'SIGSTOP');
  };
  if (point.step === 'after-chunk') {
    return {
      afterTask(state, output) {
        const done = (output as { chunk?: number } | undefined)?.chunk;
        if (!fired && state === 'BillChunk' && done === point.chunk) stop({ step: 'after-chunk', chunk: done });
      },
    };
  }
  return {
    afterCheck(at) {
      if (fired || at.step !== point.step) return;
      if (point.chunk !== undefined && at.chunk !== point.chunk) return;
      if (point.batch !== undefined && at.batch !== point.batch) return;
      stop({ ...at, step: point.step }); // the same step: it matched point's above
    },
  };
}

/**
 * Loaded into a worker process before the CLI (`node --import tsx --import verify/chaos/fault-preload.ts …`): reads the
 * faults the harness put in the environment (verify/chaos/faults.ts lists them) and installs them in each `fencepost run`
 * through the CLI's one injection point, the diagnostics channel `fencepost:run` (cli/instrumentation.ts;
 * docs/DESIGN.md, "Fault injection"). Joined by the channel's name: the harness sits below the CLI and imports nothing
 * of it, so the message's shape is restated here.
 *
 * A spec it does not understand ends the process before the CLI starts, with one line and exit 2 (bad input).
 */
import { subscribe } from 'node:diagnostics_channel';
import { ConfigError } from '../../lib/core/errors';
import type { Events } from '../../lib/core/events';
import type { Clients } from '../../lib/core/aws/clients';
import type { LambdaCode, LocalExecution } from '../../lib/local/workflow';
import { FAULT_ENV, parseStop, stopHooks, type StopPoint } from './faults';
import { injectStoreFaults, parseStoreFaults, type StoreFaultSpec } from './store-faults';

/** What `fencepost run` publishes on the channel (cli/instrumentation.ts `RunStart`). */
interface RunStart {
  readonly worker: string;
  readonly engine: 'stepfunctions' | 'direct';
  readonly clients: Clients;
  readonly events: Events;
  instrument(answer: { hooks?: NonNullable<LocalExecution['hooks']>; lambdaCode?: LambdaCode }): void;
}

const RUN_CHANNEL = 'fencepost:run';

function refuse(problem: string): never {
  process.stderr.write(`fencepost fault preload: ${problem}\n`);
  process.exit(2);
}

let stop: StopPoint | undefined;
let store: StoreFaultSpec | undefined;
try {
  const stopSpec = process.env[FAULT_ENV.sigstop];
  const storeSpec = process.env[FAULT_ENV.store];
  stop = stopSpec ? parseStop(stopSpec) : undefined;
  store = storeSpec ? parseStoreFaults(storeSpec) : undefined;
} catch (err) {
  refuse(err instanceof ConfigError ? err.problems.join('; ') : (err as Error).message);
}
const sources = process.env[FAULT_ENV.lambdaCode] === 'source';

subscribe(RUN_CHANNEL, (message) => {
  const run = message as RunStart;
  if (stop?.step === 'after-chunk' && run.engine !== 'stepfunctions')
    refuse(`${FAULT_ENV.sigstop}=sigstop:after-chunk stops between two workflow tasks: it needs --engine stepfunctions`);
  if (store) injectStoreFaults(run.clients, store);
  const announce = (at: StopPoint) => run.events.emit('fault', { fault: 'sigstop', ...at });
  // A point between a check and its act, and the run's own clients, are reached only by the handlers' sources.
  const inCore = (stop !== undefined && stop.step !== 'after-chunk') || store !== undefined;
  run.instrument({
    hooks: stop ? stopHooks(stop, announce) : undefined,
    lambdaCode: run.engine === 'stepfunctions' && (inCore || sources) ? 'source' : undefined,
  });
});

/**
 * The one way into a `fencepost run` from outside the product (docs/DESIGN.md, "Fault injection").
 *
 * The product reads no setting for it and installs nothing: a run nobody instruments is exactly the product. Before
 * it sends anything, each run publishes its context on the diagnostics channel `fencepost:run` (node:diagnostics_channel,
 * joined by name, so the instrumenting code needs no import of the CLI). A module loaded into the process before the
 * CLI (`node --import <module> bin/fencepost.ts run …`) may subscribe and answer, once per run, with:
 *   - hooks the engine calls at its instrumented points: right after a passed stop-time check and before the act it
 *     guards (lib/core/job.ts `RunHooks.afterCheck`), and after each task of the workflow engine (`afterTask`);
 *   - the code the workflow engine runs for its tasks: the functions' bundles (each in its own process, as deployed,
 *     the default) or the handlers' sources in this process, the only way `afterCheck` and the run's clients reach them.
 * Through the context it may also wrap the run's clients (AWS SDK middleware) and emit events on the run's stream.
 * Its one subscriber is the test harness's fault preload (verify/chaos/fault-preload.ts), which restates this message's
 * shape on its side of the channel.
 */
import { channel } from 'node:diagnostics_channel';
import type { Events } from '../lib/core/events';
import type { Clients } from '../lib/core/aws/clients';
import type { LambdaCode, LocalExecution } from '../lib/local/workflow';
import type { Engine } from './engines';

/** The channel's name: the whole contract between the product and what instruments it. */
const RUN_CHANNEL = 'fencepost:run';

/** What an engine calls at its instrumented points (the local workflow's hooks: core's RunHooks and afterTask). */
export type RunHooks = NonNullable<LocalExecution['hooks']>;

/** What an instrumenting subscriber may give a run. */
export interface Instrumented {
  readonly hooks?: RunHooks;
  /** The code the workflow engine runs for its tasks (the direct engine has none). @default 'bundle' */
  readonly lambdaCode?: LambdaCode;
}

/** A run as it is published, before anything has been sent. */
export interface RunStart {
  readonly worker: string;
  readonly engine: Engine;
  /** The run's clients: the engine's holders use exactly these (in source mode, the workflow's handlers too). */
  readonly clients: Clients;
  /** The run's event stream: what `--events` prints. */
  readonly events: Events;
  /** A subscriber's answer; at most one subscriber answers a run. */
  instrument(answer: Instrumented): void;
}

const runs = channel(RUN_CHANNEL);

/** The product's side: publish the run and take the answer, if anything subscribed; otherwise nothing. */
export function instrumentRun(run: Omit<RunStart, 'instrument'>): Instrumented {
  if (!runs.hasSubscribers) return {};
  let answer: Instrumented | undefined;
  runs.publish({
    ...run,
    instrument(a: Instrumented) {
      if (answer) throw new Error(`${RUN_CHANNEL}: this run is already instrumented`);
      answer = a;
    },
  } satisfies RunStart);
  return answer ?? {};
}

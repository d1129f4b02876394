/**
 * The billing app as the local runner builds and runs it (lib/local/workflow.ts WorkflowApp): the billing stack
 * (apps/billing/stack.ts) with cdk.json's `fencepost` settings and the run's overrides, its FencedJob's two state
 * machines and stores, and, for source mode, its handlers made in this process.
 *
 * The stack and the handlers are loaded only when asked for: a run from the synth cache needs neither aws-cdk-lib
 * nor the constructs, and Powertools must read the local run's settings when the handlers' modules load.
 */
import { createRequire } from 'node:module';
import type { App } from 'aws-cdk-lib';
import type { Clients, EventListener, RunHooks } from '../../lib/core/internal';
import type * as Lambda from '../../lib/lambda/internal';
import type * as Chunk from './lambda/chunk';
import type * as Config from './config';
import type * as Stack from './stack';
// Env from the constructs' entry, not the Lambda entry: loading that one creates Powertools' logger, metrics and
// tracer, which must read the local run's settings when the handlers load (handlers() below), not before.
import { Env } from '../../lib/constructs/index';

type Json = Record<string, unknown>;

/** Loads a module when first asked for (synchronously: a synth and a source-mode run start in one call). */
const onDemand = createRequire(__filename);

/** The billing stack's id in the app (the local stack's name). */
const STACK_ID = 'Fencepost';

/** The billing stack as lib/local/workflow.ts runs it (a WorkflowApp). */
export const billingApp = {
  name: 'billing',
  variables: { handler: Env.handler, worker: Env.worker },
  build(app: App, settings: Json) {
    const { CONTEXT_KEY, parseStackConfig } = onDemand('./config') as typeof Config;
    const { FencepostStack } = onDemand('./stack') as typeof Stack;
    const config = parseStackConfig({ ...(app.node.tryGetContext(CONTEXT_KEY) as Json | undefined), ...settings });
    const stack = new FencepostStack(app, STACK_ID, { config });
    const job = stack.billing;
    return {
      stack,
      job: job.stateMachine,
      sweeper: job.sweeper.stateMachine,
      tables: { locks: job.lockTable, jobs: job.jobTable, invoices: stack.invoices },
      bucket: job.manifestBucket!,
    };
  },
  handlers(runtime: { environment: Readonly<Record<string, string>>; clients: Clients; onEvent?: EventListener; hooks?: RunHooks }) {
    const { createRuntime, lazily, makeHandlers } = onDemand('../../lib/lambda/internal') as typeof Lambda;
    const { chunk } = onDemand('./lambda/chunk') as typeof Chunk;
    const source = lazily(() => createRuntime(runtime));
    // FencedJob's own handlers, and billing's chunk function beside them (its FENCEPOST_HANDLER is `chunk`).
    return { ...makeHandlers(source), chunk: chunk(source) } as Record<string, (event: unknown) => Promise<unknown>>;
  },
};

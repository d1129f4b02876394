/**
 * The reindex stack as the local runner builds and runs it (lib/local/workflow.ts WorkflowApp): the stack with the run's
 * settings, its FencedJob's two state machines, and the stores its functions name, by the names a local run gives
 * them. Bundles only: the chunk function runs as `cdk deploy` ships it; there is no source mode.
 */
import { type App, Duration } from 'aws-cdk-lib';
import { Env } from '../../lib/constructs/index';
import { ReindexStack, type ReindexStackProps } from './stack';

/** The settings a local run may override: the night's size and the lease timing. */
interface ReindexSettings {
  readonly items?: number;
  readonly chunkSize?: number;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  readonly marginMs?: number;
}

/** The reindex stack, as lib/local/workflow.ts runs it. */
export const reindexApp = {
  name: 'reindex',
  variables: { handler: Env.handler, worker: Env.worker },
  build(app: App, settings: ReindexSettings) {
    const { items, chunkSize, leaseMs, renewMs, marginMs } = settings;
    const time = (ms: number | undefined) => (ms === undefined ? undefined : Duration.millis(ms));
    const job = { leaseDuration: time(leaseMs), renewInterval: time(renewMs), margin: time(marginMs) };
    const props: ReindexStackProps = { items, chunkSize, job };
    const stack = new ReindexStack(app, 'Reindex', props);
    return {
      stack,
      job: stack.job.stateMachine,
      sweeper: stack.job.sweeper.stateMachine,
      tables: { locks: stack.job.lockTable, jobs: stack.job.jobTable, source: stack.source, index: stack.index },
      bucket: stack.job.manifestBucket, // none: the chunks write DynamoDB only
    };
  },
};

/**
 * The reindex stack as the local runner builds and runs it (local/workflow.ts WorkflowApp): the stack with the run's
 * settings, its FencedJob's two state machines, and the stores its functions name, by the names a local run gives
 * them. Bundles only: the chunk function runs as `cdk deploy` ships it; there is no source mode.
 */
import type { App } from 'aws-cdk-lib';
import { Env } from '../../lib/index';
import { ReindexStack, type ReindexStackProps } from './stack';

/** The settings a local run may override: the night's size and the lease timing. */
interface ReindexSettings {
  readonly items?: number;
  readonly chunkSize?: number;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  readonly marginMs?: number;
}

/** The reindex stack, as local/workflow.ts runs it. */
export const reindexApp = {
  name: 'reindex',
  variables: { handler: Env.handler, worker: Env.worker },
  build(app: App, settings: ReindexSettings) {
    const { items, chunkSize, ...lease } = settings;
    const props: ReindexStackProps = { items, chunkSize, job: lease };
    const stack = new ReindexStack(app, 'Reindex', props);
    return {
      stack,
      job: stack.job.stateMachine,
      sweeper: stack.job.sweeper.stateMachine,
      tables: { locks: stack.job.leaseTable.table, jobs: stack.job.fenceTable.table, source: stack.source, index: stack.index },
      bucket: stack.job.manifests.bucket,
    };
  },
};

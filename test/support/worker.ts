/** Worker processes for the tests: `fencepost run --events` on a test's own tables (verify/chaos/worker-process.ts). */
import { startProcess, type WorkerOptions, type WorkerProcess } from '../../verify/chaos/worker-process';
import type { Namespace } from './stack';

export { exitedAfterOutput, runCli, type WorkerOptions, type WorkerProcess } from '../../verify/chaos/worker-process';

export function storeArgs(ns: Pick<Namespace, 'endpoints' | 'prefix' | 'bucket'>): string[] {
  return ['--dynamodb-endpoint', ns.endpoints.dynamodb, '--s3-endpoint', ns.endpoints.s3, '--table-prefix', ns.prefix, '--bucket', ns.bucket];
}

export function startWorker(ns: Pick<Namespace, 'endpoints' | 'prefix' | 'bucket'>, args: string[], options: WorkerOptions = {}): WorkerProcess {
  return startProcess(['run', ...storeArgs(ns), '--events', ...args], options);
}

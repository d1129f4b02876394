/**
 * The call log the IAM proof reads: every AWS call the local endpoints and the local Step Functions answered during a
 * test run, one JSON line each, appended by every process of the run to one file (FENCEPOST_CALL_LOG).
 */
import { appendFileSync } from 'node:fs';
import type { AwsCall, CallSink } from '../../lib/local/call-log';

/** A sink that appends one JSON line per call to a file (several processes may append to one file). */
export function fileCallSink(file: string): CallSink {
  return (call) => appendFileSync(file, `${JSON.stringify(call)}\n`);
}

/** The sink of this run's call log, when one is kept (FENCEPOST_CALL_LOG names its file); none otherwise. */
export function callLogSink(): CallSink | undefined {
  const file = process.env.FENCEPOST_CALL_LOG;
  return file ? fileCallSink(file) : undefined;
}

/** Read a call log written by fileCallSink. */
export function readCallLog(text: string): AwsCall[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as AwsCall);
}

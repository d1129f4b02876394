/**
 * A local Step Functions endpoint for the one call the functions make: StartExecution (the sweeper's
 * VerifyAndRequeue starting a run for a re-queued job row). AWS JSON 1.0 protocol, the operation in
 * `X-Amz-Target: AWSStepFunctions.StartExecution`, loopback only.
 *
 * It follows the API reference (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html):
 *   - a new name starts an execution: 200 { executionArn, startDate };
 *   - the same name while that execution is open, with the same input: the same answer again (idempotent);
 *   - the same name with another input, or once that execution has closed: 400 ExecutionAlreadyExists;
 *   - an ARN that names no state machine here: 400 StateMachineDoesNotExist.
 *
 * Not emulated: every other action, the 90-day window on names (names are kept while the endpoint runs), quotas
 * and throttling, Express workflows, request signing (the caller's access key id is only read, for the call log).
 * A test may refuse a call instead (`refuse`): before the execution starts, or after it started (the caller then
 * fails as if it had died right after the start landed).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { principalOf, type CallSink } from './call-log';

/** Runs one execution of a state machine; resolves when it closes. */
export type Starter = (name: string, input: unknown) => Promise<unknown>;

interface LocalExecutionRecord {
  readonly stateMachineArn: string;
  readonly name: string;
  readonly input: string;
  readonly executionArn: string;
  readonly startDate: number;
  /** Settles when the execution closes (its result, or its error). */
  readonly done: Promise<unknown>;
  closed: boolean;
}

/**
 * A refused StartExecution, for tests: `before` answers the error and starts nothing; `after` starts the
 * execution, then answers the error, so the caller learns nothing of a start that landed.
 */
interface StartRefusal {
  readonly when: 'before' | 'after';
  /** The error's type, as AWS names it (ExecutionLimitExceeded is 400, not retried by the SDK). @default ExecutionLimitExceeded */
  readonly type?: string;
}

/** Decides, per StartExecution call (1 for the first), whether to refuse it. */
export type RefuseStart = (call: number, name: string) => StartRefusal | undefined;

export interface LocalSfn {
  readonly endpoint: string;
  readonly executions: readonly LocalExecutionRecord[];
  stop(): Promise<void>;
}

export async function startLocalSfn(options: {
  readonly machines: Record<string, Starter>;
  readonly onCall?: CallSink;
  readonly refuse?: RefuseStart;
}): Promise<LocalSfn> {
  const executions: LocalExecutionRecord[] = [];
  let starts = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const answer = (status: number, json: unknown) => {
        res.writeHead(status, {
          'content-type': 'application/x-amz-json-1.0',
          ...(status >= 400 ? { 'x-amzn-errortype': (json as { __type: string }).__type } : {}),
        });
        res.end(JSON.stringify(json));
      };
      const operation = String(req.headers['x-amz-target'] ?? '').replace(/^AWSStepFunctions\./, '');
      let request: { stateMachineArn?: string; name?: string; input?: string };
      try {
        request = JSON.parse(body || '{}');
      } catch {
        return answer(400, { __type: 'SerializationException', message: 'the request body is not JSON' });
      }
      options.onCall?.({ principal: principalOf(req.headers.authorization), service: 'states', operation, target: request.stateMachineArn });
      if (operation !== 'StartExecution') return answer(400, { __type: 'UnknownOperationException', message: `${operation} is not emulated here` });
      const arn = String(request.stateMachineArn);
      const start = options.machines[arn];
      if (!start) return answer(400, { __type: 'StateMachineDoesNotExist', message: `State Machine Does Not Exist: '${arn}'` });
      const name = request.name ?? `local-${executions.length + 1}`;
      const input = request.input ?? '{}';
      const refusal = options.refuse?.(++starts, name);
      const refused = () =>
        answer(400, { __type: refusal!.type ?? 'ExecutionLimitExceeded', message: `refused by the test (${refusal!.when} the start)` });
      if (refusal?.when === 'before') return refused();
      const prior = executions.find((e) => e.stateMachineArn === arn && e.name === name);
      if (prior) {
        if (!prior.closed && prior.input === input) return answer(200, { executionArn: prior.executionArn, startDate: prior.startDate });
        return answer(400, { __type: 'ExecutionAlreadyExists', message: `Execution Already Exists: '${prior.executionArn}'` });
      }
      const executionArn = `${arn.replace(':stateMachine:', ':execution:')}:${name}`;
      const record: LocalExecutionRecord = {
        stateMachineArn: arn,
        name,
        input,
        executionArn,
        startDate: Date.now() / 1000, // wall: a timestamp AWS returns, no duration
        closed: false,
        done: Promise.resolve()
          .then(() => start(name, JSON.parse(input)))
          .finally(() => {
            record.closed = true;
          }),
      };
      record.done.catch(() => undefined); // the caller reads the outcome from `done`; never an unhandled rejection
      executions.push(record);
      if (refusal?.when === 'after') return refused();
      answer(200, { executionArn, startDate: record.startDate });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    executions,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

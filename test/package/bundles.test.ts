/**
 * What the deployed functions run: every bundle carries its own AWS SDK, the versions package-lock.json pins and the
 * tests ran, never the copy the Lambda runtime happens to ship (which can lag or lead: the code relies on
 * version-specific behaviour such as `throwOnRequestTimeout`, S3 `IfMatch`, `ReturnValuesOnConditionCheckFailure`).
 * Both apps are synthesized with bundling, as `cdk deploy` ships them (lib/local/workflow.ts, cached on every input).
 */
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { billingApp } from '../../apps/billing/app';
import { reindexApp } from '../../apps/reindex/app';
import * as errors from '../../lib/core/errors';
import { FencedOutError } from '../../lib/core/errors';
import { TransientStoreError } from '../../lib/lambda/runtime';
import { prebundled } from '../../lib/constructs/handler-function';
import { LocalLambdas, lambdaNode } from '../../lib/local/lambda-runner';
import { synthesizeWorkflow } from '../../lib/local/workflow';
import { sdkRequires } from '../support/bundles';

const ROOT = path.resolve(__dirname, '..', '..');

/** Every error name a state machine's Retry and Catch clauses match, inner states included. */
function errorNames(machine: Record<string, unknown>): string[] {
  type State = { Retry?: { ErrorEquals: string[] }[]; Catch?: { ErrorEquals: string[] }[]; ItemProcessor?: Machine; Iterator?: Machine };
  type Machine = { States: Record<string, State> };
  return Object.values((machine as Machine).States).flatMap((s) => [
    ...[...(s.Retry ?? []), ...(s.Catch ?? [])].flatMap((c) => c.ErrorEquals),
    ...((s.ItemProcessor ?? s.Iterator) ? errorNames((s.ItemProcessor ?? s.Iterator) as Machine) : []),
  ]);
}

test('sdkRequires finds the SDK modules a bundle requires, and not those only named in a string', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-bundle-'));
  try {
    const file = path.join(dir, 'index.js');
    writeFileSync(file, 'var a=require("@aws-sdk/client-s3"),b=require(\'@smithy/node-http-handler\'),f=require("node:fs");');
    assert.deepEqual(sdkRequires(file), ['@aws-sdk/client-s3', '@smithy/node-http-handler']);
    writeFileSync(file, 'throw new Error(`register it by calling [require("@aws-sdk/signature-v4-crt");]`);var n="@smithy/types";');
    assert.deepEqual(sdkRequires(file), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const app of [billingApp, reindexApp]) {
  test(`every ${app.name} function bundles the AWS SDK: no bundle requires @aws-sdk/ or @smithy/`, { timeout: 240_000 }, () => {
    const functions = Object.values(synthesizeWorkflow(app).functions);
    assert.ok(functions.length > 0, 'the stack has functions');
    const external = functions
      .map((fn) => ({ id: fn.logicalId, requires: sdkRequires(path.join(fn.assetDir, 'index.js')) }))
      .filter((fn) => fn.requires.length > 0);
    assert.deepEqual(
      external,
      [],
      `these bundles load the runtime's SDK instead of their own:\n${external.map((f) => `  ${f.id}: ${f.requires.join(', ')}`).join('\n')}`,
    );
  });
}

/*
 * Source maps without their cold-start cost (docs/PERFORMANCE.md, "Cold start"): `--enable-source-maps` loads each
 * bundle's 4 MB map at every cold start and decodes it at the first stack formatted, inside the gap a lease covers.
 * The functions ship the map and a logged error's stack is mapped through it then, and only then.
 */
for (const app of [billingApp, reindexApp]) {
  test(`no ${app.name} function loads its source map at cold start; each ships one beside its bundle`, { timeout: 240_000 }, () => {
    const functions = Object.values(synthesizeWorkflow(app).functions);
    assert.ok(functions.length > 0, 'the stack has functions');
    for (const fn of functions) {
      assert.doesNotMatch(String(fn.environment.NODE_OPTIONS ?? ''), /source-maps/, `${fn.logicalId} enables source maps at every cold start`);
      assert.ok(existsSync(path.join(fn.assetDir, 'index.js.map')), `${fn.logicalId} ships no source map`);
    }
  });
}

test("a bundled function's logged error names its TypeScript sources, with no --enable-source-maps", { timeout: 240_000 }, () => {
  const chunk = Object.values(synthesizeWorkflow(billingApp).functions).find((fn) => fn.handlerName === 'chunk');
  assert.ok(chunk, 'the billing stack has its chunk function');
  // The first invocation fails in createRuntime (no job environment): its error is logged with a stack.
  const script = `require(${JSON.stringify(path.join(chunk.assetDir, 'index.js'))}).handler({}).catch(() => undefined);`;
  const run = spawnSync(lambdaNode().path, ['-e', script], { encoding: 'utf8', env: { PATH: process.env.PATH, TZ: 'UTC' }, timeout: 60_000 });
  // Powertools writes ERROR lines to stderr.
  const logged = `${run.stdout}\n${run.stderr}`
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { message?: string; error?: { stack?: string } })
    .find((l) => l.message === 'chunk failed');
  assert.ok(logged?.error?.stack, `the failure was logged with a stack:\n${run.stdout}${run.stderr}`);
  const frames = logged.error.stack.split('\n').filter((l) => l.trim().startsWith('at '));
  assert.match(frames[0], /lambda[/\\]runtime\.ts:\d+:\d+\)$/, `the top frame names the source:\n${logged.error.stack}`);
  assert.ok(!frames.some((f) => /index\.js:/.test(f)), `no frame is left in the bundle:\n${logged.error.stack}`);
});

/*
 * The package's prebundled handlers (tools/prebundle.ts: dist/handlers, what a user's synth deploys instead of
 * bundling them): one bundle exporting every handler, built from the same sources with HANDLER_BUNDLING's options.
 * Each export must answer as the synthesized per-handler bundle does, error names included: the workflow's Catch
 * and Retry match thrown class names, which minifying without keepNames would lose.
 */
test("the package's prebundled handlers answer as the synthesized bundles do, every error class's name kept", { timeout: 240_000 }, async () => {
  const dist = mkdtempSync(path.join(tmpdir(), 'fencepost-prebundle-'));
  try {
    const built = spawnSync(path.join(ROOT, 'node_modules/.bin/tsx'), [path.join(ROOT, 'tools/prebundle.ts'), dist], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(built.status, 0, `tools/prebundle.ts failed:\n${built.stdout}${built.stderr}`);
    const { folder, handlers } = prebundled(path.join(dist, 'constructs'));
    const specs = JSON.parse(readFileSync(handlers, 'utf8')) as Record<string, string>;
    const wf = synthesizeWorkflow(billingApp);
    const internal = Object.values(wf.functions).filter((fn) => fn.handlerName in specs);
    assert.deepEqual(internal.map((fn) => fn.handlerName).sort(), Object.keys(specs).sort(), 'every FencedJob handler is prebundled, and only those');

    // The class names the definitions match, kept in the bundle as keepNames writes them (a static `name`).
    const classes = [...Object.values(errors), TransientStoreError].map((c) => c.name);
    const matched = [...errorNames(wf.job.definition), ...errorNames(wf.sweeper.definition)].filter((n) => classes.includes(n));
    assert.ok(matched.includes(FencedOutError.name), `the workflow matches ${FencedOutError.name}: ${matched.join(', ')}`);
    const bundle = readFileSync(path.join(folder, 'index.js'), 'utf8');
    const lost = [...new Set(matched)].filter((name) => !bundle.includes(`(this,"${name}")`));
    assert.deepEqual(lost, [], 'class names the bundle does not keep');

    // Each handler, invoked in the local runner with no store to reach: the prebundled export and the synthesized
    // bundle answer alike, error class and message (the sweeper's first step with TransientStoreError).
    const unreachable = { dynamodb: 'http://127.0.0.1:9', s3: 'http://127.0.0.1:9' };
    // What an error says, beyond its class: its message, and the handler modules its (source-mapped) stack names. Most
    // handlers throw ConfigError on an empty input, and raise and complete with the same words: the module tells
    // them apart, so an export wired to the wrong handler fails here.
    const said = (message: string) => {
      const error = JSON.parse(message) as { errorMessage: string; trace?: string[] };
      const modules = new Set((error.trace ?? []).flatMap((l) => /lambda\/([a-z-]+)\.ts/.exec(l)?.[1] ?? []));
      return `${error.errorMessage} [${[...modules].join(' ')}]`;
    };
    const outcomes: Record<string, { synthesized: string; prebundled: string }> = {};
    for (const fn of internal) {
      const environment: Record<string, string> = {};
      for (const [k, v] of Object.entries(fn.environment)) environment[k] = typeof v === 'string' ? v : 'fencepost-t-x';
      const lambdas = new LocalLambdas({
        functions: {
          synthesized: { ...fn, environment },
          prebundled: { ...fn, environment, assetDir: folder, handler: specs[fn.handlerName] },
        },
        endpoints: unreachable,
      });
      const outcome = (id: string) =>
        lambdas.invoke(id, {}).then(
          (result) => `returned ${JSON.stringify(result)}`,
          (err: unknown) => `threw ${(err as Error).name}: ${said((err as Error).message)}`,
        );
      try {
        outcomes[fn.handlerName] = { synthesized: await outcome('synthesized'), prebundled: await outcome('prebundled') };
      } finally {
        await lambdas.close();
      }
    }
    for (const [name, o] of Object.entries(outcomes)) assert.equal(o.prebundled, o.synthesized, `${name}: ${JSON.stringify(outcomes)}`);
    assert.equal(outcomes['sweep-sight'].prebundled.split(':')[0], `threw ${TransientStoreError.name}`);
  } finally {
    rmSync(dist, { recursive: true, force: true });
  }
});

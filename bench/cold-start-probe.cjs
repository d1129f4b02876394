/**
 * Probe for bench/cold-start.ts: in a fresh Node process, load one bundled chunk function and invoke it once with an
 * empty event, which fails in createRuntime (no job environment) and is logged with its stack, as a failing first
 * invocation would be. Prints one JSON line: { loadedMs, failedMs }, each performance.now(), i.e. from this
 * process's start. The logged error goes to stderr, where the bench reads its stack. Not a benchmark on its own.
 *
 * argv: <bundle's index.js> [lazy]   lazy: process.setSourceMapsEnabled(true) after the load, before the invocation
 */
'use strict';
const { performance } = require('node:perf_hooks');

const [bundle, mode] = process.argv.slice(2);
const { handler } = require(bundle);
const loadedMs = performance.now();
if (mode === 'lazy') process.setSourceMapsEnabled(true);
handler({}).then(
  () => {
    process.stderr.write('the probe invocation was meant to fail\n');
    process.exitCode = 1;
  },
  () => process.stdout.write(`${JSON.stringify({ loadedMs, failedMs: performance.now() })}\n`),
);

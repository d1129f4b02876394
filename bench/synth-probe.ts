/**
 * Probe for bench/waste.ts: in a fresh process, how long loading the local workflow runner (aws-cdk-lib and the stack)
 * and one synthesizeWorkflow() take. Prints one JSON line { loadMs, synthMs }. Not a benchmark on its own.
 */
const t0 = performance.now();
const { synthesizeWorkflow } = require('../local/workflow') as typeof import('../local/workflow');
const t1 = performance.now();
synthesizeWorkflow();
const t2 = performance.now();
process.stdout.write(`${JSON.stringify({ loadMs: Math.round(t1 - t0), synthMs: Math.round(t2 - t1) })}\n`);

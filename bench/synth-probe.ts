/**
 * Probe for bench/waste.ts: in a fresh process, what the workflow engine pays before its first state: loading the
 * local runner, then getting the synthesized definition, either synthesized now (`cold`: aws-cdk-lib loaded and the
 * stack synthesized in-process) or read from the synth cache (`cached`). Prints one JSON line { loadMs, synthMs }.
 * Not a benchmark on its own.
 */
async function main(): Promise<void> {
  const mode = process.argv[2] === 'cached' ? 'cached' : 'cold';
  const t0 = performance.now();
  const wf = await import('../lib/local/workflow.js'); // loaded here, so its load time is measured
  const { billingApp } = await import('../apps/billing/app.js');
  const t1 = performance.now();
  if (mode === 'cached') wf.synthesizeWorkflow(billingApp);
  else wf.synthesizeWorkflowNow(billingApp);
  const t2 = performance.now();
  process.stdout.write(`${JSON.stringify({ mode, loadMs: Math.round(t1 - t0), synthMs: Math.round(t2 - t1) })}\n`);
}

void main();

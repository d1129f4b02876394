/**
 * The `fencepost` command: a thin adapter over the core library. It parses and validates every option before it
 * starts anything, wires the clients, the clock and the events, and maps outcomes to exit codes.
 */
import { systemClock } from '../core/clock';
import type { BillingSummary } from '../core/billing';
import { runDirect, runStepFunctions } from './engines';
import { audit, type AuditReport } from '../core/audit';
import { ConfigError, FencepostError, InfrastructureError } from '../core/errors';
import { Events } from '../core/events';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX, tableNames } from '../core/schema';
import { awsClients, localClients, type Endpoints } from '../core/stores';
import { startEmbeddedStack, type EmbeddedStack } from '../../local/stack';
import { provision } from '../../local/provision';
import { injectStoreFaults } from '../../local/store-faults';
import { faultHooks } from './faults';
import { EXIT, auditOptions, bumpOptions, chaosOptions, localOptions, storyOptions, parseCommand, runOptions, sweepOptions, type StoreTarget } from './options';
import { bumpCommand, sweepCommand } from './sweep';
import { auditTable, chaosTable, progressBar, summaryTable } from './progress';
import { runChaos } from '../../local/chaos';
import { playStory, storyTable } from '../../local/story';
import { HELP } from './help';

type Out = (text: string) => void;
const out: Out = (t) => process.stdout.write(t + '\n');
const err: Out = (t) => process.stderr.write(t + '\n');

/** Start the embedded stack unless endpoints were given; provision the tables and the bucket either way. */
async function withStores<T>(target: StoreTarget, body: (endpoints: Endpoints) => Promise<T>): Promise<T> {
  let stack: EmbeddedStack | undefined;
  if (!target.endpoints) stack = await startEmbeddedStack();
  const endpoints = target.endpoints ?? stack!.endpoints;
  const clients = localClients(endpoints);
  try {
    await provision(clients.raw, clients.s3, target.tablePrefix, target.bucket).catch((e) => {
      throw new InfrastructureError(`cannot reach the stores at ${endpoints.dynamodb} and ${endpoints.s3}: ${(e as Error).message}`, { cause: e });
    });
    return await body(endpoints);
  } finally {
    clients.destroy();
    await stack?.stop();
  }
}

async function runCommand(args: string[]): Promise<number> {
  const values = parseCommand('run', args);
  if (values.help) return out(HELP.run), EXIT.ok;
  const o = runOptions(values);
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    injectStoreFaults(clients, process.env.FENCEPOST_STORE_FAULTS); // the fault suite only
    const events = new Events(o.worker, systemClock);
    if (o.events) events.on((e) => process.stdout.write(JSON.stringify(e) + '\n'));
    if (!o.json && !o.events) events.on(progressBar(o.config.invoices));
    const hooks = faultHooks(process.env.FENCEPOST_FAULT, (point) => events.emit('observe', { fault: 'sigstop', ...point }));
    const deps = { ddb: clients.ddb, s3: clients.s3, tables: tableNames(o.tablePrefix), bucket: o.bucket, clock: systemClock, events };
    const run = { date: o.date, worker: o.worker, config: o.config, chunkConcurrency: o.chunkConcurrency, clients, hooks };
    let summary: BillingSummary;
    let report: AuditReport | undefined;
    try {
      summary = o.engine === 'direct' ? await runDirect(deps, run) : await runStepFunctions(deps, run);
      // Without endpoints the stack is ours alone, so check the night before it goes away.
      if (o.audit && !o.endpoints) report = await audit(deps, o.date, o.config.invoices);
    } finally {
      clients.destroy();
    }
    if (o.json) out(JSON.stringify(report ? { ...summary, audit: report } : summary));
    else if (!o.events) {
      out(summaryTable(summary, report));
      if (report && !report.ok) out(auditTable(report));
    }
    if (report && !report.ok) return EXIT.auditFailed;
    return summary.outcome === 'completed' || summary.outcome === 'already-done' ? EXIT.ok : EXIT.lost;
  });
}

async function auditCommand(args: string[]): Promise<number> {
  const values = parseCommand('audit', args);
  if (values.help) return out(HELP.audit), EXIT.ok;
  const o = auditOptions(values);
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    try {
      const report = await audit({ ddb: clients.ddb, s3: clients.s3, tables: tableNames(o.tablePrefix), bucket: o.bucket }, o.date, o.invoices);
      out(o.json ? JSON.stringify(report) : auditTable(report));
      return report.ok ? EXIT.ok : EXIT.auditFailed;
    } finally {
      clients.destroy();
    }
  });
}

async function localCommand(args: string[]): Promise<number> {
  const values = parseCommand('local', args);
  if (values.help) return out(HELP.local), EXIT.ok;
  const o = localOptions(values);
  const stack = await startEmbeddedStack(o);
  const clients = localClients(stack.endpoints);
  try {
    await provision(clients.raw, clients.s3, DEFAULT_TABLE_PREFIX, DEFAULT_BUCKET);
  } finally {
    clients.destroy();
  }
  out(JSON.stringify({ dynamodbEndpoint: stack.endpoints.dynamodb, s3Endpoint: stack.endpoints.s3, dataDir: o.dataDir ?? null }));
  err(`local stack up: --dynamodb-endpoint ${stack.endpoints.dynamodb} --s3-endpoint ${stack.endpoints.s3}  (Ctrl-C to stop)`);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  await stack.stop();
  err('local stack stopped');
  return EXIT.ok;
}

async function sweepCommandEntry(args: string[]): Promise<number> {
  const values = parseCommand('sweep', args);
  if (values.help) return out(HELP.sweep), EXIT.ok;
  const o = sweepOptions(values);
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    try {
      return await sweepCommand(o, clients, out, err);
    } finally {
      clients.destroy();
    }
  });
}

async function bumpCommandEntry(args: string[]): Promise<number> {
  const values = parseCommand('bump-epochs', args);
  if (values.help) return out(HELP.bump), EXIT.ok;
  const o = bumpOptions(values);
  if (o.aws) {
    const clients = awsClients(); // the one command that talks to AWS: the restored table, named explicitly
    try {
      return await bumpCommand(o, clients, out);
    } finally {
      clients.destroy();
    }
  }
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    try {
      return await bumpCommand(o, clients, out);
    } finally {
      clients.destroy();
    }
  });
}

async function chaosCommand(args: string[]): Promise<number> {
  const values = parseCommand('chaos', args);
  if (values.help) return out(HELP.chaos), EXIT.ok;
  const o = chaosOptions(values);
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    try {
      err(`chaos: ${o.schedules} schedules, seed ${o.seed}, kinds ${o.kinds.join(',')}`);
      const report = await runChaos({
        endpoints, clients, schedules: o.schedules, seed: o.seed, kinds: o.kinds, workflowShare: o.workflowShare,
        onResult: (r) => err(`${r.ok ? 'ok  ' : 'FAIL'} #${r.index} seed ${r.seed} ${r.kind} (${r.engine}, ${r.seconds.toFixed(1)} s): ${r.detail}${r.ok ? '' : `\n      ${r.violations.join('\n      ')}\n      replay: fencepost chaos --seed ${r.seed} --schedules 1 --kinds ${r.kind}`}`),
      });
      if (o.json) out(JSON.stringify({ ...report, results: report.results.filter((r) => !r.ok) }));
      else out(chaosTable(report));
      return report.violations === 0 ? EXIT.ok : EXIT.auditFailed;
    } finally {
      clients.destroy();
    }
  });
}

async function storyCommand(args: string[]): Promise<number> {
  const values = parseCommand('story', args);
  if (values.help) return out(HELP.story), EXIT.ok;
  const o = storyOptions(values);
  return withStores(o, async (endpoints) => {
    const clients = localClients(endpoints);
    try {
      err(`the billing story at time scale ${o.timeScale}: lease ${Math.round(10_000 * o.timeScale)} ms, renew ${Math.round(3_000 * o.timeScale)} ms, margin ${Math.round(2_000 * o.timeScale)} ms`);
      const result = await playStory(endpoints, clients, o.timeScale, o.json ? undefined : (r) => err(`  ${r.t.toFixed(2)} s  ${r.actor}: ${r.event}`));
      out(o.json ? JSON.stringify(result) : storyTable(result));
      return result.audit.ok ? EXIT.ok : EXIT.auditFailed;
    } finally {
      clients.destroy();
    }
  });
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'run': return await runCommand(args);
      case 'audit': return await auditCommand(args);
      case 'local': return await localCommand(args);
      case 'sweep': return await sweepCommandEntry(args);
      case 'bump-epochs': return await bumpCommandEntry(args);
      case 'chaos': return await chaosCommand(args);
      case 'story': return await storyCommand(args);
      case undefined: case 'help': case '--help': case '-h':
        out(HELP.main);
        return command === undefined ? EXIT.usage : EXIT.ok;
      default:
        err(`fencepost: unknown command ${JSON.stringify(command)}; commands are run, audit, sweep, bump-epochs, chaos, story, local (fencepost --help)`);
        return EXIT.usage;
    }
  } catch (e) {
    if (e instanceof ConfigError) {
      err(`fencepost ${command}: ${e.message}`);
      return EXIT.usage;
    }
    if (e instanceof FencepostError) {
      err(`fencepost ${command}: ${e.message}`);
      return EXIT.failure;
    }
    err(`fencepost ${command}: ${(e as Error).stack ?? String(e)}`);
    return EXIT.failure;
  }
}
